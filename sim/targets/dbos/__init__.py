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
unmodified, started with the arguments of ``--input`` and its effect functions (``--effect``)
landed on the ledger (``sim.targets.dbos.app``); the last process notes the workflow's final
status in the trace, where the parent reads it (``sim.targets.dbos.app_state``).

This module never imports dbos: only ``sim.targets.dbos.workflow`` and ``sim.targets.dbos.app``
do, inside the child process (the former also when the bundled workflow's state is read).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from sim.targets.dbos.arguments import workflow_arguments
from sim.targets.protocol import (
    PAYMENT_AGENT_TOOLS,
    ChildContext,
    TargetError,
    TargetOptions,
    TargetState,
    TargetTool,
    missing_extra,
)
from sim.targets.python_app.options import (
    canonical_effects,
    checked_app,
    json_file,
    parse_effects,
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

    def validate(self, options: TargetOptions) -> TargetOptions:
        """With ``--app``: the user's workflow, its effect functions and its input, checked
        (files made absolute: children run elsewhere). Without: none of those. A DBOS workflow
        calls no model, so ``--model-script`` is refused either way."""
        if options.model_script:
            raise TargetError("dbos: --model-script scripts an agent's model; a workflow has none")
        if not options.app:
            if options.effects or options.app_input:
                raise TargetError("dbos: --effect and --input need --app")
            return options
        if options.variant not in ("", "as_is"):
            raise TargetError("dbos: --variant is the bundled workflow's; fix your app instead")
        if not options.effects:
            raise TargetError("dbos: --app needs its effect functions: --effect NAME=POLICY")
        app_input = json_file(self.name, "--input", options.app_input, (list, dict))
        try:
            workflow_arguments(json.loads(Path(app_input).read_text(encoding="utf-8")))
        except ValueError as exc:
            raise TargetError(f"dbos: --input {options.app_input}: {exc}") from exc
        return replace(
            options,
            app=checked_app(options.app),
            effects=canonical_effects(options.effects),
            app_input=app_input,
        )

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        return parse_effects(options.effects) if options.app else PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        if ctx.options.app:
            from sim.targets.dbos.app import run_child as run_app

            return run_app(ctx)
        from sim.targets.dbos.workflow import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        if options.app:
            from sim.targets.dbos.app_state import read_state as read_app_state

            return read_app_state(point_dir, options)
        from sim.targets.dbos.workflow import read_state

        return read_state(point_dir, options)


TARGET = DBOSTarget()
