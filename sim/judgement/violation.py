"""A violation of an invariant, the verdict of a schedule from its violations, and the names
reports show for each invariant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAFETY = ("I0", "I1", "I2", "I3", "I4", "I5", "I6", "I8", "I9", "I11", "I12", "I13")
SAFETY += ("I14", "I15", "I16")  # inbox modes
SAFETY += ("I17",)  # compensation
SAFETY += ("I18",)  # agent state
SAFETY += ("I19",)  # compaction
SAFETY += ("I20",)  # sub-agents
VERDICT_ORDER = ("error", "safety", "liveness", "nondeterminism", "pass")

INVARIANT_NAMES = {
    "I0": "runtime integrity",
    "I1": "effects match policy",
    "I2": "log intact",
    "I3": "checkpoints consistent",
    "I4": "crash-only resume",
    "I5": "inputs settled, no duplicates",
    "I6": "one result per intent, no effect without intent",
    "I7": "liveness",
    "I8": "fencing",
    "I9": "transparency",
    "I10": "determinism",
    "I11": "model calls bounded",
    "I12": "durability of acknowledgements",
    "I13": "damaged storage detected",
    "I14": "steering lands at a post-tools boundary",
    "I15": "queue order preserved",
    "I16": "a rejected input wrote nothing",
    "I17": "abandoned run restores the workspace",
    "I18": "agent state follows the log",
    "I19": "compaction applies fresh summaries only, at boundaries",
    "I20": "one child per delegating call",
}


@dataclass(frozen=True)
class Violation:
    invariant: str
    explanation: str
    witness: tuple[str, ...] = ()
    expected: str = ""
    actual: str = ""

    @property
    def verdict(self) -> str:
        if self.invariant == "I7":
            return "liveness"
        if self.invariant == "I10":
            return "nondeterminism"
        return "safety"

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


def verdict_of(violations: list[Violation]) -> str:
    """The verdict of a schedule: its most severe violation's (``VERDICT_ORDER``), or pass."""
    for candidate in VERDICT_ORDER:
        if any(v.verdict == candidate for v in violations):
            return candidate
    return "pass"


def worst_verdict(counts: dict[str, int]) -> str:
    """The most severe verdict with a non-zero count (``pass`` when there is none)."""
    for verdict in VERDICT_ORDER:
        if counts.get(verdict):
            return verdict
    return "pass"
