"""The pydantic-ai target: a pydantic-ai agent on its DBOS durable-execution integration, on a
SQLite DBOS system database.

The agent's model is a ``FunctionModel`` (a scripted function, no network): asked to pay an
invoice and email the receipt, it calls ``charge_card`` (payments, declared exactly once), then
``send_receipt`` (outbox, declared exactly once), then answers. Two ways to make it durable,
both pydantic-ai's own (``--durability``):

- ``agent``: the agent wrapped in ``DBOSAgent``, whose ``run`` is a DBOS workflow (deprecated
  in pydantic-ai 2.x, still shipped, and what existing deployments run);
- ``capability``: the ``DBOSDurability`` capability on the agent, whose ``run`` is called inside
  the user's own ``@DBOS.workflow`` (what pydantic-ai 2.x recommends).

Either way the model request is a DBOS step and a function tool is not: it runs in the
workflow's own code, so a recovered workflow, replaying its recorded steps, calls every tool
again. Variants: ``as_is``; ``idempotent`` (each effect keyed by the workflow id and the tool
call id, which the recorded model step gives back unchanged on recovery); ``step`` (each effect
in a ``@DBOS.step`` of its own, no key); ``child_workflow`` (``--durability capability`` only:
each tool run as a DBOS child workflow, pydantic-ai's own opt-in, by the tool metadata
``{"dbos": {"child_workflow": {}}}``). The last two narrow the window to DBOS's own -- between a
tool's effect and the record of its step's or child workflow's output -- without closing it.

Crash boundaries (wrapped in the child only): the model request inside its step
(``model.request#n``), pydantic-ai's function-tool call (``pydantic_ai.call_tool#n``), each
tool's effect (``effect:{service}.{op}#{call_id}``), and DBOS's ``init_workflow``,
``record_operation_result`` and ``update_workflow_outcome``.

With ``--app FILE.py:FACTORY`` the agent is the user's own, unmodified, on the same DBOS
integration (``sim.targets.pydantic_ai.app``): the factory returns a ``pydantic_ai.Agent`` on
the scripted model of ``--model-script``, ``--input`` is the user's prompt, ``--effect`` names
the app's module-level service clients; the last process notes the run in the trace, where the
parent reads it (``sim.targets.pydantic_ai.app_state``).

This module never imports pydantic_ai or dbos: only ``sim.targets.pydantic_ai.agent`` and
``sim.targets.pydantic_ai.app`` do, inside the child process and when the state is read.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

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

#: The modules the extra installs, checked before anything imports them.
REQUIRED = ("pydantic_ai", "dbos")


class PydanticAITarget:
    name = "pydantic-ai"
    description = (
        "pydantic-ai agent (FunctionModel, two function tools) on its DBOS integration "
        "(DBOSAgent or DBOSDurability), SQLite system database"
    )
    extra = "pydantic-ai"
    distributions = ("pydantic-ai-slim", "dbos")
    durabilities = ("agent", "capability")
    variants = ("as_is", "idempotent", "step", "child_workflow")
    savers = ("sqlite",)
    resumes = ("recovery",)

    def missing(self) -> str | None:
        return missing_extra(self.name, REQUIRED, self.extra)

    def validate(self, options: TargetOptions) -> TargetOptions:
        """With ``--app``: the user's agent factory, its effect functions, its prompt and its
        model's script, checked (files made absolute: children run elsewhere). Without: none of
        those options."""
        if not options.app:
            if options.effects or options.app_input or options.model_script:
                raise TargetError("pydantic-ai: --effect, --input and --model-script need --app")
            return options
        if options.variant not in ("", "as_is"):
            raise TargetError("pydantic-ai: --variant is the bundled agent's; fix your app instead")
        if not options.effects:
            raise TargetError("pydantic-ai: --app needs its effect functions: --effect NAME=POLICY")
        script = json_file(self.name, "--model-script", options.model_script, (list,))
        check_script(Path(script))
        return replace(
            options,
            app=checked_app(options.app),
            effects=canonical_effects(options.effects),
            app_input=json_file(self.name, "--input", options.app_input, (str,)),
            model_script=script,
        )

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        return parse_effects(options.effects) if options.app else PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        if ctx.options.app:
            from sim.targets.pydantic_ai.app import run_child as run_app

            return run_app(ctx)
        from sim.targets.pydantic_ai.agent import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        if options.app:
            from sim.targets.pydantic_ai.app_state import read_state as read_app_state

            return read_app_state(point_dir, options)
        from sim.targets.pydantic_ai.agent import read_state

        return read_state(point_dir, options)


def check_script(path: Path) -> None:
    """Each turn of a model script is ``{"content": str, "tool_calls": [{"name": str, "args":
    {...}}]}`` (both optional): refused here, naming the turn, before any child runs."""
    for n, turn in enumerate(json.loads(path.read_text(encoding="utf-8")), 1):
        calls = turn.get("tool_calls", []) if isinstance(turn, dict) else None
        ok = (
            isinstance(calls, list)
            and isinstance(turn.get("content", ""), str)
            and all(
                isinstance(c, dict)
                and isinstance(c.get("name"), str)
                and isinstance(c.get("args", {}), dict)
                for c in calls
            )
        )
        if not ok:
            raise TargetError(
                f"pydantic-ai: --model-script {path}: turn {n} is not "
                '{"content": "...", "tool_calls": [{"name": "...", "args": {...}}]}'
            )


TARGET = PydanticAITarget()
