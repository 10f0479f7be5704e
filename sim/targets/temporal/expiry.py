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
it evicts a workflow from its cache): a workflow task the server would otherwise hold for the
dead worker's sticky queue until the sticky schedule-to-start timeout goes to the task queue.

What stays real: the workflow task timeout (a started workflow task has no such option), and
everything after the retry is scheduled. The server arms the shortened timer at about a second's
precision, so an expired attempt still costs about 1 s, against 3 s. ``REAL_TIMEOUTS_ENV=1``
waits the timeouts out instead; ``tests/sim/targets/test_temporal_target.py`` holds the verdicts
and ledgers of both ways equal.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import (
    ResetStickyTaskQueueRequest,
    UpdateActivityOptionsRequest,
)
from temporalio.client import Client, WorkflowHandle

from sim.targets.temporal.flows import ACTIVITY_TIMEOUT

#: The start-to-close timeout a dead worker's attempt is given: long enough to be a timer the
#: server arms, short enough to cost nothing.
SHORTENED = timedelta(milliseconds=10)
#: How often the server is asked whether the attempt has timed out, and for how long at most
#: (past the full timeout the server would have retried the attempt by itself).
POLL_S = 0.02
WAIT_LIMIT_S = ACTIVITY_TIMEOUT.total_seconds() + 5.0


async def expire_dead_attempts(client: Client, handle: WorkflowHandle[Any, Any]) -> list[str]:
    """Time out every activity attempt that is started on the server (its worker is dead: see
    the module docstring), wait for each retry to be scheduled, restore the options; the ids of
    the activities so expired."""
    started = {
        a.activity_id: a.attempt
        for a in (await handle.describe()).raw_description.pending_activities
        if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    }
    for activity_id in sorted(started):
        await _update(client, handle.id, activity_id, shortened=True)
    retried = await _wait_retried(handle, started)
    for activity_id in sorted(retried):
        await _update(client, handle.id, activity_id, shortened=False)
    await client.workflow_service.reset_sticky_task_queue(
        ResetStickyTaskQueueRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=handle.id)
        )
    )
    return sorted(started)


async def _update(client: Client, workflow_id: str, activity_id: str, *, shortened: bool) -> None:
    """Shorten one activity's start-to-close timeout, or restore its original options."""
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
    await client.workflow_service.update_activity_options(request)


async def _wait_retried(handle: WorkflowHandle[Any, Any], started: dict[str, int]) -> set[str]:
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
            raise RuntimeError(
                f"the server did not time out the dead worker's activities {sorted(still)} "
                f"within {WAIT_LIMIT_S:.0f} s"
            )
        await asyncio.sleep(POLL_S)
