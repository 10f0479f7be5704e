"""I5, inputs: a request id is accepted once and a re-sent one maps to its first submission; no
user entry appears more often than the client sent it; in a settled world every submission
ended ``done`` or ``unanswered``.

A re-send that maps to a new submission after a power loss the store mode does not promise to
survive is a lost acknowledgement, judged by I12's suffix check instead; a rejected input is
I16's.
"""

from __future__ import annotations

from collections import Counter

from sim.judgement.oracles.facts import Facts
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_inputs(result: RunResult, facts: Facts, *, promised: bool = True) -> list[Violation]:
    assert facts.state is not None
    state = facts.state
    out: list[Violation] = []
    by_request = Counter(s.request_id for s in state.submissions.values() if s.request_id)
    for rid, n in by_request.items():
        if n > 1:
            out.append(Violation("I5", f"request {rid} was accepted {n} times", ()))
    contents = Counter(m.content for m in state.messages if m.role == "user")
    expected_contents = Counter(i.content for i in result.scenario.inputs)
    for content, n in contents.items():
        if n > expected_contents.get(content, 0):
            out.append(
                Violation("I5", "a user entry appears more often than it was sent", (content[:80],))
            )
    # A re-sent request id that maps to a new submission is a lost acknowledgement in a mode
    # that may lose it (power loss without fsync); the mode's own promise is I12's suffix check.
    for rid, first, second in result.outside.client.remapped if promised else []:
        out.append(
            Violation(
                "I5",
                f"re-sending request {rid} returned another submission",
                (f"first {first}", f"then {second}"),
                expected=first,
                actual=second,
            )
        )
    for rid, sid in result.outside.client.acked.items():
        sub = state.submissions.get(sid)
        if sub is not None and sub.request_id != rid:
            out.append(Violation("I5", f"request {rid} maps to another submission {sid}", ()))
    if result.trace.settled:
        for sub in state.submissions.values():
            if sub.status not in ("done", "unanswered"):
                out.append(Violation("I5", f"submission {sub.id} ended {sub.status}", ()))
    return out
