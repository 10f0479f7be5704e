"""The pydantic-ai target: a pydantic-ai agent on its DBOS durable-execution integration, on a
SQLite DBOS system database, or on its Prefect integration, on a local Prefect API per point.

The agent's model is a ``FunctionModel`` (a scripted function, no network): asked to pay an
invoice and email the receipt, it calls ``charge_card`` (payments, declared exactly once), then
``send_receipt`` (outbox, declared exactly once), then answers. Two ways to make it durable,
both pydantic-ai's own (``--durability``):

- ``agent``: the agent wrapped in ``DBOSAgent``, whose ``run`` is a DBOS workflow (deprecated
  in pydantic-ai 2.x, still shipped, and what existing deployments run);
- ``capability``: the ``DBOSDurability`` capability on the agent, whose ``run`` is called inside
  the user's own ``@DBOS.workflow`` (what pydantic-ai 2.x recommends).

- ``prefect``: the ``PrefectDurability`` capability on the agent, run inside the user's own
  Prefect ``@flow`` (``sim.targets.pydantic_ai.prefect_agent``): each model request and each
  tool call is a Prefect task whose result is persisted and replayed from cache by a retry of
  the same flow run. Restart: ``--resume recovery`` (the default) retries the flow run as
  ``prefect flow-run retry`` does; ``--resume rerun`` runs the flow again (a new flow run, same
  name and parameters). Variants ``as_is`` and ``idempotent`` (keyed by the flow run's name and
  the tool call id). Prefect's API is served inside each child, on the point's SQLite database
  (``sim.targets.pydantic_ai.prefect_env``): nothing outlives a point.

On DBOS the model request is a DBOS step and a function tool is not: it runs in the
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

This module never imports pydantic_ai, dbos or prefect: only the child modules do
(``agent``, ``app``, ``prefect_agent``), inside the child process and when the state is read.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
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
#: What the ``prefect`` durability needs on top: pydantic-ai's prefect extra.
PREFECT_REQUIRED = ("prefect", "pydantic_ai.durable_exec.prefect")
#: The variants each durability takes (DBOS's step and child workflow have no Prefect twin).
PREFECT_VARIANTS = ("as_is", "idempotent")


class PydanticAITarget:
    name = "pydantic-ai"
    description = (
        "pydantic-ai agent (FunctionModel, two function tools) on its DBOS integration "
        "(DBOSAgent or DBOSDurability, SQLite system database) or its Prefect integration "
        "(PrefectDurability in a flow, local Prefect API and SQLite database per point)"
    )
    extra = "pydantic-ai"
    distributions = ("pydantic-ai-slim", "dbos", "prefect")
    durabilities = ("agent", "capability", "prefect")
    variants = ("as_is", "idempotent", "step", "child_workflow")
    savers = ("sqlite",)
    resumes = ("recovery", "rerun")

    def missing(self) -> str | None:
        return missing_extra(self.name, REQUIRED, self.extra)

    def validate(self, options: TargetOptions) -> TargetOptions:
        """With ``--app``: the user's agent factory, its effect functions, its prompt and its
        model's script, checked (files made absolute: children run elsewhere). Without: none of
        those options. The ``prefect`` durability: its library, its variants, its restarts."""
        prefect = options.durability == "prefect"
        if prefect:
            check_prefect(self.name, options)
        elif options.resume == "rerun":
            raise TargetError("pydantic-ai: --resume rerun needs --durability prefect")
        if prefect and options.app:
            raise TargetError("pydantic-ai: --app runs on DBOS (--durability agent|capability)")
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

    @contextlib.contextmanager
    def service(self, options: TargetOptions) -> Iterator[None]:
        """On Prefect, the migrated database template every point copies, made in the parent
        before any child runs (tens of seconds, once per machine and Prefect version), so no
        child's time limit pays for it."""
        if options.durability == "prefect":
            from sim.targets.pydantic_ai.prefect_env import ensure_template

            ensure_template()
        yield

    def run_child(self, ctx: ChildContext) -> str:
        if ctx.options.durability == "prefect":
            from sim.targets.pydantic_ai.prefect_env import run_child as run_prefect

            return run_prefect(ctx)
        if ctx.options.app:
            from sim.targets.pydantic_ai.app import run_child as run_app

            return run_app(ctx)
        from sim.targets.pydantic_ai.agent import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        if options.durability == "prefect":
            from sim.targets.pydantic_ai.prefect_state import read_state as read_prefect_state

            return read_prefect_state(point_dir, options)
        if options.app:
            from sim.targets.pydantic_ai.app_state import read_state as read_app_state

            return read_app_state(point_dir, options)
        from sim.targets.pydantic_ai.agent import read_state

        return read_state(point_dir, options)


def check_prefect(name: str, options: TargetOptions) -> None:
    """The ``prefect`` durability's library is installed, and the options are its own."""
    why = missing_extra(name, PREFECT_REQUIRED, "pydantic-ai")
    if why is not None:
        raise TargetError(f"{why} (and pydantic-ai-slim's prefect extra)")
    if options.variant not in PREFECT_VARIANTS:
        variants = "|".join(PREFECT_VARIANTS)
        raise TargetError(f"{name}: --durability prefect takes --variant {variants}")


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
