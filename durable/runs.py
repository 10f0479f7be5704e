"""Pure event builders for starting and settling runs: only a crash may resume
(docs/architecture.md, 1.5).

Every way control returns to a caller — completed, model error, abort, budget exhausted, no model —
goes through ``settle_run``: it closes every open intent with a result, makes every live task
of the run terminal, settles the run's inputs and stops the run, all in one commit. Nothing of a
settled run can run again, and the next input starts a fresh run whose first request contains it.

Inbox modes (``Conversation.submit``): queued inputs wait in ``State.queue`` in acceptance order.
Steering inputs are placed into the active run by ``place_steering`` at its next post-tools
boundary; whatever is still queued when the run settles -- follow-ups and steering inputs that
missed their run alike -- starts the next run together, in acceptance order (a steering input
is never reordered before an earlier follow-up: both are the caller's words, in the order given).
"""

from __future__ import annotations

from durable.agent import outcome_events
from durable.events import (
    Budget,
    CompactionSettled,
    Event,
    InputSettled,
    InputsSteered,
    RunStarted,
    RunStopped,
    StopReason,
    TaskCreated,
    TaskOutcome,
    TaskSettled,
    ToolResult,
)
from durable.ports import Ids
from durable.state import State


def start_run(state: State, ids: Ids, budget: Budget, inputs: list[str]) -> list[Event]:
    """A new run over ``inputs`` (queued submissions) with its first generation task.

    The caller guarantees no run is active once the events before these are applied."""
    assert inputs, "a run needs inputs"
    run_id = ids.new("run")
    return [
        RunStarted(run_id=run_id, inputs=list(inputs), budget=budget),
        TaskCreated(task_id=ids.new("task"), kind="generation", run_id=run_id, phase="prepare"),
    ]


def settle_run(
    state: State,
    ids: Ids,
    budget: Budget,
    *,
    reason: StopReason,
    answer: str | None = None,
    detail: str = "",
    start_next: bool = True,
    settled: frozenset[str] = frozenset(),
) -> list[Event]:
    """Settle the active run: results for open intents, terminal tasks, settled inputs, stop.

    With ``start_next``, queued inputs start the next run in the same commit, so no input waits
    for a trigger that a crash could lose. ``settled``: tasks the caller's own events (before
    these, in the same commit) already settle.
    """
    run_id = state.active_run
    assert run_id is not None, "no active run to settle"
    run = state.runs[run_id]
    assert (reason == "completed") == (answer is not None), "only a completed run has an answer"
    events = close_tasks(state, run_id, reason, settled=settled)
    for sid in run.inputs:
        if reason == "completed":
            events.append(InputSettled(submission_id=sid, status="done", answer=answer))
        else:
            events.append(InputSettled(submission_id=sid, status="unanswered", reason=reason))
    events.append(RunStopped(run_id=run_id, reason=reason, detail=detail))
    if start_next and state.queue:
        events.extend(start_run(state, ids, budget, list(state.queue)))
    return events


def close_tasks(
    state: State, run_id: str, reason: str, *, settled: frozenset[str] = frozenset()
) -> list[Event]:
    """Results for the run's open intents and a terminal outcome for each of its live tasks
    (except ``settled``): nothing of the run's work runs again."""
    events: list[Event] = []
    bumps = 0  # revisions taken by in-flight edits (their effect is unknown)
    for intent in state.unresolved_intents():
        task = state.tasks[intent.task_id]
        if task.run_id == run_id:
            events.append(
                ToolResult(
                    task_id=task.id,
                    call_id=intent.call_id,
                    output=f"Tool {intent.tool} was not finished: the run stopped ({reason})",
                    is_error=True,
                    source="aborted",
                )
            )
            unknown = outcome_events(state, intent, ok=False, known=False, offset=bumps)
            bumps += len(unknown)
            events += unknown
    compaction = state.open_compaction()
    if compaction is not None and compaction.run_id == run_id:
        events.append(
            CompactionSettled(compaction_id=compaction.id, outcome="aborted", detail=reason)
        )
    for task in state.tasks.values():
        if task.run_id == run_id and task.status != "terminal" and task.id not in settled:
            outcome: TaskOutcome = "completed" if reason == "completed" else "aborted"
            events.append(TaskSettled(task_id=task.id, outcome=outcome, detail=reason))
    return events


def compensation_plan(state: State, run_id: str) -> list[str]:
    """The calls an abandoned run undoes, in the order their compensations run: the reverse of
    the order the calls took effect in (docs/runtime.md, "Compensation"). A completed call took
    effect when its result was committed; a call whose intent has no result yet (in flight, or
    interrupted and waiting, e.g. for the operator who now rejects it) may have taken effect
    and is the latest, so it is undone first -- undoing to a recorded pre-image is right
    whether or not its effect landed. Calls that failed or never ran have nothing to undo."""
    undo: list[tuple[int, int, str]] = []
    for intent in state.intents.values():
        if not intent.compensable or state.tasks[intent.task_id].run_id != run_id:
            continue
        result = state.tool_results.get(intent.call_id)
        if result is None:
            undo.append((1, intent.sequence, intent.call_id))
        elif result.source in ("executed", "verified") and not result.is_error:
            assert intent.result_sequence is not None
            undo.append((0, intent.result_sequence, intent.call_id))
    return [call_id for _, _, call_id in sorted(undo, reverse=True)]


def abandon_run(state: State, ids: Ids, budget: Budget, *, detail: str) -> list[Event]:
    """Abandon the active run (``Conversation.abandon``/``reject``): its work stops as on an
    abort (an open intent, a call an operator rejects among them, gets an error result)
    and, if it has calls to undo, a compensation task undoes them before the run stops
    (``durable.tasks.compensation``); queued inputs are withdrawn. A run already being
    abandoned is left alone: the first abandonment's plan stands."""
    run_id = state.active_run
    if run_id is None or state.compensating_task() is not None:
        return withdraw_queued(state, "abandoned")
    plan = compensation_plan(state, run_id)
    if not plan:
        events = settle_run(state, ids, budget, reason="abandoned", detail=detail, start_next=False)
        return events + withdraw_queued(state, "abandoned")
    data = {"calls": plan, "detail": detail}
    compensate = TaskCreated(
        task_id=ids.new("task"), kind="compensation", run_id=run_id, phase="compensate", data=data
    )
    return [
        *close_tasks(state, run_id, "abandoned"),
        compensate,
        *withdraw_queued(state, "abandoned"),
    ]


def place_steering(state: State, task_id: str) -> list[Event]:
    """The queued steering inputs placed into the run of ``task_id`` -- a generation task whose
    tools are all settled -- for the commit that settles it and creates the next turn (the
    caller puts these events between the two). Empty when nothing is steering."""
    task = state.tasks[task_id]
    assert task.kind == "generation" and task.phase == "tools", "steering only after tools"
    assert task.status != "terminal", "steering placed once, by the commit settling the turn"
    assert all(state.tasks[t].status == "terminal" for t in task.waiting_on), "tools not done"
    steering = state.steering_queue()
    if not steering:
        return []
    return [InputsSteered(run_id=task.run_id, task_id=task_id, inputs=steering)]


def withdraw_queued(state: State, reason: str) -> list[Event]:
    """Settle every queued (never placed) input as unanswered, e.g. on abort: follow-ups and
    steering inputs alike (what was already placed stays in the log)."""
    return [
        InputSettled(submission_id=sid, status="unanswered", reason=reason) for sid in state.queue
    ]
