"""The DBOS target: a DBOS 3.x durable workflow of two steps on a SQLite system database.

The workflow ``pay_invoice`` runs the step ``charge_card`` (payments, declared exactly once),
then ``send_receipt`` (outbox, declared exactly once), and returns its answer. A restarted
process launches DBOS, which recovers the pending workflow by itself; the child then waits for
it (or starts it, if the system database has no record of it).

Crash boundaries (wrapped in the child only): each step's effect on the ledger
(``effect:{service}.{op}#{workflow}:{step}``) and the system database's
``record_operation_result`` (``dbos.record_operation_result#n``: a step's output is durable
only once this returns), ``init_workflow`` and ``update_workflow_outcome``.

This module never imports dbos: only ``sim.targets.dbos.workflow`` does, inside the child
process and when the state is read.
"""

from __future__ import annotations

from pathlib import Path

from sim.targets.protocol import (
    PAYMENT_AGENT_TOOLS,
    ChildContext,
    TargetOptions,
    TargetState,
    TargetTool,
    missing_extra,
)


class DBOSTarget:
    name = "dbos"
    description = "DBOS 3.x workflow (two steps) on a SQLite system database"
    extra = "dbos"
    distributions = ("dbos",)
    durabilities = ("sqlite",)
    variants = ("as_is", "idempotent")
    savers = ("sqlite",)
    resumes = ("recovery",)

    def missing(self) -> str | None:
        return missing_extra(self.name, ("dbos",), self.extra)

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        del options  # the same agent whatever the options
        return PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        from sim.targets.dbos.workflow import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        from sim.targets.dbos.workflow import read_state

        return read_state(point_dir, options)


TARGET = DBOSTarget()
