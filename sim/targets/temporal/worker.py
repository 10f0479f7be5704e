"""The Temporal worker of a target child, its crash boundaries, and the reader of the workflow's
history on the server.

Imports temporalio at module level: import this module only in a child process or when reading
a point's state (``sim.targets.temporal`` does, lazily).

Restart, per Temporal's docs ("Worker processes": a workflow is not bound to a worker; if a
worker crashes, another worker polling the same task queue continues the workflow from its event
history): each child connects a client to the dev server, looks the workflow up by its id
(``WorkflowHandle.describe``), starts it if the server has no record of it, and runs a
``temporalio.worker.Worker`` on the point's task queue until the workflow's result is in. A
killed worker's activity is retried once its start-to-close timeout passes (brought forward by
``sim.targets.temporal.expiry``, which also clears the dead worker's sticky queue); a killed
worker's workflow task is re-dispatched once the workflow task timeout passes.

Determinism: the workflow id and task queue are the point directory's name (points share one
server and nothing else); tool call ids are Temporal's activity ids (``activity-1``), which the
server keeps across every attempt, so ``{workflow id}:{activity id}`` is the ``idempotent``
variant's key.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import temporalio.bridge.worker
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse
from temporalio.bridge.proto import ActivityTaskCompletion
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from sim.targets.boundaries import Boundaries
from sim.targets.protocol import ChildContext, TargetOptions, TargetState
from sim.targets.temporal.expiry import expire_dead_attempts
from sim.targets.temporal.flows import TASK_TIMEOUT, USER_INPUT, PayInvoice
from sim.targets.temporal.server import ADDRESS_ENV, REAL_TIMEOUTS_ENV, run_sync

#: How long a workflow task may wait on a dead worker's sticky queue before the server sends it
#: to the task queue every worker polls (the SDK's default is 10 s; short, like the timeouts).
STICKY_TIMEOUT = timedelta(seconds=1)

#: The workflow sandbox, as Temporal's docs advise for a workflow whose package imports more
#: than it uses: the harness's own packages (``sim``, ``durable``: the workflow's package
#: ``__init__`` imports them) pass through instead of being re-imported in the sandbox.
RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("sim", "durable")
)

_CTX: ChildContext | None = None


def names(point_dir: Path) -> tuple[str, str]:
    """The point's workflow id and task queue (see the module docstring)."""
    return f"pay-INV-42@{point_dir.name}", f"durable-sim-{point_dir.name}"


def address() -> str:
    found = os.environ.get(ADDRESS_ENV, "").strip()
    if not found:
        raise RuntimeError(f"no Temporal server: {ADDRESS_ENV} is not set (the harness sets it)")
    return found


def _apply(service: str, op: str, tool: str, detail: str) -> None:
    """An activity's effect on the ledger, keyed (``idempotent`` only) by the workflow id and the
    activity id, which Temporal keeps the same on every attempt of the activity."""
    if _CTX is None:
        raise RuntimeError("the activities run only inside a target child")
    info = activity.info()
    _CTX.effect(
        service=service,
        op=op,
        tool=tool,
        call_id=f"activity-{info.activity_id}",
        key=f"{info.workflow_id}:{info.activity_id}",
        detail=f"{detail} (attempt {info.attempt})",
    )


@activity.defn(name="charge_card")
async def charge_card(args: dict[str, Any]) -> str:
    """Charge the customer's card for an invoice."""
    invoice, amount = args["invoice"], args["amount_eur"]
    _apply("payments", "charge", "charge_card", f"{invoice} {amount} EUR")
    return f"charged {amount} EUR for {invoice}"


@activity.defn(name="send_receipt")
async def send_receipt(args: dict[str, Any]) -> str:
    """Email the receipt of an invoice."""
    to, invoice = args["to"], args["invoice"]
    _apply("outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


def _commands(completion: WorkflowActivationCompletion) -> list[str]:
    """What a workflow activation's completion sends the server: its commands' kinds (and the
    activity a ``schedule_activity`` names)."""
    if completion.HasField("failed"):
        return ["failed"]
    out: list[str] = []
    for command in completion.successful.commands:
        kind: str = command.WhichOneof("variant") or "?"
        if kind == "schedule_activity":
            kind += f" {command.schedule_activity.activity_type}"
        out.append(kind)
    return out


def wrap_boundaries(b: Boundaries) -> None:
    """The worker's two reports to the server, each awaited until the server has it: a workflow
    task's completion (``temporal.workflow_task#n``: the commands it carries; an activation that
    carries none, such as a cache eviction, is no workflow task and crosses nothing) and an
    activity's (``temporal.activity_completed#n``)."""
    owner = temporalio.bridge.worker.Worker
    complete_workflow = owner.complete_workflow_activation
    complete_activity = owner.complete_activity_task

    async def workflow_task(
        self: temporalio.bridge.worker.Worker, completion: WorkflowActivationCompletion
    ) -> None:
        commands = _commands(completion)
        if not commands:
            await complete_workflow(self, completion)
            return
        label = b.numbered("temporal.workflow_task")
        b.before(label, what=", ".join(commands))
        await complete_workflow(self, completion)
        b.after(label)

    async def activity_task(
        self: temporalio.bridge.worker.Worker, completion: ActivityTaskCompletion
    ) -> None:
        label = b.numbered("temporal.activity_completed")
        b.before(label, what=completion.result.WhichOneof("status") or "?")
        await complete_activity(self, completion)
        b.after(label)

    # A wrap of the library's method, with the same call signature.
    owner.complete_workflow_activation = workflow_task  # type: ignore[method-assign, assignment]  # the same signature, see above
    owner.complete_activity_task = activity_task  # type: ignore[method-assign, assignment]  # the same signature, see above


def run_child(ctx: ChildContext) -> str:
    """Start the workflow or resume it with a fresh worker, and wait for its result."""
    global _CTX
    _CTX = ctx
    wrap_boundaries(ctx.boundaries)
    return asyncio.run(_run(ctx))


async def _run(ctx: ChildContext) -> str:
    workflow_id, task_queue = names(ctx.point_dir)
    client = await Client.connect(address())
    handle: WorkflowHandle[PayInvoice, str] = client.get_workflow_handle(workflow_id)
    try:
        description: WorkflowExecutionDescription | None = await handle.describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        description = None
    status = None if description is None else description.status
    if status is not None and status != WorkflowExecutionStatus.RUNNING:
        return "none"
    if description is not None and status is not None:
        raw = description.raw_description
        pending = _pending_of(raw)
        ctx.boundaries.note(what="resume_state", next=[status.name], tasks=pending, saved=[])
        if os.environ.get(REAL_TIMEOUTS_ENV, "").strip() != "1":
            expiry = await expire_dead_attempts(client, handle, raw)
            ctx.boundaries.note(
                what="expired_attempts",
                activities=list(expiry.activities),
                restored_s=list(expiry.restored_s),
                skipped=expiry.skipped,
            )
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[PayInvoice],
        activities=[charge_card, send_receipt],
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
        workflow_runner=RUNNER,
    )
    async with worker:
        if status is None:
            label = ctx.boundaries.numbered("temporal.start_workflow")
            ctx.boundaries.before(label, what=workflow_id.split("@")[0])
            handle = await client.start_workflow(
                PayInvoice.run,
                USER_INPUT,
                id=workflow_id,
                task_queue=task_queue,
                task_timeout=TASK_TIMEOUT,
            )
            ctx.boundaries.after(label)
            action = "start"
        else:
            action = "resume"
        await handle.result()
    return action


async def _pending(handle: WorkflowHandle[PayInvoice, str]) -> list[str]:
    """What the server would run next: pending activities (with their attempt) and a pending
    workflow task."""
    return _pending_of((await handle.describe()).raw_description)


def _pending_of(raw: DescribeWorkflowExecutionResponse) -> list[str]:
    """``_pending`` of a description already read (the resume child reads one, once)."""
    out = [
        f"{a.activity_type.name} (activity {a.activity_id}, attempt {a.attempt})"
        for a in raw.pending_activities
    ]
    if raw.HasField("pending_workflow_task"):
        out.append("workflow task")
    return out


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The workflow's event history, as a fresh client reads it from the server."""
    del options
    return run_sync(_read_state(point_dir))


async def _read_state(point_dir: Path) -> TargetState:
    workflow_id, _ = names(point_dir)
    client = await Client.connect(address())
    handle: WorkflowHandle[PayInvoice, str] = client.get_workflow_handle(workflow_id)
    try:
        history = await handle.fetch_history()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return TargetState()
        raise
    state = TargetState(exists=True)
    decode = client.data_converter.payload_converter.from_payloads
    activities: dict[int, tuple[str, str]] = {}  # scheduled event id -> (type, call id)
    for event in history.events:
        _event(event, state, activities, decode)
    if not state.finished:
        state.pending = await _pending(handle)
    return state


def _event(
    event: HistoryEvent,
    state: TargetState,
    activities: dict[int, tuple[str, str]],
    decode: Callable[[list[Payload]], list[object]],
) -> None:
    """One history event into the state: the input, each activity scheduled (a call) and
    completed (a result), the workflow's end. Workflow task events and attempts are left out of
    the rows: they differ with the crash without the run differing."""
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        attrs = event.workflow_execution_started_event_attributes
        prompt = decode(list(attrs.input.payloads))[0]
        state.inputs.append(str(prompt))
        state.history.append(f"user: {prompt}")
    elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        scheduled = event.activity_task_scheduled_event_attributes
        name, call_id = scheduled.activity_type.name, f"activity-{scheduled.activity_id}"
        activities[event.event_id] = (name, call_id)
        state.calls.setdefault(name, []).append(call_id)
        state.history.append(f"workflow: schedules {name}")
    elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        done = event.activity_task_completed_event_attributes
        name, call_id = activities[done.scheduled_event_id]
        result = decode(list(done.result.payloads))[0] if done.result.payloads else None
        state.results.setdefault(name, []).append(call_id)
        state.history.append(f"tool {name}: {result}")
    elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        completed = event.workflow_execution_completed_event_attributes
        state.answer = str(decode(list(completed.result.payloads))[0])
        state.finished = True
        state.history.append(f"answer: {state.answer}")
    elif kind in _ENDS:
        state.finished = True
        state.history.append(f"workflow ended: {EventType.Name(kind)}")
    elif kind in _ACTIVITY_ENDS:
        state.history.append(f"activity ended: {EventType.Name(kind)}")


_ENDS = (
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
)
_ACTIVITY_ENDS = (
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
)
