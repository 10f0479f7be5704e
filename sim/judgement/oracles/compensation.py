"""I17, compensation: once a run abandoned with compensation has stopped, every compensable call
of it whose effect landed was undone exactly once, in the reverse order of the effects; the
files those calls edited are as the run found them (the services' own history, not the
runtime's pre-image) and their charges are refunded.

How often the original call took effect is I1's; an undo before its intent was durable is I6's.
Judged only within the store's promise (``check`` decides).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from durable.events import RunStarted, RunStopped, TaskCreated, ToolIntent
from durable.tools import compensation_call_id
from sim.judgement.oracles.facts import durable_commits
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


@dataclass
class _Abandoned:
    """What I17 reads of one run from the final log: the boundaries of the commits that
    started and stopped it, and its compensable calls (call id -> the file path it edits)."""

    started_at: int = -1
    stopped_at: int | None = None
    abandoned: bool = False
    calls: dict[str, str] = field(default_factory=dict)


def _abandoned_runs(result: RunResult) -> dict[str, _Abandoned]:
    """The runs of the final log that stopped ``abandoned``, with their compensable calls."""
    runs: dict[str, _Abandoned] = {}
    run_of_task: dict[str, str] = {}
    for index, records in durable_commits(result):
        for record in records:
            event = record.event
            if isinstance(event, RunStarted):
                runs[event.run_id] = _Abandoned(started_at=index)
            elif isinstance(event, TaskCreated):
                run_of_task[event.task_id] = event.run_id
            elif isinstance(event, ToolIntent) and event.compensable:
                run = runs.get(run_of_task.get(event.task_id, ""))
                if run is not None:
                    run.calls[event.call_id] = str(event.arguments.get("path", ""))
            elif isinstance(event, RunStopped) and event.run_id in runs:
                runs[event.run_id].stopped_at = index
                runs[event.run_id].abandoned = event.reason == "abandoned"
    return {run_id: run for run_id, run in runs.items() if run.abandoned}


def _workspace_at(result: RunResult, boundary: int) -> dict[str, str]:
    """The workspace as it was at ``boundary`` (after every workspace effect before it)."""
    files: dict[str, str] = {}
    for index, snapshot in result.outside.workspace_history:
        if index < boundary:
            files = snapshot
    return files


def check_compensation(result: RunResult) -> list[Violation]:
    """I17: once an abandoned run has stopped (its compensations settled), every compensable call
    of it whose effect landed (the ledger) was undone exactly once, after its effect, the
    compensations in the reverse order of the effects, each file those calls edited is what it
    was when the run started (the services' workspace history, not the runtime's pre-image), and
    each charge of theirs is refunded in full.
    A compensation of a call whose effect never landed (an interrupted call) may run, once."""
    for run_id, run in sorted(_abandoned_runs(result).items()):
        assert run.stopped_at is not None
        effects = [e for e in result.outside.ledger if e.applied]
        originals = [e for e in effects if e.call_id in run.calls]
        undo_ids = {compensation_call_id(c): c for c in run.calls}
        undos = [e for e in effects if e.call_id in undo_ids]
        counts = Counter(undo_ids[e.call_id] for e in undos)
        twice = sorted(c for c, n in counts.items() if n > 1)
        missing = sorted({e.call_id for e in originals} - set(counts))
        if twice or missing:
            call = (twice or missing)[0]
            return [
                Violation(
                    "I17",
                    f"run {run_id} was abandoned; the compensation of {call} was applied "
                    f"{counts.get(call, 0)} times",
                    tuple(str(e) for e in originals + undos if call in e.call_id)[:4],
                    expected="every landed compensable call undone exactly once",
                    actual=f"{counts.get(call, 0)} applied compensation(s) of {call}",
                )
            ]
        landed = [e.call_id for e in originals]
        undone = [undo_ids[e.call_id] for e in undos if undo_ids[e.call_id] in landed]
        if undone != landed[::-1]:
            return [
                Violation(
                    "I17",
                    f"run {run_id}: compensations applied out of reverse order",
                    tuple(str(e) for e in undos)[:4],
                    expected=f"undone in the order {', '.join(landed[::-1])}",
                    actual=f"undone in the order {', '.join(undone)}",
                )
            ]
        violation = _workspace_restored(result, run_id, run) or _charges_refunded(
            result, run_id, originals
        )
        if violation is not None:
            return [violation]
    return []


def _charges_refunded(result: RunResult, run_id: str, originals: list[Any]) -> Violation | None:
    """I17 for the payments service: every charge of the run that landed is refunded in full."""
    for effect in originals:
        if (effect.service, effect.op) != ("payments", "charge"):
            continue
        charged, refunded = (
            result.outside.charges.get(effect.key),
            result.outside.refunds.get(effect.key),
        )
        if refunded != charged:
            return Violation(
                "I17",
                f"run {run_id} was abandoned and compensated, yet charge {effect.key} stands",
                (str(effect),),
                expected=f"refunded {charged}",
                actual=f"refunded {refunded}",
            )
    return None


def _workspace_restored(result: RunResult, run_id: str, run: _Abandoned) -> Violation | None:
    """I17's last part: the files the run's compensable calls edited are, when it stopped, what
    they were when it started."""
    assert run.stopped_at is not None
    before = _workspace_at(result, run.started_at)
    after = _workspace_at(result, run.stopped_at)
    for path in sorted(set(run.calls.values()) - {""}):
        if before.get(path) != after.get(path):
            return Violation(
                "I17",
                f"run {run_id} was abandoned and compensated, yet {path} was not restored",
                (f"{path} when the run started: {before.get(path)!r}"[:200],),
                expected=repr(before.get(path))[:200],
                actual=repr(after.get(path))[:200],
            )
    return None
