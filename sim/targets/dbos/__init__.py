"""The DBOS target: a DBOS 3.x durable workflow of two steps on a SQLite system database.

The workflow ``pay_invoice`` runs the step ``charge_card`` (payments, declared exactly once),
then ``send_receipt`` (outbox, declared exactly once), and returns its answer. A restarted
process launches DBOS, which recovers the pending workflow by itself; the child then waits for
it (or starts it, if the system database has no record of it).

Crash boundaries (wrapped in the child only): each step's effect on the ledger
(``effect:{service}.{op}#{workflow}:{step}``) and the system database's
``record_operation_result`` (``dbos.record_operation_result#n``: a step's output is durable
only once this returns), ``init_workflow`` and ``update_workflow_outcome``.

With ``--app FILE.py:WORKFLOW`` the workflow is the user's own ``@DBOS.workflow()`` function,
unmodified, of any signature, started with the arguments of ``--input`` (none without it), its
declared effects landed on the ledger (``sim.targets.dbos.app``); the last process notes the
workflow's final status in the trace, where the parent reads it (``sim.targets.dbos.app_state``).

This module never imports dbos: only ``sim.targets.dbos.workflow`` and ``sim.targets.dbos.app``
do, inside the child process (the former also when the bundled workflow's state is read).
"""

from __future__ import annotations

from sim.targets.dbos.arguments import workflow_arguments
from sim.targets.kit.base import TargetBase
from sim.targets.protocol import AppShape, TargetError, TargetOptions


class DBOSTarget(TargetBase):
    name = "dbos"
    snapshot_refusal = "runs its steps and system-database writers on threads of its own"
    description = "DBOS 3.x workflow (two steps) on a SQLite system database"
    extra = "dbos"
    distributions = ("dbos",)
    durabilities = ("sqlite",)
    savers = ("sqlite",)
    resumes = ("recovery",)
    required = ("dbos",)
    child_module = "sim.targets.dbos.workflow"
    state_module = "sim.targets.dbos.workflow"
    app_shape = AppShape(
        names="a @DBOS.workflow() function",
        takes=frozenset({"--input"}),
        input_kinds=(list, dict),
        child_module="sim.targets.dbos.app",
        state_module="sim.targets.dbos.app_state",
    )
    demo_point_s = 3.5

    def validate(self, options: TargetOptions) -> TargetOptions:
        """An app's ``--input`` is the workflow's arguments (``workflow_arguments``)."""
        given = None if options.app is None else options.app.input
        if given is not None:
            try:
                workflow_arguments(given.value)
            except ValueError as exc:
                raise TargetError(f"dbos: --input {given.path}: {exc}") from exc
        return options


TARGET = DBOSTarget()
