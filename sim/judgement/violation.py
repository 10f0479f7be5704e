"""A violation of an invariant, and the verdict of a schedule from its violations.

A violation names its invariant by code; the code must be registered (``sim.judgement.invariants``)
when the violation is built, so a typo in an oracle fails at once instead of reaching a report
as a safety finding nobody can look up, and its verdict is the registry's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sim.judgement.invariants import invariant


class Verdict(StrEnum):
    """A judged schedule's verdict, most severe first: ``error`` is the harness's own (a child
    that raised or hung), ``pass`` no violation; the others are the worst violation's
    (``sim.judgement.invariants``). A ``StrEnum``, so a report and a JSON document read it as
    its text."""

    ERROR = "error"
    SAFETY = "safety"
    LIVENESS = "liveness"
    NONDETERMINISM = "nondeterminism"
    PASS = "pass"


#: The verdicts, most severe first.
VERDICT_ORDER: tuple[Verdict, ...] = tuple(Verdict)


@dataclass(frozen=True)
class Violation:
    invariant: str
    explanation: str
    witness: tuple[str, ...] = ()
    expected: str = ""
    actual: str = ""

    def __post_init__(self) -> None:
        invariant(self.invariant)  # UnknownInvariant for a code with no record

    @property
    def verdict(self) -> str:
        return invariant(self.invariant).verdict

    def to_json(self) -> dict[str, Any]:
        """The one JSON form of a violation (results documents, child outcomes, replay)."""
        return {
            "invariant": self.invariant,
            "explanation": self.explanation,
            "witness": list(self.witness),
            "expected": self.expected,
            "actual": self.actual,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Violation:
        return cls(
            doc["invariant"],
            doc["explanation"],
            tuple(doc["witness"]),
            doc["expected"],
            doc["actual"],
        )


def verdict_of(violations: Sequence[Violation]) -> Verdict:
    """The verdict of a schedule: its most severe violation's (``VERDICT_ORDER``), or pass."""
    for candidate in VERDICT_ORDER:
        if any(v.verdict == candidate for v in violations):
            return candidate
    return Verdict.PASS


def worst_verdict(counts: dict[str, int]) -> str:
    """The most severe verdict with a non-zero count (``pass`` when there is none)."""
    for verdict in VERDICT_ORDER:
        if counts.get(verdict):
            return verdict
    return "pass"
