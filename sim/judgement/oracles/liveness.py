"""I7, liveness: the world settled within the scenario's liveness bound of virtual time after
the last fault. The only liveness verdict of the reference runtime.

A runtime that raised is I0's, not a liveness failure; whether what settled is right is every
other family's.
"""

from __future__ import annotations

from sim.judgement.oracles.facts import Facts
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_liveness(result: RunResult, facts: Facts) -> list[Violation]:
    if result.errors.runtime_error is not None:
        return []
    if result.trace.settled:
        return []
    pending = []
    if facts.state is not None:
        pending = [
            f"{s.id} ({s.request_id}) {s.status}"
            for s in facts.state.submissions.values()
            if s.status not in ("done", "unanswered")
        ]
    return [
        Violation(
            "I7",
            f"not settled {result.scenario.liveness_bound_s:.0f}s (virtual) after the last fault",
            tuple(pending[:3]),
            expected="every submission done or unanswered",
            actual=f"{len(pending)} unsettled",
        )
    ]
