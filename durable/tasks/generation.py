"""The generation task: one model turn. Phases ``prepare → request → (retry | tools) → terminal``.

``prepare`` checks the run's budget and pins the request (model, options, context cutoff) in the
log; ``request`` sends exactly the pinned request, so a crash before the response is committed
re-sends the same request. A response with tool calls creates one tool task per call and waits on
them (phase ``tools``); when they settle, the next turn is a new generation task. Retryable model
errors commit their deadline (phase ``retry``), so a crash during backoff resumes at the same one.
``prepare`` may start a compaction instead and wait on it (``durable.compaction``); a request the
model refused as too long returns the turn to ``prepare`` with a forced compaction.
"""

from __future__ import annotations

from durable.compaction import start_compaction
from durable.events import (
    Event,
    ModelCompleted,
    ModelFailed,
    ModelRequested,
    PlanUpdated,
    TaskCheckpoint,
    TaskCreated,
    TaskSettled,
    TaskWaiting,
    ToolCall,
)
from durable.model import ModelError, ModelResponse
from durable.runs import place_steering, settle_run
from durable.state import State
from durable.tasks import TaskEnv, live_task, pinned_request


async def run_generation(env: TaskEnv, task_id: str) -> None:
    """Run phases inline until the task waits, ends, or its run stops."""
    while True:
        task = live_task(env.journal.state, task_id)
        if task is None or (task.status == "waiting" and task.phase != "tools"):
            return
        handler = _PHASES[task.phase]
        if not await handler(env, task_id):
            return


async def _prepare(env: TaskEnv, task_id: str) -> bool:
    budget = env.config.budget

    def build(state: State) -> list[Event]:
        task = live_task(state, task_id)
        if task is None:
            return []
        run = state.runs[task.run_id]
        if env.model is None:
            return settle_run(state, env.ports.ids, budget, reason="no_model", detail="no model")
        if run.model_turns >= run.budget.model_turns:
            detail = f"{run.model_turns} model turns used of {run.budget.model_turns}"
            return settle_run(
                state, env.ports.ids, budget, reason="budget_exhausted", detail=detail
            )
        if run.tokens >= run.budget.tokens:
            detail = f"{run.tokens} tokens used of {run.budget.tokens}"
            return settle_run(
                state, env.ports.ids, budget, reason="budget_exhausted", detail=detail
            )
        forced = bool(task.data.get("compact"))
        compaction = start_compaction(state, task, env.config, env.ports.ids, forced=forced)
        if compaction:
            return compaction
        if forced:
            detail = "the model's context was exceeded and compaction could not shrink it"
            return settle_run(state, env.ports.ids, budget, reason="model_error", detail=detail)
        return [
            ModelRequested(
                task_id=task_id,
                model=env.config.model_name,
                cutoff=len(state.messages),
                attempt=int(task.data.get("attempt", 1)),
                window=state.window,
                cursor=state.resumable_cursor(),
            )
        ]

    await env.journal.commit(build)
    task = live_task(env.journal.state, task_id)
    return task is not None and task.phase == "request" and task.status == "pending"


async def _request(env: TaskEnv, task_id: str) -> bool:
    assert env.model is not None, "request phase needs a model"
    request = pinned_request(env.journal.state, task_id)
    try:
        response = await env.model.complete(request)
    except ModelError as error:
        if error.context_exceeded:
            return await _context_exceeded(env, task_id, request.attempt, error)
        return await _model_failed(env, task_id, request.attempt, error)
    await env.journal.commit(lambda s: _on_response(env, s, task_id, response))
    task = live_task(env.journal.state, task_id)
    return task is not None and task.phase != "tools"


def _on_response(env: TaskEnv, state: State, task_id: str, response: ModelResponse) -> list[Event]:
    task = live_task(state, task_id)
    if task is None:
        return []
    ids = env.ports.ids
    budget = env.config.budget
    calls = [
        ToolCall(call_id=ids.new("call"), tool=c.tool, arguments=dict(c.arguments))
        for c in response.tool_calls
    ]
    completed: list[Event] = [
        ModelCompleted(
            task_id=task_id,
            text=response.text,
            tool_calls=calls,
            tokens=response.tokens,
            cursor=response.cursor,
            resumable=response.resumable if response.cursor is not None else False,
        )
    ]
    if response.plan is not None:
        completed.append(PlanUpdated(task_id=task_id, steps=list(response.plan)))
    if not calls:
        missing = state.unvalidated(env.config.required_criteria)
        if missing:
            detail = f"not validated at revision {state.mutation_revision}: {', '.join(missing)}"
            return [
                *completed,
                *settle_run(state, ids, budget, reason="unvalidated", detail=detail),
            ]
        return [
            *completed,
            *settle_run(state, ids, budget, reason="completed", answer=response.text),
        ]
    run = state.runs[task.run_id]
    if run.tool_calls + len(calls) > run.budget.tool_calls:
        detail = f"{run.tool_calls + len(calls)} tool calls exceed {run.budget.tool_calls}"
        return [
            *completed,
            *settle_run(state, ids, budget, reason="budget_exhausted", detail=detail),
        ]
    tool_tasks = [
        TaskCreated(task_id=ids.new("task"), kind="tool", run_id=task.run_id, phase="call", call=c)
        for c in calls
    ]
    return [
        *completed,
        TaskCheckpoint(task_id=task_id, phase="tools"),
        *tool_tasks,
        TaskWaiting(task_id=task_id, on=[t.task_id for t in tool_tasks]),
    ]


def backoff_s(env: TaskEnv, attempt: int, error: ModelError) -> float:
    if error.retry_after_s is not None:
        return error.retry_after_s
    # ``int ** int`` is typed ``Any`` (a negative exponent makes a float): the delay is a float.
    delay_s: float = env.config.backoff_base_s * 2 ** (attempt - 1)
    return min(delay_s, env.config.backoff_max_s)


async def _model_failed(env: TaskEnv, task_id: str, attempt: int, error: ModelError) -> bool:
    failed = ModelFailed(task_id=task_id, message=str(error), retryable=error.retryable)
    if error.retryable and attempt < env.config.max_model_attempts:
        until_s = env.ports.clock.now() + backoff_s(env, attempt, error)
        retry = TaskCheckpoint(
            task_id=task_id, phase="retry", data={"attempt": attempt + 1, "until_s": until_s}
        )
        await env.journal.commit(lambda s: [failed, retry] if live_task(s, task_id) else [])
        return True
    detail = f"{error} (attempt {attempt})"
    ids, budget = env.ports.ids, env.config.budget

    def build(state: State) -> list[Event]:
        if live_task(state, task_id) is None:
            return []
        return [failed, *settle_run(state, ids, budget, reason="model_error", detail=detail)]

    await env.journal.commit(build)
    return False


async def _context_exceeded(env: TaskEnv, task_id: str, attempt: int, error: ModelError) -> bool:
    """The model refused the request as too long: back to ``prepare`` with a forced compaction
    and the next attempt number (the new request differs from the pinned one, so it must not
    re-use its attempt). Bounded by ``max_model_attempts`` like any retry."""
    if attempt >= env.config.max_model_attempts:
        return await _model_failed(env, task_id, attempt, error)
    failed = ModelFailed(task_id=task_id, message=str(error), retryable=True)
    prepare = TaskCheckpoint(
        task_id=task_id, phase="prepare", data={"attempt": attempt + 1, "compact": True}
    )
    await env.journal.commit(lambda s: [failed, prepare] if live_task(s, task_id) else [])
    return True


async def _retry(env: TaskEnv, task_id: str) -> bool:
    """Sleep until the committed deadline (never recomputed), then pin a new request."""
    task = live_task(env.journal.state, task_id)
    assert task is not None
    await env.ports.clock.sleep_until(float(task.data["until_s"]))
    attempt = int(task.data["attempt"])
    prepare = TaskCheckpoint(task_id=task_id, phase="prepare", data={"attempt": attempt})
    await env.journal.commit(lambda s: [prepare] if live_task(s, task_id) else [])
    return True


async def _tools(env: TaskEnv, task_id: str) -> bool:
    """Every tool of this turn settled: end this turn and create the next one. This commit is
    the run's post-tools boundary: queued steering inputs are placed in it, after the turn's
    tool results and before the next model request (a crash before it leaves them queued, and
    the resumed task places them here again)."""
    ids = env.ports.ids

    def build(state: State) -> list[Event]:
        task = live_task(state, task_id)
        if task is None:
            return []
        assert all(state.tasks[t].status == "terminal" for t in task.waiting_on), "tools not done"
        steering = place_steering(state, task_id)
        return [
            TaskSettled(task_id=task_id, outcome="completed"),
            *steering,
            TaskCreated(
                task_id=ids.new("task"), kind="generation", run_id=task.run_id, phase="prepare"
            ),
        ]

    await env.journal.commit(build)
    return False


_PHASES = {"prepare": _prepare, "request": _request, "retry": _retry, "tools": _tools}
