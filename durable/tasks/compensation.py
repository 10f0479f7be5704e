"""The compensation task: undoes an abandoned run's compensable calls, then stops the run.

Created by the commit that abandons the run (``durable.runs.abandon_run``) with its plan, the
calls to undo in the order their compensations run (the reverse of the order the calls took
effect in). Each compensation follows the tool-call protocol (docs/runtime.md, "Compensation"): a
``CompensationIntent`` is committed before the compensating action runs, a
``CompensationResult`` after. A crash between the two leaves the intent without a result; the
next process runs that compensation again under the same key (derived from the call), which the
service dedupes, so it takes effect exactly once. When every compensation has its result, the
task settles and the run stops (``abandoned``) in one commit; queued inputs start the next run.
"""

from __future__ import annotations

from durable.events import (
    CompensationIntent,
    CompensationResult,
    Event,
    TaskOutcome,
    TaskSettled,
)
from durable.journal import Builder
from durable.runs import settle_run
from durable.state import Intent, State
from durable.tasks import TaskEnv, is_tool_failure, live_task
from durable.tools import ToolContext, compensation_call_id, compensation_key


async def run_compensation(env: TaskEnv, task_id: str) -> None:
    """Run the plan from the first call whose compensation has no result yet."""
    task = live_task(env.journal.state, task_id)
    if task is None:
        return
    assert task.kind == "compensation" and task.phase == "compensate", f"{task_id}: {task.phase}"
    for call_id in list(task.data["calls"]):
        intent = env.journal.state.intents[call_id]
        if intent.compensated_sequence is not None:
            continue
        attempt = "recovery" if intent.compensation_sequence is not None else "first"
        if attempt == "first" and not await env.journal.commit(
            _intent_builder(env, task_id, intent)
        ):
            return
        if not await _compensate(env, task_id, env.journal.state.intents[call_id], attempt):
            return
    await env.journal.commit(_settle_builder(env, task_id))


def _intent_builder(env: TaskEnv, task_id: str, intent: Intent) -> Builder:
    """The builder of a compensation's intent, fenced with the current lease's epoch."""
    conversation_id = env.journal.state.conversation_id

    def build(state: State) -> list[Event]:
        if live_task(state, task_id) is None:
            return []
        return [
            CompensationIntent(
                task_id=task_id,
                call_id=intent.call_id,
                idempotency_key=compensation_key(conversation_id, intent.call_id),
                epoch=env.journal.lease.epoch,
            )
        ]

    return build


async def _compensate(env: TaskEnv, task_id: str, intent: Intent, attempt: str) -> bool:
    """Run the call's compensating action under the current fencing epoch and record its result
    (a tool without a compensation any more, or an undo that raises, records an error). Returns
    whether the result was committed (False: the task is no longer live)."""
    await env.journal.ensure_lease()
    spec = env.tools.get(intent.tool)
    context = compensation_context(env, intent, attempt)
    if spec is None or spec.compensation is None:
        output, is_error = f"tool {intent.tool!r} has no compensation registered", True
    else:
        try:
            output = await spec.compensation.undo(
                dict(intent.arguments), dict(intent.pre_image or {}), context
            )
            is_error = False
        except Exception as exc:
            if not is_tool_failure(exc):
                raise
            output, is_error = f"{type(exc).__name__}: {exc}", True
    result = CompensationResult(
        task_id=task_id, call_id=intent.call_id, output=output, is_error=is_error
    )
    return bool(await env.journal.commit(lambda s: [result] if live_task(s, task_id) else []))


def compensation_context(env: TaskEnv, intent: Intent, attempt: str) -> ToolContext:
    """What the compensating action is told: its own call id and key (both derived from the
    call, the same on every attempt) and the current fencing epoch."""
    conversation_id = env.journal.state.conversation_id
    return ToolContext(
        conversation_id=conversation_id,
        call_id=compensation_call_id(intent.call_id),
        idempotency_key=compensation_key(conversation_id, intent.call_id),
        epoch=env.journal.lease.epoch,
        attempt="first" if attempt == "first" else "recovery",
    )


def _settle_builder(env: TaskEnv, task_id: str) -> Builder:
    """The builder of the commit that ends the abandonment: the task settles and the run stops
    (``abandoned``), queued inputs starting the next run."""
    ids, budget = env.ports.ids, env.config.budget

    def build(state: State) -> list[Event]:
        task = live_task(state, task_id)
        if task is None:
            return []
        failed = [c for c in task.data["calls"] if _failed(state, c)]
        outcome: TaskOutcome = "failed" if failed else "completed"
        detail = f"compensations failed: {', '.join(failed)}" if failed else "compensated"
        settled = TaskSettled(task_id=task_id, outcome=outcome, detail=detail)
        stop = settle_run(
            state,
            ids,
            budget,
            reason="abandoned",
            detail=str(task.data.get("detail", "")),
            settled=frozenset({task_id}),
        )
        return [settled, *stop]

    return build


def _failed(state: State, call_id: str) -> bool:
    """Whether the recorded compensation of ``call_id`` is an error."""
    return state.intents[call_id].compensation_failed
