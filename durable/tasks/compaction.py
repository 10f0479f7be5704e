"""The compaction task: one summary of a prefix of the conversation. Phase ``summarise`` →
terminal (docs/architecture.md, 1.8; ``durable.compaction``).

The intent (``compaction_started``) pinned the summarisation request. The task sends it and, in
the commit after the response, applies the summary -- at a turn boundary: the turn that asked
for it waits in ``prepare`` and nothing else of the run is live -- and returns that turn to
``prepare``, which pins its request against the compacted context. An intent written by an
earlier incarnation (the scheduler only starts this task after a crash or a takeover then) is
settled ``stale``: its summary, if the model ever produced it, died with that process.
"""

from __future__ import annotations

from typing import Literal

from durable.events import (
    CompactionApplied,
    CompactionSettled,
    Event,
    TaskCheckpoint,
    TaskSettled,
)
from durable.model import ModelError
from durable.state import Compaction, State, compaction_boundary_problem
from durable.tasks import TaskEnv, live_task, pinned_request


async def run_compaction(env: TaskEnv, task_id: str) -> None:
    task = live_task(env.journal.state, task_id)
    if task is None:
        return
    compaction_id = str(task.data["compaction_id"])
    compaction = env.journal.state.compactions[compaction_id]
    if compaction.epoch != env.journal.lease.epoch:
        detail = f"started in epoch {compaction.epoch}; a crash or takeover lost its summary"
        await env.journal.commit(lambda s: _settle(s, compaction_id, "stale", detail))
        return
    summary = await _summarise(env, task_id)
    if isinstance(summary, ModelError):
        detail = f"the model refused the summary: {summary}"
        await env.journal.commit(lambda s: _settle(s, compaction_id, "failed", detail))
        return
    await env.journal.commit(lambda s: _apply(s, compaction_id, summary))


async def _summarise(env: TaskEnv, task_id: str) -> str | ModelError:
    """Send the pinned summarisation request: the summary, or the model's error."""
    assert env.model is not None, "a compaction needs a model"
    request = pinned_request(env.journal.state, task_id)
    try:
        response = await env.model.complete(request)
    except ModelError as error:
        return error
    return response.text


def _resume_turn(state: State, compaction: Compaction, *, keep_flag: bool) -> list[Event]:
    """The waiting turn back to ``prepare`` (its attempt kept; its forced-compaction flag kept
    only when the compaction went stale, so a new one is started)."""
    turn = state.tasks.get(compaction.requested_by)
    if turn is None or turn.status == "terminal":
        return []
    data = dict(turn.data) if keep_flag else {"attempt": int(turn.data.get("attempt", 1))}
    return [TaskCheckpoint(task_id=turn.id, phase="prepare", data=data)]


def _apply(state: State, compaction_id: str, summary: str) -> list[Event]:
    """Apply the summary if this commit is a boundary and the prefix is unchanged, else settle
    it stale (never applied)."""
    compaction = state.compactions[compaction_id]
    if live_task(state, compaction.task_id) is None:
        return []
    problem = compaction_boundary_problem(state, compaction)
    if problem:
        return _settle(state, compaction_id, "stale", problem)
    return [
        CompactionApplied(
            compaction_id=compaction_id,
            through=compaction.through,
            prefix_digest=compaction.prefix_digest,
            summary=summary,
        ),
        TaskSettled(task_id=compaction.task_id, outcome="completed"),
        *_resume_turn(state, compaction, keep_flag=False),
    ]


def _settle(
    state: State, compaction_id: str, outcome: Literal["stale", "failed"], detail: str
) -> list[Event]:
    compaction = state.compactions[compaction_id]
    if live_task(state, compaction.task_id) is None:
        return []
    task_outcome: Literal["failed", "superseded"] = (
        "failed" if outcome == "failed" else "superseded"
    )
    return [
        CompactionSettled(compaction_id=compaction_id, outcome=outcome, detail=detail),
        TaskSettled(task_id=compaction.task_id, outcome=task_outcome, detail=outcome),
        *_resume_turn(state, compaction, keep_flag=outcome == "stale"),
    ]
