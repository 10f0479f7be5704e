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
the scripted model of ``--model-script``, ``--input`` is the user's prompt, ``--deps`` the run's
dependencies as JSON (validated into the agent's ``deps_type``), ``--effect`` names the app's
service clients wherever they are; the last process notes the run in the trace, where the
parent reads it (``sim.targets.pydantic_ai.app_state``).

This module never imports pydantic_ai, dbos or prefect: only the child modules do
(``agent``, ``app``, ``prefect_agent``), inside the child process and when the state is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sim.targets.kit.base import TargetBase
from sim.targets.protocol import (
    AppShape,
    TargetError,
    TargetOptions,
    missing_extra,
)

#: The modules the extra installs, checked before anything imports them.
REQUIRED = ("pydantic_ai", "dbos")
#: What the ``prefect`` durability needs on top: pydantic-ai's prefect extra.
PREFECT_REQUIRED = ("prefect", "pydantic_ai.durable_exec.prefect")
#: The variants each durability takes (DBOS's step and child workflow have no Prefect counterpart).
PREFECT_VARIANTS = ("as_is", "idempotent")


class PydanticAITarget(TargetBase):
    name = "pydantic-ai"
    snapshot_refusal = "runs on DBOS or Prefect, whose writers run on threads of their own"
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
    required = REQUIRED
    child_module = "sim.targets.pydantic_ai.agent"
    state_module = "sim.targets.pydantic_ai.agent"
    app_shape = AppShape(
        names="a factory returning a pydantic_ai.Agent, build_agent() or build_agent(model)",
        takes=frozenset({"--input", "--model-script", "--deps"}),
        requires=frozenset({"--input", "--model-script"}),
        input_kinds=(str,),
        child_module="sim.targets.pydantic_ai.app",
        state_module="sim.targets.pydantic_ai.app_state",
    )
    demo_point_s = 5.0
    timed_durabilities = ("prefect",)  # the demo's is DBOS

    def validate(self, options: TargetOptions) -> TargetOptions:
        """The ``prefect`` durability: its library, its variants, its restarts; an app runs on
        DBOS only."""
        prefect = options.durability == "prefect"
        if prefect:
            check_prefect(self.name, options)
        elif options.resume == "rerun":
            raise TargetError("pydantic-ai: --resume rerun needs --durability prefect")
        if options.variant == "child_workflow" and (options.durability or "agent") == "agent":
            # A child workflow per tool call is DBOSDurability's (a capability's) own option.
            raise TargetError("pydantic-ai: --variant child_workflow needs --durability capability")
        if prefect and options.app is not None:
            raise TargetError("pydantic-ai: --app runs on DBOS (--durability agent|capability)")
        return options

    @contextlib.contextmanager
    def service(self, options: TargetOptions) -> Iterator[None]:
        """On Prefect, the migrated database template every point copies, made in the parent
        before any child runs (tens of seconds, once per machine and Prefect version), so no
        child's time limit pays for it."""
        if options.durability == "prefect":
            # Prefect (the pydantic-ai extra): this module is imported for every target listing
            from sim.targets.pydantic_ai.prefect_env import ensure_template

            ensure_template()
        yield

    def preload(self, options: TargetOptions) -> tuple[str, ...]:
        """On Prefect, prefect imported under the settings every point shares
        (``prefect_preload``), which a child replaces with its point's before it starts its own
        API server."""
        if options.durability == "prefect":
            return ("sim.targets.child", "sim.targets.pydantic_ai.prefect_preload",
                    "sim.targets.pydantic_ai.prefect_env")  # fmt: skip
        return super().preload(options)

    def _module(self, options: TargetOptions, *, child: bool) -> str:
        if options.durability == "prefect":
            return "sim.targets.pydantic_ai." + ("prefect_env" if child else "prefect_state")
        return super()._module(options, child=child)


def check_prefect(name: str, options: TargetOptions) -> None:
    """The ``prefect`` durability's library is installed, and the options are its own."""
    why = missing_extra(name, PREFECT_REQUIRED, "pydantic-ai")
    if why is not None:
        raise TargetError(f"{why} (and pydantic-ai-slim's prefect extra)")
    if options.variant not in ("", *PREFECT_VARIANTS):
        variants = "|".join(PREFECT_VARIANTS)
        raise TargetError(f"{name}: --durability prefect takes --variant {variants}")


TARGET = PydanticAITarget()
