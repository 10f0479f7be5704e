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

from pathlib import Path

from sim.targets.protocol import (
    PAYMENT_AGENT_TOOLS,
    ChildContext,
    TargetOptions,
    TargetState,
    TargetTool,
    missing_extra,
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

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        del options  # the same agent whatever the options
        return PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        from sim.targets.langgraph.agent import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        from sim.targets.langgraph.agent import read_state

        return read_state(point_dir, options)


TARGET = LangGraphTarget()
