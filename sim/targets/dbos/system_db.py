"""The crash boundaries of DBOS's system database, shared by every target that runs on DBOS.

A DBOS step's output is durable only once ``SystemDatabase.record_operation_result`` returns;
a workflow exists once ``init_workflow`` returns and is over once ``update_workflow_outcome``
does. Wrapping these three (in the child only) is what lets a sweep kill a DBOS run between an
effect and the record of it, whichever library (DBOS alone, pydantic-ai on DBOS) drives it.

Imports dbos at module level: import this module only in a child process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dbos import DBOSClient, StepInfo, WorkflowStatus
from dbos._sys_db import SystemDatabase

from sim.targets.boundaries import Boundaries, wrap_method
from sim.targets.protocol import TargetState

#: The statuses after which DBOS runs a workflow no more.
FINAL = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
#: Seconds between a child's polls of a recovered workflow's status (DBOS's default is 1 s: a
#: point's resume would wait up to a second after the workflow ended, for nothing).
RESULT_POLL_S = 0.01


def poll_quickly() -> None:
    """Make DBOS's internal queue poll every ``RESULT_POLL_S``, before ``DBOS.launch()``: DBOS
    recovers a pending workflow by re-enqueueing it on that queue, whose worker polls once a
    second by default, so every resumed child waited about a second before the workflow ran
    again (measured: the first step of the recovered workflow 1.0 s after launch). Only the
    wait changes: the workflow still starts through the queue's own dequeue."""
    # the dbos extra's private registry: in the child only
    from dbos._dbos import _get_or_create_dbos_registry

    queue = _get_or_create_dbos_registry().get_internal_queue()
    queue._polling_interval_sec = RESULT_POLL_S


def sqlite_url(db_path: Path) -> str:
    """DBOS's URL of a SQLite system database file."""
    return f"sqlite:///{db_path}"


def read_workflow(
    db_path: Path, workflow_id: str
) -> tuple[TargetState, WorkflowStatus, list[StepInfo]] | None:
    """A workflow as a DBOS client (which recovers nothing) reads it: the state its status
    says (exists, finished, pending), the status and the recorded steps; None if the system
    database holds no such workflow (or does not exist yet)."""
    if not db_path.exists():
        return None
    client = DBOSClient(system_database_url=sqlite_url(db_path))
    try:
        found = client.list_workflows(workflow_ids=[workflow_id])
        if not found:
            return None
        status = found[0]
        steps = client.list_workflow_steps(workflow_id)
    finally:
        client.destroy()
    state = TargetState(exists=True, finished=status.status == "SUCCESS")
    if not state.finished:
        state.pending = [str(status.status)]
    return state, status, steps


def _describe_result(
    self: object, result: Mapping[str, object], *args: object, **kw: object
) -> str:
    del self, args, kw
    return f"output of step {result.get('function_id')} ({result.get('function_name')})"


def _describe_any(*args: object, **kw: object) -> str:
    del args, kw
    return ""


def wrap_system_database(b: Boundaries) -> None:
    """``dbos.init_workflow#n``, ``dbos.record_operation_result#n`` (its details name the step
    whose output is being recorded) and ``dbos.update_workflow_outcome#n``."""
    wrap_method(SystemDatabase, "init_workflow", b, "dbos.init_workflow", _describe_any)
    wrap_method(
        SystemDatabase, "record_operation_result", b, "dbos.record_operation_result",
        _describe_result,
    )  # fmt: skip
    wrap_method(
        SystemDatabase, "update_workflow_outcome", b, "dbos.update_workflow_outcome", _describe_any
    )
