"""``reduce``: the pure function from events to a conversation's state.

The log is the source of truth; this module is the only place that gives events meaning. ``apply``
mutates a state in place (the runtime applies each commit once, so copying the whole state per event
would make long conversations quadratic); ``reduce`` is the pure public form used by recovery,
checkpoint verification and the simulator's oracles. The state's models and queries are in
``durable.state_model`` and re-exported here (``State`` and its parts are imported from this
module throughout).

Invariant violations (an event that cannot follow the state it is applied to) raise
``InvariantViolation`` at their source rather than producing a quietly wrong state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from durable.codec import canonical_json, frozen_dump, sha256_hex
from durable.errors import InvariantViolation
from durable.events import (
    CompactionApplied,
    CompactionSettled,
    CompactionStarted,
    CompensationIntent,
    CompensationResult,
    EventRecord,
    FileChanged,
    InputAccepted,
    InputSettled,
    InputsSteered,
    LeaseAcquired,
    ModelCompleted,
    ModelFailed,
    ModelRequested,
    PlanUpdated,
    ReconciliationRequested,
    RunStarted,
    RunStopped,
    TaskCheckpoint,
    TaskCreated,
    TaskSettled,
    TaskWaiting,
    ToolIntent,
    ToolInterrupted,
    ToolResult,
    ValidationRecorded,
)
from durable.state_model import (
    NOT_EXECUTED,
    ChangedFile,
    Compaction,
    Intent,
    Message,
    PinnedRequest,
    PlanRevision,
    ProviderCursor,
    Run,
    State,
    Submission,
    Task,
    Validation,
    dump_state,
)

__all__ = [  # the reducer, and the state's models and dumps re-exported from their homes
    "NOT_EXECUTED",
    "ChangedFile",
    "Compaction",
    "Intent",
    "InvariantViolation",
    "Message",
    "PinnedRequest",
    "PlanRevision",
    "ProviderCursor",
    "Run",
    "State",
    "Submission",
    "Task",
    "Validation",
    "apply",
    "compaction_boundary_problem",
    "dump_state",
    "frozen_dump",
    "new_state",
    "reduce",
]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantViolation(message)


def new_state(conversation_id: str) -> State:
    return State(conversation_id=conversation_id)


def apply(state: State, record: EventRecord) -> None:
    """Apply one record in place. Raises ``InvariantViolation`` if it cannot follow ``state``."""
    _require(
        record.conversation_id == state.conversation_id,
        f"record of {record.conversation_id} applied to {state.conversation_id}",
    )
    _require(
        record.sequence == state.last_sequence + 1,
        f"sequence {record.sequence} after {state.last_sequence}",
    )
    if isinstance(record.event, LeaseAcquired):
        _require(record.epoch == record.event.epoch, "lease record written under another epoch")
    else:
        _require(
            record.epoch == state.epoch, f"record of epoch {record.epoch} in epoch {state.epoch}"
        )
    state.last_sequence = record.sequence
    _APPLY[type(record.event)](state, record.event, record.sequence)


def reduce(state: State, records: Iterable[EventRecord]) -> State:
    """Pure: the state after ``records``, leaving ``state`` untouched."""
    out = state.model_copy(deep=True)
    for record in records:
        apply(out, record)
    return out


def _input_accepted(state: State, e: InputAccepted, seq: int) -> None:
    _require(e.submission_id not in state.submissions, f"duplicate submission {e.submission_id}")
    if e.request_id is not None:
        _require(e.request_id not in state.request_ids, f"duplicate request_id {e.request_id}")
        state.request_ids[e.request_id] = e.submission_id
    _require(
        e.mode != "reject" or state.active_run is None,
        f"reject-mode input {e.submission_id} accepted while run {state.active_run} is active",
    )
    state.submissions[e.submission_id] = Submission(
        id=e.submission_id,
        request_id=e.request_id,
        content=e.content,
        accepted_sequence=seq,
        mode=e.mode,
    )
    state.queue.append(e.submission_id)


def _run_started(state: State, e: RunStarted, seq: int) -> None:
    _require(state.active_run is None, f"run {e.run_id} started while {state.active_run} active")
    _require(e.run_id not in state.runs, f"duplicate run {e.run_id}")
    _require(len(e.inputs) > 0, "a run needs at least one input")
    unknown = [sid for sid in e.inputs if sid not in state.submissions]
    _require(not unknown, f"run {e.run_id} places inputs never accepted: {unknown}")
    state.runs[e.run_id] = Run(
        id=e.run_id, inputs=list(e.inputs), budget=e.budget, started_sequence=seq
    )
    state.active_run = e.run_id
    for sid in e.inputs:
        sub = state.submissions[sid]
        _require(sub.status == "queued", f"input {sid} placed twice")
        sub.status = "placed"
        sub.run_id = e.run_id
        state.queue.remove(sid)
        state.messages.append(Message(role="user", content=sub.content, submission_id=sid))


def _inputs_steered(state: State, e: InputsSteered, seq: int) -> None:
    """Steering inputs placed at a post-tools boundary: the generation task that waited on
    tools is settled and every task of the run is terminal (the next turn is not created yet),
    and each input is a queued steering input (so it is placed once)."""
    _require(state.active_run == e.run_id, f"inputs steered into inactive run {e.run_id}")
    _require(len(e.inputs) > 0, "a steering placement needs inputs")
    task = state.tasks.get(e.task_id)
    _require(
        task is not None
        and task.kind == "generation"
        and task.run_id == e.run_id
        and task.phase == "tools"
        and task.outcome == "completed",
        f"inputs steered after {e.task_id}, not a settled generation task that waited on tools",
    )
    live = [t.id for t in state.tasks.values() if t.run_id == e.run_id and t.status != "terminal"]
    _require(not live, f"inputs steered into run {e.run_id} while {live} are live")
    run = state.runs[e.run_id]
    for sid in e.inputs:
        sub = state.submissions.get(sid)
        _require(sub is not None, f"steered input {sid} was never accepted")
        assert sub is not None
        _require(sub.status == "queued", f"input {sid} placed twice")
        _require(sub.mode == "steer", f"input {sid} ({sub.mode}) steered into a running run")
        sub.status = "placed"
        sub.run_id = e.run_id
        state.queue.remove(sid)
        run.inputs.append(sid)
        state.messages.append(Message(role="user", content=sub.content, submission_id=sid))


def _task_created(state: State, e: TaskCreated, seq: int) -> None:
    _require(e.task_id not in state.tasks, f"duplicate task {e.task_id}")
    _require(e.run_id == state.active_run, f"task {e.task_id} created outside the active run")
    state.tasks[e.task_id] = Task(
        id=e.task_id, kind=e.kind, run_id=e.run_id, phase=e.phase, data=dict(e.data), call=e.call
    )


def _live_task(state: State, task_id: str) -> Task:
    task = state.tasks.get(task_id)
    _require(task is not None, f"unknown task {task_id}")
    assert task is not None
    _require(task.status != "terminal", f"task {task_id} changed after it was terminal")
    return task


def _task_checkpoint(state: State, e: TaskCheckpoint, seq: int) -> None:
    task = _live_task(state, e.task_id)
    task.phase = e.phase
    task.data = dict(e.data)
    task.status = "pending"
    task.waiting_on = []


def _task_waiting(state: State, e: TaskWaiting, seq: int) -> None:
    task = _live_task(state, e.task_id)
    task.status = "waiting"
    task.waiting_on = list(e.on)


def _model_requested(state: State, e: ModelRequested, seq: int) -> None:
    task = _live_task(state, e.task_id)
    _require(e.cutoff <= len(state.messages), "model request beyond the context")
    _require(e.window == state.window, f"request window {e.window!r}, applied {state.window!r}")
    _require(
        e.cursor is None or e.cursor == state.resumable_cursor(),
        f"request of {e.task_id} pins cursor {e.cursor}, not a resumable cursor of this log",
    )
    state.pinned[e.task_id] = PinnedRequest(
        task_id=e.task_id,
        model=e.model,
        options=dict(e.options),
        cutoff=e.cutoff,
        attempt=e.attempt,
        window=e.window,
        cursor=e.cursor,
    )
    task.phase = "request"
    task.status = "pending"
    task.waiting_on = []


def _model_completed(state: State, e: ModelCompleted, seq: int) -> None:
    task = _live_task(state, e.task_id)
    run = state.runs[task.run_id]
    run.model_turns += 1
    run.tokens += e.tokens
    state.messages.append(Message(role="assistant", content=e.text, tool_calls=list(e.tool_calls)))
    state.pinned.pop(e.task_id, None)
    if e.cursor is not None:
        state.cursor = ProviderCursor(
            cursor=e.cursor, resumable=e.resumable, task_id=e.task_id, sequence=seq
        )


def _plan_updated(state: State, e: PlanUpdated, seq: int) -> None:
    _live_task(state, e.task_id)
    revision = len(state.plan_history) + 1
    state.plan = list(e.steps)
    state.plan_history.append(PlanRevision(revision=revision, steps=list(e.steps), sequence=seq))


def _file_changed(state: State, e: FileChanged, seq: int) -> None:
    """The reducer checks that revisions only increase and that a call changes a file once;
    that each applied edit adds exactly one is I18's to judge against the workspace."""
    _live_task(state, e.task_id)
    intent = state.intents.get(e.call_id)
    _require(
        intent is not None and intent.edit is not None and intent.edit.path == e.path,
        f"file change of {e.path} without an edit intent for call {e.call_id}",
    )
    _require(
        all(c.call_id != e.call_id for c in state.file_changes),
        f"second file change for call {e.call_id}",
    )
    _require(
        e.revision > state.mutation_revision,
        f"mutation revision {e.revision} not above {state.mutation_revision}",
    )
    change = ChangedFile(
        path=e.path,
        call_id=e.call_id,
        before_hash=e.before_hash,
        after_hash=e.after_hash,
        revision=e.revision,
        sequence=seq,
    )
    state.mutation_revision = e.revision
    state.changed_files[e.path] = change
    state.file_changes.append(change)


def _validation_recorded(state: State, e: ValidationRecorded, seq: int) -> None:
    _live_task(state, e.task_id)
    intent = state.intents.get(e.call_id)
    _require(
        intent is not None and intent.validates == e.criterion,
        f"validation of {e.criterion!r} without a validation intent for call {e.call_id}",
    )
    assert intent is not None
    _require(
        e.revision == intent.revision,
        f"validation at revision {e.revision}, its call saw revision {intent.revision}",
    )
    state.validations.append(
        Validation(
            criterion=e.criterion,
            call_id=e.call_id,
            passed=e.passed,
            revision=e.revision,
            sequence=seq,
        )
    )


def _model_failed(state: State, e: ModelFailed, seq: int) -> None:
    _live_task(state, e.task_id)
    state.pinned.pop(e.task_id, None)


def _tool_intent(state: State, e: ToolIntent, seq: int) -> None:
    task = _live_task(state, e.task_id)
    _require(e.call_id not in state.intents, f"second intent for call {e.call_id}")
    _require(e.epoch == state.epoch, f"intent fenced with epoch {e.epoch}, lease is {state.epoch}")
    state.intents[e.call_id] = Intent(
        call_id=e.call_id,
        task_id=e.task_id,
        tool=e.tool,
        arguments=dict(e.arguments),
        policy=e.policy,
        idempotency_key=e.idempotency_key,
        epoch=e.epoch,
        sequence=seq,
        compensable=e.compensable,
        pre_image=None if e.pre_image is None else dict(e.pre_image),
        edit=e.edit,
        validates=e.validates,
        revision=state.mutation_revision if e.validates is not None else None,
    )
    state.runs[task.run_id].tool_calls += 1
    task.phase = "execute"
    task.status = "pending"


def _tool_result(state: State, e: ToolResult, seq: int) -> None:
    _live_task(state, e.task_id)
    _require(e.call_id not in state.tool_results, f"second result for call {e.call_id}")
    intent = state.intents.get(e.call_id)
    if intent is not None:
        intent.result_sequence = seq
    state.tool_results[e.call_id] = e


def _tool_interrupted(state: State, e: ToolInterrupted, seq: int) -> None:
    _live_task(state, e.task_id)
    intent = state.intents.get(e.call_id)
    _require(intent is not None and intent.result_sequence is None, "interrupt without open intent")
    assert intent is not None
    intent.interrupted = True


def _reconciliation_requested(state: State, e: ReconciliationRequested, seq: int) -> None:
    task = _live_task(state, e.task_id)
    intent = state.intents.get(e.call_id)
    _require(intent is not None and intent.result_sequence is None, "reconcile without open intent")
    assert intent is not None
    intent.reconciliation = True
    task.phase = "reconcile"
    task.status = "waiting"
    task.waiting_on = []


def _compensated_intent(state: State, task_id: str, call_id: str) -> Intent:
    """The intent a compensation event of task ``task_id`` names: a compensable call of the
    compensation task's own run that completed (docs/runtime.md, "Compensation")."""
    task = _live_task(state, task_id)
    _require(task.kind == "compensation", f"compensation event of {task.kind} task {task_id}")
    intent = state.intents.get(call_id)
    _require(
        intent is not None and intent.compensable, f"compensation of {call_id}: not compensable"
    )
    assert intent is not None
    _require(call_id in task.data.get("calls", []), f"{call_id} is not in {task_id}'s plan")
    return intent


def _compensation_intent(state: State, e: CompensationIntent, seq: int) -> None:
    intent = _compensated_intent(state, e.task_id, e.call_id)
    _require(intent.compensation_sequence is None, f"second compensation intent of {e.call_id}")
    _require(e.epoch == state.epoch, f"compensation fenced with {e.epoch}, lease is {state.epoch}")
    plan: list[str] = state.tasks[e.task_id].data["calls"]
    earlier = plan[: plan.index(e.call_id)]
    undone = [c for c in earlier if state.intents[c].compensated_sequence is None]
    _require(not undone, f"compensation of {e.call_id} before {undone} (reverse order)")
    intent.compensation_sequence = seq


def _compensation_result(state: State, e: CompensationResult, seq: int) -> None:
    intent = _compensated_intent(state, e.task_id, e.call_id)
    _require(intent.compensation_sequence is not None, f"compensation result of {e.call_id} first")
    _require(intent.compensated_sequence is None, f"second compensation result of {e.call_id}")
    intent.compensated_sequence = seq
    intent.compensation_failed = e.is_error


def _task_settled(state: State, e: TaskSettled, seq: int) -> None:
    task = _live_task(state, e.task_id)
    task.status = "terminal"
    task.outcome = e.outcome
    task.waiting_on = []
    state.pinned.pop(e.task_id, None)


def _run_stopped(state: State, e: RunStopped, seq: int) -> None:
    _require(state.active_run == e.run_id, f"stop of inactive run {e.run_id}")
    run = state.runs[e.run_id]
    for task in state.tasks.values():
        _require(
            task.run_id != e.run_id or task.status == "terminal",
            f"run {e.run_id} stopped with live task {task.id}",
        )
    for sid in run.inputs:
        sub = state.submissions[sid]
        _require(sub.status in ("done", "unanswered"), f"run {e.run_id} stopped, {sid} unsettled")
    run.status = "stopped"
    run.stop_reason = e.reason
    run.detail = e.detail
    state.active_run = None


def _input_settled(state: State, e: InputSettled, seq: int) -> None:
    sub = state.submissions.get(e.submission_id)
    _require(sub is not None, f"unknown submission {e.submission_id}")
    assert sub is not None
    _require(sub.status in ("queued", "placed"), f"submission {sub.id} settled twice")
    if sub.status == "queued":
        state.queue.remove(sub.id)
    sub.status = e.status
    sub.answer = e.answer
    sub.reason = e.reason


def _lease_acquired(state: State, e: LeaseAcquired, seq: int) -> None:
    _require(e.epoch > state.epoch, f"lease epoch {e.epoch} not above {state.epoch}")
    state.epoch = e.epoch
    state.owner_id = e.owner_id


def _compaction_started(state: State, e: CompactionStarted, seq: int) -> None:
    """A compaction's intent: its task was created in this commit, nothing else is compacting,
    and the prefix extends past the current window. Pins the summarisation request."""
    task = _live_task(state, e.task_id)
    _require(task.kind == "compaction", f"compaction {e.compaction_id} on a {task.kind} task")
    _require(e.run_id == state.active_run == task.run_id, "compaction outside the active run")
    _require(e.compaction_id not in state.compactions, f"duplicate {e.compaction_id}")
    _require(state.open_compaction() is None, "a second compaction while one is open")
    _require(e.window == state.window, f"compaction window {e.window!r}, not {state.window!r}")
    floor = state.compactions[e.window].through if e.window else 0
    _require(floor < e.through <= len(state.messages), f"compaction through {e.through}")
    state.compactions[e.compaction_id] = Compaction(
        id=e.compaction_id,
        task_id=e.task_id,
        requested_by=e.requested_by,
        run_id=e.run_id,
        through=e.through,
        window=e.window,
        prefix_digest=e.prefix_digest,
        epoch=state.epoch,
        started_sequence=seq,
    )
    state.pinned[e.task_id] = PinnedRequest(
        task_id=e.task_id,
        model=e.model,
        options={"task": "summarise"},
        cutoff=e.through,
        attempt=1,
        window=e.window,
    )


def _open_compaction(state: State, compaction_id: str) -> Compaction:
    compaction = state.compactions.get(compaction_id)
    _require(compaction is not None, f"unknown compaction {compaction_id}")
    assert compaction is not None
    _require(compaction.status == "open", f"compaction {compaction_id} is {compaction.status}")
    return compaction


def compaction_boundary_problem(state: State, compaction: Compaction) -> str:
    """Why ``compaction`` cannot be applied now ("" if it can): only at a turn boundary -- every
    other live task of its run a generation turn waiting in ``prepare``, nothing pinned -- and
    only if its prefix is what its intent named."""
    for task in state.tasks.values():
        if task.run_id != compaction.run_id or task.status == "terminal":
            continue
        if task.id == compaction.task_id:
            continue
        if task.kind != "generation" or task.phase != "prepare" or task.id in state.pinned:
            return f"task {task.id} ({task.kind}/{task.phase}) is live: not a turn boundary"
    digest = sha256_hex(canonical_json(state.context(compaction.through, compaction.window)))
    if digest != compaction.prefix_digest:
        return f"the prefix through message {compaction.through} changed since the intent"
    return ""


def _compaction_applied(state: State, e: CompactionApplied, seq: int) -> None:
    """Fresh summaries only, at boundaries (I19): the intent was written in this epoch (no crash
    or takeover since), names this prefix, and the prefix is unchanged."""
    compaction = _open_compaction(state, e.compaction_id)
    _require(
        compaction.epoch == state.epoch,
        f"compaction {e.compaction_id} started in epoch {compaction.epoch}, applied in "
        f"{state.epoch}: its summary is stale",
    )
    _require(
        (e.through, e.prefix_digest) == (compaction.through, compaction.prefix_digest),
        f"compaction {e.compaction_id} applied to another prefix than its intent named",
    )
    problem = compaction_boundary_problem(state, compaction)
    _require(not problem, f"compaction {e.compaction_id} applied: {problem}")
    compaction.status = "applied"
    compaction.summary = e.summary
    state.window = e.compaction_id


def _compaction_settled(state: State, e: CompactionSettled, seq: int) -> None:
    compaction = _open_compaction(state, e.compaction_id)
    compaction.status = e.outcome
    state.pinned.pop(compaction.task_id, None)


# Each handler takes events of the class it is filed under; no type ties a key to its value, so
# the event parameter is ``Any``.
_APPLY: dict[type, Callable[[State, Any, int], None]] = {
    InputAccepted: _input_accepted,
    RunStarted: _run_started,
    InputsSteered: _inputs_steered,
    TaskCreated: _task_created,
    TaskCheckpoint: _task_checkpoint,
    TaskWaiting: _task_waiting,
    ModelRequested: _model_requested,
    ModelCompleted: _model_completed,
    ModelFailed: _model_failed,
    PlanUpdated: _plan_updated,
    ToolIntent: _tool_intent,
    ToolResult: _tool_result,
    FileChanged: _file_changed,
    ValidationRecorded: _validation_recorded,
    ToolInterrupted: _tool_interrupted,
    ReconciliationRequested: _reconciliation_requested,
    CompensationIntent: _compensation_intent,
    CompensationResult: _compensation_result,
    TaskSettled: _task_settled,
    RunStopped: _run_stopped,
    InputSettled: _input_settled,
    LeaseAcquired: _lease_acquired,
    CompactionStarted: _compaction_started,
    CompactionApplied: _compaction_applied,
    CompactionSettled: _compaction_settled,
}
