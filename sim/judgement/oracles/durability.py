"""I12, durability of acknowledgements: within the store mode's promise, every acknowledged
submission and every answer returned is what the log holds (``check_durability``); outside it (a
power loss in a mode without a sync per commit), only a suffix of acknowledged commits may be
lost (``check_suffix_loss``).

What the surviving log says is the other families'; a rejected input was never acknowledged
(I16).
"""

from __future__ import annotations

from sim.judgement.oracles.damage_table import table_allows_loss
from sim.judgement.oracles.facts import Facts
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_suffix_loss(result: RunResult) -> list[Violation]:
    """I12 for a mode that does not promise power-loss durability (``fsync=False``: the file
    store without fsync, SQLite with ``synchronous=NORMAL``): a power loss may lose acknowledged
    commits, but only a *suffix* of them -- never one from the middle."""
    final = {r.checksum for r in result.durable.records}
    accepted = {a.boundary for a in result.leases.accepted}
    previous = -1  # what survived an earlier power loss is durable from then on
    # A storage fault the damage table lets lose commits is a loss of its own, judged by I23:
    # like a power loss, it closes the window of commits the next power loss is judged on.
    damage_loses = table_allows_loss(result)
    for crash in result.trace.crashes:
        if crash.point.kind != "power" and not (crash.point.kind == "storage" and damage_loses):
            continue
        before = [
            (index, records)
            for index, records in result.durable.commits
            if index in accepted and previous < index < crash.point.index and records
        ]
        previous = crash.point.index
        kept = [records[0].checksum in final for _, records in before]
        if kept and kept != sorted(kept, reverse=True):
            lost = next(i for i, (idx, _) in enumerate(before) if not kept[i])
            later = next(i for i in range(lost + 1, len(kept)) if kept[i])
            return [
                Violation(
                    "I12",
                    "a power loss dropped an acknowledged commit but kept a later one",
                    (
                        f"lost: commit at boundary {before[lost][0]} "
                        f"(#{before[lost][1][0].sequence})",
                        f"kept: commit at boundary {before[later][0]}",
                    ),
                    expected="only a suffix of acknowledged commits lost",
                    actual="a commit lost from the middle",
                )
            ]
    return []


def check_durability(result: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    state = facts.state
    out: list[Violation] = []
    for rid in result.outside.client.lost_acks:
        out.append(Violation("I12", f"acknowledged submission {rid} vanished after a crash", ()))
    for rid, sid in result.outside.client.acked.items():
        if sid not in state.submissions:
            out.append(
                Violation("I12", f"acknowledged submission {rid} ({sid}) is not durable", ())
            )
    for rid, (status, answer, _reason) in result.outside.client.answers.items():
        if status == "rejected" and rid not in result.outside.client.acked:
            continue  # refused as busy: nothing of it is in the log (I16)
        acked_as = result.outside.client.acked.get(rid)
        sub = state.submissions.get(acked_as) if acked_as else None
        if sub is None or sub.status != status or sub.answer != answer:
            out.append(
                Violation(
                    "I12",
                    f"the answer returned for {rid} is not what the log holds",
                    (),
                    expected=f"{status}: {answer}",
                    actual=f"{sub.status}: {sub.answer}" if sub else "missing",
                )
            )
    return out
