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

This module never imports pydantic_ai or dbos: only ``sim.targets.pydantic_ai.agent`` does,
inside the child process and when the state is read.
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

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        del options  # the same agent whatever the options
        return PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        from sim.targets.pydantic_ai.agent import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        from sim.targets.pydantic_ai.agent import read_state

        return read_state(point_dir, options)


TARGET = PydanticAITarget()
