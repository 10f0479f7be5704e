"""A user's own DBOS workflow (``--app FILE.py:WORKFLOW``), crash-tested as the bundled one is.

The workflow is the user's ``@DBOS.workflow()`` function, unmodified. Each child loads the user's
module first -- which registers its workflows and steps with DBOS by their qualified names, as
importing it does in production -- then lands the declared effect functions (``--effect``: the
app's clients of outside services, called inside its steps) on the ledger, then configures DBOS
on the point's SQLite system database and launches it, which recovers a pending workflow by
itself. The run is started under a fixed workflow id with the arguments of ``--input``, or the
recovered one is waited for, to its end.

An effect function is wrapped where the module's code looks it up (its module globals), so a
step that calls it finds the wrapper. A step itself is no effect to name: DBOS calls the step
function it registered at import, and skips a step it recorded as done on recovery -- naming it
would land calls only where the app's own code calls the step, not where DBOS does.

Crash boundaries: the system database's (``sim.targets.dbos.system_db``) and each effect
(``effect:app.NAME#NAME-n``). The last process notes the workflow's final status, output, input
and steps in the trace (``sim.targets.dbos.app_state`` reads it there: the parent never imports
the user's code).

Imports dbos at module level: import this module only in a child process.
"""

from __future__ import annotations

from collections.abc import Callable

from dbos import DBOS, SetWorkflowID
from dbos import _dbos as dbos_module

from sim.targets.dbos.app_state import STATE_NOTE
from sim.targets.dbos.arguments import workflow_arguments
from sim.targets.dbos.system_db import (
    FINAL,
    RESULT_POLL_S,
    poll_quickly,
    sqlite_url,
    wrap_system_database,
)
from sim.targets.kit.declarations import AppError
from sim.targets.kit.loading import load_app
from sim.targets.protocol import ChildContext
from sim.targets.shapes import Json

DB_NAME = "dbos.sqlite"
#: The fixed id the run is started under, so a restarted process finds it.
WORKFLOW_ID = "durable-sim-app"


def registered_workflow(app: str, function: Callable[..., object]) -> str:
    """The name DBOS registered ``function`` under as a workflow; a one-line ``AppError`` if it
    is none (a plain function, or a step, which DBOS registers under another name)."""
    name = getattr(function, "dbos_function_name", None)
    registry = dbos_module._get_or_create_dbos_registry().workflow_info_map
    if name is None or registry.get(name) is not function:
        raise AppError(f"--app {app}: {app.rsplit(':', 1)[1]!r} is not a @DBOS.workflow() function")
    return str(name)


def _load(ctx: ChildContext) -> tuple[Callable[..., object], list[Json], dict[str, Json]]:
    """The user's workflow (its module imported, its effects wrapped) and its arguments. A DBOS
    instance the module made when imported is dropped (its registrations stay): the harness's
    runs on the point's system database."""
    app = ctx.options.app
    assert app is not None, "an app child runs only with --app"
    _, function = load_app(ctx)
    registered_workflow(app.entry, function)
    if dbos_module._dbos_global_instance is not None:
        DBOS.destroy(workflow_completion_timeout_sec=0)
    args, kwargs = workflow_arguments([] if app.input is None else app.input.value)
    return function, args, kwargs


def run_child(ctx: ChildContext) -> str:
    """Launch DBOS (which recovers a pending workflow by itself), then start the workflow if
    the system database has no record of it, or wait for the recovered one; note its end."""
    workflow, args, kwargs = _load(ctx)
    wrap_system_database(ctx.boundaries)
    url = sqlite_url(ctx.point_dir / DB_NAME)
    DBOS(config={"name": "durable-sim-app", "system_database_url": url})
    poll_quickly()
    DBOS.launch()
    # No DBOS.destroy: the child leaves with os._exit (sim.targets.child.leave).
    status = DBOS.get_workflow_status(WORKFLOW_ID)
    if status is None:
        with SetWorkflowID(WORKFLOW_ID):
            handle = DBOS.start_workflow(workflow, *args, **kwargs)
        action = "start"
    elif status.status in FINAL:
        _note_state(ctx)
        return "none"
    else:
        ctx.boundaries.note(what="resume_state", next=[status.status], tasks=[], saved=[])
        handle = DBOS.retrieve_workflow(WORKFLOW_ID)
        action = "resume"
    try:
        handle.get_result(polling_interval_sec=RESULT_POLL_S)
    except Exception:  # the workflow's own error: DBOS recorded it, the note says it
        pass
    _note_state(ctx)
    return action


def _note_state(ctx: ChildContext) -> None:
    """The workflow's status as DBOS recorded it: its input, its output (``str``), its error,
    and one row per recorded step (id and name: outputs may differ between runs)."""
    status = DBOS.get_workflow_status(WORKFLOW_ID)
    if status is None:
        return
    steps = DBOS.list_workflow_steps(WORKFLOW_ID, load_output=False)
    ctx.boundaries.note(
        what=STATE_NOTE,
        status=str(status.status),
        output=str(status.output),
        error=None if status.error is None else f"{type(status.error).__name__}: {status.error}",
        inputs=[] if status.input is None else [repr(dict(status.input))],
        history=[
            f"step {s['function_id']} {s['function_name']}"
            + (" raised" if s["error"] is not None else "")
            for s in steps
        ],
    )
