"""Skip the wait on a dead worker's activity: the server's own start-to-close timeout, brought
forward, as a virtual clock brings a timer forward.

Why: a point whose worker was killed in an activity (after the workflow task that scheduled it,
around its effect, before its completion reached the server) waits the activity's start-to-close
timeout before the server retries it (``ACTIVITY_TIMEOUT``, 3 s): more than half of the target's
time per point. The harness knows what the server cannot: the previous worker is dead (a resume
child starts only once its predecessor has been reaped). So the resume child, before its own
worker polls, shortens each started activity's start-to-close timeout on the server
(``UpdateActivityOptions``, Temporal Server 1.28+), waits until the server has timed that attempt
out and scheduled the next one (the same ``ActivityTaskTimedOut`` failure and retry policy as
when the full timeout passes), and then restores the activity's original options, so the retry
runs under the timeout the workflow asked for. No worker polls the task queue meanwhile, so no
attempt runs under the shortened timeout. The history the parent reads is the same: Temporal
writes no event for an attempt that timed out and was retried.

Then it clears the workflow's sticky queue (``ResetStickyTaskQueue``, what a worker asks when
it evicts a workflow from its cache): the workflow tasks the server schedules from then on go
to the task queue every worker polls, not to the dead worker's sticky queue (a task already
waiting there still waits the sticky schedule-to-start timeout, 1 s).

What stays real: the workflow task timeout (a started workflow task has no such option), and
everything after the retry is scheduled. The server arms the shortened timer at about a second's
precision, so an expired attempt still costs about 1 s, against 3 s. ``REAL_TIMEOUTS_ENV=1``
waits the timeouts out instead; ``tests/sim/targets/test_temporal_target.py`` holds the verdicts
and ledgers of both ways equal.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionResponse,
    ResetStickyTaskQueueRequest,
    UpdateActivityOptionsRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from sim.targets.temporal.flows import ACTIVITY_TIMEOUT, PayInvoice

#: The start-to-close timeout a dead worker's attempt is given: long enough to be a timer the
#: server arms, short enough to cost nothing.
SHORTENED = timedelta(milliseconds=10)
#: How often the server is asked whether the attempt has timed out, and for how long at most
#: (past the full timeout the server would have retried the attempt by itself).
POLL_S = 0.02
WAIT_LIMIT_S = ACTIVITY_TIMEOUT.total_seconds() + 5.0


@dataclass(frozen=True)
class Expiry:
    """What the resume child did: the activities whose dead attempt it timed out, each one's
    start-to-close timeout once restored (seconds), or why it left the server to wait."""

    activities: tuple[str, ...] = ()
    restored_s: tuple[float, ...] = ()
    skipped: str | None = None


#: What a server says when it does not offer ``UpdateActivityOptions`` (older than 1.28, or its
#: activity APIs turned off): the harness then waits the timeouts out, as a user's worker would.
UNOFFERED = (
    RPCStatusCode.UNIMPLEMENTED,
    RPCStatusCode.PERMISSION_DENIED,
    RPCStatusCode.FAILED_PRECONDITION,
    RPCStatusCode.INVALID_ARGUMENT,
)


async def expire_dead_attempts(
    client: Client,
    handle: WorkflowHandle[PayInvoice, str],
    described: DescribeWorkflowExecutionResponse,
) -> Expiry:
    """Time out every activity attempt that ``described`` (the workflow as the resume child
    found it, before its worker polls) shows started on the server (its worker is dead: see
    the module docstring), wait for each retry to be scheduled, restore the options. A server
    that does not offer the update, or does not move within ``WAIT_LIMIT_S``, is left to wait
    the full timeouts (the verdict is the same; only the point is slower), and says why."""
    started = {
        a.activity_id: a.attempt
        for a in described.pending_activities
        if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    }
    shortened: list[str] = []
    try:
        for activity_id in sorted(started):
            if await _update(client, handle.id, activity_id, shortened=True):
                shortened.append(activity_id)
    except RPCError as exc:
        if exc.status not in UNOFFERED:
            raise
        await _restore(client, handle.id, shortened)
        return Expiry(skipped=f"the server refused UpdateActivityOptions: {exc.message}")
    try:
        retried = await _wait_retried(handle, {a: started[a] for a in shortened})
    except TimeoutError as exc:
        await _restore(client, handle.id, shortened)
        return Expiry(skipped=str(exc))
    await _restore(client, handle.id, sorted(retried))
    await client.workflow_service.reset_sticky_task_queue(
        ResetStickyTaskQueueRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=handle.id)
        )
    )
    return Expiry(
        activities=tuple(sorted(retried)), restored_s=await _timeouts_s(handle, sorted(retried))
    )


async def _restore(client: Client, workflow_id: str, activity_ids: list[str]) -> None:
    for activity_id in activity_ids:
        await _update(client, workflow_id, activity_id, shortened=False)


async def _timeouts_s(
    handle: WorkflowHandle[PayInvoice, str], activity_ids: list[str]
) -> tuple[float, ...]:
    """The start-to-close timeouts the server now holds for ``activity_ids`` (the test checks
    they are the workflow's own again)."""
    pending = {
        a.activity_id: a for a in (await handle.describe()).raw_description.pending_activities
    }
    return tuple(
        pending[a].activity_options.start_to_close_timeout.ToTimedelta().total_seconds()
        for a in activity_ids
        if a in pending
    )


async def _update(client: Client, workflow_id: str, activity_id: str, *, shortened: bool) -> bool:
    """Shorten one activity's start-to-close timeout, or restore its original options: one
    request, so that the server, not this child, decides what the new timeout means. False:
    the activity closed meanwhile (nothing to shorten or restore)."""
    request = UpdateActivityOptionsRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=workflow_id),
        id=activity_id,
    )
    if shortened:
        timeout = Duration()
        timeout.FromTimedelta(SHORTENED)
        request.activity_options.CopyFrom(ActivityOptions(start_to_close_timeout=timeout))
        request.update_mask.CopyFrom(FieldMask(paths=["start_to_close_timeout"]))
    else:
        request.restore_original = True
    try:
        await client.workflow_service.update_activity_options(request)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def _wait_retried(
    handle: WorkflowHandle[PayInvoice, str], started: dict[str, int]
) -> set[str]:
    """Until no activity of ``started`` is still on its started attempt; those still pending
    then (retried: one whose retries ran out is no longer pending, and has no options left to
    restore). A server that has not moved by ``WAIT_LIMIT_S`` is an error, not a hang."""
    if not started:
        return set()
    deadline = time.monotonic() + WAIT_LIMIT_S
    while True:
        pending = (await handle.describe()).raw_description.pending_activities
        ours = [a for a in pending if a.activity_id in started]
        still = {
            a.activity_id
            for a in ours
            if a.attempt == started[a.activity_id]
            and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        }
        if not still:
            return {a.activity_id for a in ours}
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the server did not time out the dead worker's activities {sorted(still)} "
                f"within {WAIT_LIMIT_S:.0f} s"
            )
        await asyncio.sleep(POLL_S)
