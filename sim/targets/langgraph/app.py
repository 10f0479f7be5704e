"""A user's own LangGraph graph (``--app FILE.py:FACTORY``), crash-tested as the bundled agent is.

The factory is the user's code, unmodified: called with the scripted chat model (``factory(model)``;
a factory that takes no argument builds a graph without one), it returns a ``StateGraph`` (the
harness compiles it with the chosen checkpointer) or a compiled graph (whose checkpointer the
harness sets). The model's turns come from ``--model-script``: the n-th call in a conversation
gets the n-th turn (n counted from the AI messages already in it, so a resumed run gets the turn
a real model would), each tool call with an id of the process and its own call count, as a
model re-asked after a crash issues new ids. The effect functions (``--effect``) are the app's
clients of outside services, landed on the ledger wherever the app calls them.

Crash boundaries: each model call (``model.call#n``), each effect (``effect:app.NAME#NAME-n``),
and the checkpointer's ``put``/``put_writes`` (``saver.put#n``, ``saver.put_writes#n``). The last
process writes what the thread's state holds into the trace (``sim.targets.langgraph.app_state``
reads it there: the parent never imports the user's code).

Imports langgraph at module level: import this module only in a child process.
"""

from __future__ import annotations

import inspect
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from sim.targets.boundaries import Boundaries
from sim.targets.kit.landing import wrap_tool_calls
from sim.targets.kit.loading import load_app
from sim.targets.langgraph.agent import ScriptedChatModel, _message_row, run_graph
from sim.targets.langgraph.app_state import STATE_NOTE
from sim.targets.protocol import ChildContext, TargetOptions


class ScriptModel(ScriptedChatModel):
    """A chat model that answers from the user's script (no network); see the module docstring."""

    script: list[dict[str, Any]]
    _boundaries: Boundaries | None = PrivateAttr(default=None)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        del tools, kwargs  # the script names the tools it calls
        return self

    def _turn(self, messages: list[BaseMessage], suffix: str) -> AIMessage:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        if turn >= len(self.script):
            raise RuntimeError(f"the model script has {len(self.script)} turns; turn {turn + 1}")
        step = self.script[turn]
        calls = [
            {"name": c["name"], "args": c.get("args", {}), "id": f"call_{suffix}_{i}"}
            for i, c in enumerate(step.get("tool_calls", []))
        ]
        boundaries = self._boundaries
        if boundaries is not None:
            boundaries.crossing(boundaries.numbered("model.call"), lambda: None, turn=turn)
        return AIMessage(
            content=str(step.get("content", "")),
            id=f"ai_{suffix}",
            tool_calls=[{**c, "type": "tool_call"} for c in calls],
        )


def _graph(ctx: ChildContext, saver: Any) -> Any:
    _, factory = load_app(ctx)
    wrap_tool_calls(ctx, BaseTool, "invoke", "ainvoke")
    app = ctx.options.app
    assert app is not None, "an app child runs only with --app"
    model = ScriptModel(script=app.turns(), process=ctx.process)
    model._boundaries = ctx.boundaries
    build: Any = factory
    graph = build(model) if inspect.signature(build).parameters else build()
    if hasattr(graph, "compile"):
        return graph.compile(checkpointer=saver)
    graph.checkpointer = saver
    return graph


def _first_input(options: TargetOptions) -> Any:
    assert options.app is not None and options.app.input is not None, "checked by the kit"
    given = options.app.input.value
    if isinstance(given, str):
        return {"messages": [HumanMessage(content=given, id="user-1")]}
    return given


def run_child(ctx: ChildContext) -> str:
    """Start or resume the user's graph on the chosen checkpointer, to its end; then note the
    thread's state for the judge."""
    return run_graph(
        ctx, lambda saver: _graph(ctx, saver), lambda: _first_input(ctx.options), _note_state
    )


def _note_state(ctx: ChildContext, snapshot: Any) -> None:
    messages = list(snapshot.values.get("messages", [])) if snapshot.values else []
    last = messages[-1] if messages else None
    answer = None
    if isinstance(last, AIMessage) and not last.tool_calls:
        answer = str(last.content)
    ctx.boundaries.note(
        what=STATE_NOTE,
        history=[_message_row(m) for m in messages],
        inputs=[str(m.content) for m in messages if isinstance(m, HumanMessage)],
        pending=[t.name for t in snapshot.tasks],
        next=list(snapshot.next),
        answer=answer,
        results=_tool_results(messages),
    )


def _tool_results(messages: list[BaseMessage]) -> dict[str, list[str]]:
    """Each tool's results in the thread's history: the call ids of its tool messages."""
    results: dict[str, list[str]] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            results.setdefault(str(message.name), []).append(str(message.tool_call_id))
    return results
