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

from sim.targets.kit.base import TargetBase
from sim.targets.protocol import AppShape

#: The distributions the extra installs, checked before anything imports them.
REQUIRED = ("langgraph", "langgraph.checkpoint.sqlite", "langchain_core", "aiosqlite")


class LangGraphTarget(TargetBase):
    name = "langgraph"
    #: Its saver's writes run on an executor thread that races the boundaries: on its demo, the
    #: check found a point whose ledger differed from its snapshot's.
    snapshot_refusal = "writes its checkpoints from an executor thread, which races the boundaries"
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
    savers = ("sqlite", "aiosqlite")
    resumes = ("tasks", "next")
    required = REQUIRED
    child_module = "sim.targets.langgraph.agent"
    state_module = "sim.targets.langgraph.agent"
    app_shape = AppShape(
        names="a factory returning a StateGraph or a compiled graph, build_graph() or "
        "build_graph(model)",
        takes=frozenset({"--input", "--model-script", "--thread", "--answers"}),
        requires=frozenset({"--input"}),
        child_module="sim.targets.langgraph.app",
        state_module="sim.targets.langgraph.app_state",
    )
    demo_point_s = 2.5


TARGET = LangGraphTarget()
