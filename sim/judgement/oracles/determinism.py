"""I10, determinism: the same scenario, seed and schedule give the same fingerprint. It needs a
second run (``sim.judgement.judge`` makes it, or a forked sweep's second child), so ``check``
does not run it.

What either run did is every other family's.
"""

from __future__ import annotations

from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_determinism(first: RunResult, second: RunResult) -> list[Violation]:
    return compare_fingerprints(first.trace.fingerprint, second.trace.fingerprint)


def compare_fingerprints(first: str, second: str) -> list[Violation]:
    """I10 from two runs' fingerprints (the runs themselves may be in other processes)."""
    if first == second:
        return []
    return [
        Violation(
            "I10",
            "the same scenario, seed and schedule gave a different trace",
            (f"first fingerprint {first}", f"second fingerprint {second}"),
            expected=first,
            actual=second,
        )
    ]
