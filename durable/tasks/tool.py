"""The tool task: one tool call. Phases ``call → execute → terminal``.

``call`` commits the intent (arguments, policy, idempotency key, fencing epoch) *before* the tool
runs, then runs it and commits its result in the same invocation. So the scheduler only ever starts
a task in phase ``execute`` after a crash: that entry point is the recovery path, and it applies the
tool's recovery policy (docs/architecture.md, 1.4) instead of blindly running the tool again.
"""

from __future__ import annotations

from typing import Any

from durable.agent import outcome_events
from durable.events import (
    Event,
    PlannedEdit,
    ReconciliationRequested,
    TaskOutcome,
    TaskSettled,
    ToolIntent,
    ToolInterrupted,
    ToolResult,
)
from durable.state import Intent, State
from durable.tasks import TaskEnv, is_tool_failure, live_task
from durable.tools import ToolContext, ToolSpec, idempotency_key, interrupted_message


async def run_tool(env: TaskEnv, task_id: str) -> None:
    task = live_task(env.journal.state, task_id)
    if task is None:
        return
    if task.phase == "call":
        await _call(env, task_id)
    elif task.phase == "execute":
        await _recover(env, task_id)
    else:
        raise AssertionError(f"tool task {task_id} cannot run from phase {task.phase}")


async def _call(env: TaskEnv, task_id: str) -> None:
    task = env.journal.state.tasks[task_id]
    assert task.call is not None, f"tool task {task_id} without a call"
    call = task.call
    spec = env.tools.get(call.tool)
    if spec is None:
        await _reject(env, task_id, call.call_id, f"unknown tool {call.tool!r}", "unknown tool")
        return
    conversation_id = env.journal.state.conversation_id
    key = idempotency_key(conversation_id, call.call_id)
    try:
        pre_image = await _capture(env, spec, call.call_id, dict(call.arguments), key)
    except Exception as exc:  # the call never ran: no intent, an error result
        if not is_tool_failure(exc):
            raise
        output = f"pre-image capture failed: {type(exc).__name__}: {exc}"
        await _reject(env, task_id, call.call_id, output, "capture failed")
        return
    edit: PlannedEdit | None = None
    if spec.plan_edit is not None:
        # Planned before the intent, so the intent records the hashes a recovery compares. A
        # planner that fails is the call's (error) result: nothing ran, no intent is needed.
        try:
            edit = await spec.plan_edit(dict(call.arguments))
        except Exception as exc:
            if not is_tool_failure(exc):
                raise
            await _reject(
                env, task_id, call.call_id, f"{type(exc).__name__}: {exc}", "edit not planned"
            )
            return

    def build(state: State) -> list[Event]:
        if live_task(state, task_id) is None:
            return []
        return [
            ToolIntent(
                task_id=task_id,
                call_id=call.call_id,
                tool=call.tool,
                arguments=dict(call.arguments),
                policy=spec.policy,
                idempotency_key=key,
                epoch=env.journal.lease.epoch,
                compensable=spec.compensation is not None,
                pre_image=pre_image,
                edit=edit,
                validates=spec.validates,
            )
        ]

    if not await env.journal.commit(build):
        return
    intent = env.journal.state.intents[call.call_id]
    await execute_and_record(env, spec, intent, attempt="first")


async def _reject(env: TaskEnv, task_id: str, call_id: str, output: str, detail: str) -> None:
    """Settle a call that is refused before its intent: an error result, no effect."""
    rejected = ToolResult(
        task_id=task_id, call_id=call_id, output=output, is_error=True, source="rejected"
    )
    settled = TaskSettled(task_id=task_id, outcome="failed", detail=detail)
    await env.journal.commit(lambda s: [rejected, settled] if live_task(s, task_id) else [])


async def _capture(
    env: TaskEnv, spec: ToolSpec, call_id: str, arguments: dict[str, Any], key: str
) -> dict[str, Any] | None:
    """The pre-image a compensable tool's undo restores, read before the intent is committed so
    that it is durable before the effect can happen (docs/runtime.md, "Compensation")."""
    if spec.compensation is None or spec.compensation.capture is None:
        return None
    context = ToolContext(
        conversation_id=env.journal.state.conversation_id,
        call_id=call_id,
        idempotency_key=key,
        epoch=env.journal.lease.epoch,
        attempt="first",
    )
    return dict(await spec.compensation.capture(arguments, context))


async def execute_and_record(env: TaskEnv, spec: ToolSpec, intent: Intent, *, attempt: str) -> None:
    """Run the tool under its intent's key and the current fencing epoch; record its result.
    A tool's ``Exception`` is its (error) result; cancellation, crashes and damaged history
    read through the tool (``durable.tasks.NOT_A_TOOL_RESULT``) propagate."""
    await env.journal.ensure_lease()
    context = _context(env, intent, attempt)
    try:
        output = await spec.fn(dict(intent.arguments), context)
        is_error = False
    except Exception as exc:
        if not is_tool_failure(exc):
            raise
        output = f"{type(exc).__name__}: {exc}"
        is_error = True
    result = ToolResult(
        task_id=intent.task_id,
        call_id=intent.call_id,
        output=output,
        is_error=is_error,
        source="executed",
    )
    outcome: TaskOutcome = "failed" if is_error else "completed"
    settled = TaskSettled(task_id=intent.task_id, outcome=outcome)

    def build(state: State) -> list[Event]:
        events = [result, *outcome_events(state, intent, ok=not is_error), settled]
        return events if live_task(state, intent.task_id) else []

    await env.journal.commit(build)


def _context(env: TaskEnv, intent: Intent, attempt: str) -> ToolContext:
    return ToolContext(
        conversation_id=env.journal.state.conversation_id,
        call_id=intent.call_id,
        idempotency_key=intent.idempotency_key,
        epoch=env.journal.lease.epoch,
        attempt="first" if attempt == "first" else "recovery",
        edit=intent.edit,
    )


async def _recover(env: TaskEnv, task_id: str) -> None:
    """An intent without a result, found after a crash: apply the recorded policy. The tool is
    re-executed only if the recorded policy and the current tool definition both allow it."""
    state = env.journal.state
    task = state.tasks[task_id]
    assert task.call is not None
    intent = state.intents[task.call.call_id]
    assert intent.result_sequence is None, f"{intent.call_id} already has a result"
    spec = env.tools.get(intent.tool)
    policy = intent.policy if spec is not None and spec.policy == intent.policy else "unsafe"
    if policy in ("replay_safe", "idempotent"):
        assert spec is not None
        await execute_and_record(env, spec, intent, attempt="recovery")
        return
    if policy == "verify_then_continue":
        assert spec is not None and spec.verifier is not None
        try:
            verdict = await spec.verifier(dict(intent.arguments), _context(env, intent, "recovery"))
            status, output = verdict.status, verdict.output
        except Exception as exc:
            if not is_tool_failure(exc):
                raise
            status, output = "unknown", f"verifier failed: {type(exc).__name__}: {exc}"
        if status == "not_applied":
            await execute_and_record(env, spec, intent, attempt="recovery")
            return
        if status == "applied":
            await env.journal.commit(lambda s: verified_events(s, intent, output))
            return
        events = _reconcile(task_id, intent, f"verifier could not tell: {output}")
    elif policy == "manual":
        events = _reconcile(task_id, intent, "manual policy: an operator must resolve this call")
    else:
        events = [
            ToolInterrupted(task_id=task_id, call_id=intent.call_id, policy=intent.policy),
            ToolResult(
                task_id=task_id,
                call_id=intent.call_id,
                output=interrupted_message(intent.tool),
                is_error=True,
                source="interrupted",
            ),
            TaskSettled(task_id=task_id, outcome="failed", detail="interrupted"),
        ]
    await env.journal.commit(
        lambda s: _settling(s, intent, events) if live_task(s, task_id) else []
    )


def _settling(state: State, intent: Intent, events: list[Event]) -> list[Event]:
    """``events`` of a recovery; one that settles the call without knowing whether its effect
    landed (interrupted) bumps an edit's revision with the content unknown (durable/agent.py),
    in the commit's own state: a parallel edit may have taken a revision meanwhile."""
    settles = isinstance(events[-1], TaskSettled)
    unknown = outcome_events(state, intent, ok=False, known=False) if settles else []
    return [*events[:-1], *unknown, events[-1]]


def verified_events(state: State, intent: Intent, output: str) -> list[Event]:
    """The commit of a call its verifier found applied: its result, its agent-state events
    (an edit's one revision bump: the lost execution never recorded one) and its settlement."""
    task_id = intent.task_id
    if live_task(state, task_id) is None:
        return []
    return [
        ToolInterrupted(task_id=task_id, call_id=intent.call_id, policy=intent.policy),
        ToolResult(
            task_id=task_id,
            call_id=intent.call_id,
            output=output,
            is_error=False,
            source="verified",
        ),
        *outcome_events(state, intent, ok=True),
        TaskSettled(task_id=task_id, outcome="completed", detail="verified applied"),
    ]


def _reconcile(task_id: str, intent: Intent, reason: str) -> list[Event]:
    return [
        ToolInterrupted(task_id=task_id, call_id=intent.call_id, policy=intent.policy),
        ReconciliationRequested(task_id=task_id, call_id=intent.call_id, reason=reason),
    ]
