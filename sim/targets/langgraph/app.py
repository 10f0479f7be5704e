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

import asyncio
import inspect
import json
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import PrivateAttr

from sim.targets.boundaries import Boundaries
from sim.targets.langgraph.agent import (
    CHECKPOINTS_NAME,
    _config,
    _decide,
    _message_row,
    wrap_savers,
)
from sim.targets.langgraph.app_state import STATE_NOTE
from sim.targets.protocol import ChildContext, TargetOptions
from sim.targets.python_app.loading import load_app, wrap_effects


class ScriptModel(BaseChatModel):
    """A chat model that answers from the user's script (no network); see the module docstring."""

    script: list[dict[str, Any]]
    process: str = "p0"
    _calls: int = PrivateAttr(default=0)
    _boundaries: Boundaries | None = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return "durable-sim-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        del tools, kwargs  # the script names the tools it calls
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        del stop, run_manager, kwargs
        self._calls += 1
        turn = sum(isinstance(m, AIMessage) for m in messages)
        if turn >= len(self.script):
            raise RuntimeError(f"the model script has {len(self.script)} turns; turn {turn + 1}")
        step = self.script[turn]
        suffix = f"{self.process}_{self._calls}"
        calls = [
            {"name": c["name"], "args": c.get("args", {}), "id": f"call_{suffix}_{i}"}
            for i, c in enumerate(step.get("tool_calls", []))
        ]
        message = AIMessage(
            content=str(step.get("content", "")),
            id=f"ai_{suffix}",
            tool_calls=[{**c, "type": "tool_call"} for c in calls],
        )
        boundaries = self._boundaries
        if boundaries is not None:
            boundaries.crossing(boundaries.numbered("model.call"), lambda: None, turn=turn)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _graph(ctx: ChildContext, saver: Any) -> Any:
    module, factory = load_app(ctx.options.app)
    wrap_effects(ctx, module)
    script = json.loads(Path(ctx.options.model_script).read_text(encoding="utf-8"))
    model = ScriptModel(script=script, process=ctx.process)
    model._boundaries = ctx.boundaries
    build: Any = factory
    graph = build(model) if inspect.signature(build).parameters else build()
    if hasattr(graph, "compile"):
        return graph.compile(checkpointer=saver)
    graph.checkpointer = saver
    return graph


def _first_input(options: TargetOptions) -> Any:
    given = json.loads(Path(options.app_input).read_text(encoding="utf-8"))
    if isinstance(given, str):
        return {"messages": [HumanMessage(content=given, id="user-1")]}
    return given


def run_child(ctx: ChildContext) -> str:
    """Start or resume the user's graph on the chosen checkpointer, to its end; then note the
    thread's state for the judge."""
    wrap_savers(ctx.boundaries)
    path = ctx.point_dir / CHECKPOINTS_NAME
    if ctx.options.saver == "aiosqlite":
        return asyncio.run(_run_async(ctx, str(path)))
    graph = _graph(ctx, SqliteSaver(sqlite3.connect(str(path), check_same_thread=False)))
    action = _decide(ctx, graph.get_state(_config()))
    if action != "none":
        first = _first_input(ctx.options) if action == "start" else None
        graph.invoke(first, _config(), durability=ctx.options.durability)
    _note_state(ctx, graph.get_state(_config()))
    return action


async def _run_async(ctx: ChildContext, path: str) -> str:
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        graph = _graph(ctx, saver)
        action = _decide(ctx, await graph.aget_state(_config()))
        if action != "none":
            first = _first_input(ctx.options) if action == "start" else None
            await graph.ainvoke(first, _config(), durability=ctx.options.durability)
        _note_state(ctx, await graph.aget_state(_config()))
        return action


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
    )
