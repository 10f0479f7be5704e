"""The LangGraph target: a tool-calling agent on ``StateGraph`` + ``ToolNode``, checkpointed by
the sync ``SqliteSaver`` (``invoke``) or ``AsyncSqliteSaver`` on aiosqlite (``ainvoke``), run
under ``durability="sync"``, ``"async"`` or ``"exit"``.

The agent is the shape of LangGraph's own tutorial agent: an ``agent`` node that calls a chat
model (here a scripted one, no network), ``tools_condition`` routing to a prebuilt ``ToolNode``,
and back. The user asks to pay an invoice and email the receipt; the model calls
``charge_card`` (payments, declared exactly once), then ``send_receipt`` (outbox, declared
exactly once), then answers.

Crash boundaries (wrapped in the child only): the agent node (``node:agent#n``), each tool's
effect on the ledger (``effect:{service}.{op}#{call_id}``), and the checkpointer's
``put``/``aput`` (``saver.put#n``) and ``put_writes``/``aput_writes`` (``saver.put_writes#n``).

This module never imports langgraph: only ``sim.targets.langgraph.agent`` does, and it is
imported inside the child process and when the state is read.
"""

from __future__ import annotations

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

#: The distributions the extra installs, checked before anything imports them.
REQUIRED = ("langgraph", "langgraph.checkpoint.sqlite", "langchain_core", "aiosqlite")


class LangGraphTarget:
    name = "langgraph"
    description = (
        "LangGraph 1.x agent (StateGraph + ToolNode, scripted chat model) on SqliteSaver or "
        "AsyncSqliteSaver"
    )
    extra = "langgraph"
    distributions = (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langchain-core",
    )
    durabilities = ("sync", "async", "exit")
    variants = ("as_is", "idempotent")
    savers = ("sqlite", "aiosqlite")
    resumes = ("tasks", "next")

    def missing(self) -> str | None:
        return missing_extra(self.name, REQUIRED, self.extra)

    def validate(self, options: TargetOptions) -> TargetOptions:
        """With ``--app``: the user's graph factory, its effect functions, its input and its
        model's script, checked (files made absolute: children run elsewhere). Without: none of
        those options."""
        if not options.app:
            if options.effects or options.app_input or options.model_script:
                raise TargetError("langgraph: --effect, --input and --model-script need --app")
            return options
        if options.variant not in ("", "as_is"):
            raise TargetError("langgraph: --variant is the bundled agent's; fix your app instead")
        if not options.effects:
            raise TargetError("langgraph: --app needs its effect functions: --effect NAME=POLICY")
        return replace(
            options,
            app=checked_app(options.app),
            effects=canonical_effects(options.effects),
            app_input=json_file(self.name, "--input", options.app_input, (str, dict)),
            model_script=json_file(self.name, "--model-script", options.model_script, (list,)),
        )

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        return parse_effects(options.effects) if options.app else PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        if ctx.options.app:
            from sim.targets.langgraph.app import run_child as run_app

            return run_app(ctx)
        from sim.targets.langgraph.agent import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        if options.app:
            from sim.targets.langgraph.app_state import read_state as read_app_state

            return read_app_state(point_dir, options)
        from sim.targets.langgraph.agent import read_state

        return read_state(point_dir, options)


TARGET = LangGraphTarget()
