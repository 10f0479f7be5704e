"""The crash boundaries of DBOS's system database, shared by every target that runs on DBOS.

A DBOS step's output is durable only once ``SystemDatabase.record_operation_result`` returns;
a workflow exists once ``init_workflow`` returns and is over once ``update_workflow_outcome``
does. Wrapping these three (in the child only) is what lets a sweep kill a DBOS run between an
effect and the record of it, whichever library (DBOS alone, pydantic-ai on DBOS) drives it.

Imports dbos at module level: import this module only in a child process.
"""

from __future__ import annotations

from typing import Any

from dbos._sys_db import SystemDatabase

from sim.targets.boundaries import Boundaries, wrap_method


def _describe_result(self: Any, result: Any, *args: Any, **kw: Any) -> str:
    del self, args, kw
    return f"output of step {result.get('function_id')} ({result.get('function_name')})"


def _describe_any(*args: Any, **kw: Any) -> str:
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
