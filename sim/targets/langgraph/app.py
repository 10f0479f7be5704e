"""A user's own LangGraph graph (``--app FILE.py:FACTORY``), crash-tested as the bundled agent is.

Any graph: a chat loop over ``messages`` or a workflow over a state of its own (a ``TypedDict``
without messages, no model, its services in another module). The factory is the user's code,
unmodified: a factory with a required parameter gets the scripted chat model (``factory(model)``;
one whose parameters are optional gets it only with ``--model-script``), a factory without one
builds its graph without the harness's model. It returns a ``StateGraph`` (the harness compiles
it with the chosen checkpointer) or a compiled graph (whose checkpointer the harness sets). The
model's turns come from ``--model-script``: the n-th call in a conversation gets the n-th turn
(n counted from the AI messages already in it, so a resumed run gets the turn a real model
would), each tool call with an id of the process and its own call count, as a model re-asked
after a crash issues new ids; without a script, a call of the model is a one-line error. The
effect functions (``--effect``) are the app's clients of outside services, landed on the ledger
wherever the app calls them. ``--input`` is the graph's input (a JSON string: one human message
in ``messages``), ``--thread`` the thread id (default the bundled agent's ``THREAD_ID``).

Human in the loop: a thread that stops at an open ``interrupt()`` is resumed with
``Command(resume=VALUE)`` from ``--answers`` (``Human``); one that waits for an answer there is
none of ends the run unfinished.

Crash boundaries: each model call (``model.call#n``), each effect
(``effect:app.services:PAYMENTS.refund#PAYMENTS.refund-1``), and the checkpointer's
``put``/``put_writes`` (``saver.put#n``, ``saver.put_writes#n``). The last process writes what the
thread's state holds into the trace (``sim.targets.langgraph.app_state`` reads it there: the
parent never imports the user's code).

Imports langgraph at module level: import this module only in a child process.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, Interrupt, StateSnapshot
from pydantic import BaseModel, PrivateAttr

from sim.targets.boundaries import TRACE_NAME, Boundaries, notes_of, read_trace
from sim.targets.kit.declarations import AppError
from sim.targets.kit.landing import wrap_tool_calls
from sim.targets.kit.loading import load_app
from sim.targets.kit.scripted import scripted_turn
from sim.targets.langgraph.agent import (
    STOP,
    THREAD_ID,
    ScriptedChatModel,
    _message_row,
    run_graph,
)
from sim.targets.langgraph.app_state import ANSWERED_NOTE, STATE_NOTE
from sim.targets.protocol import ChildContext, TargetOptions
from sim.targets.shapes import Json, as_int

#: The error of a model call without a script: the graph needs ``--model-script``.
NO_SCRIPT = "the graph called the model but no --model-script was given"


class ScriptModel(ScriptedChatModel):
    """A chat model that answers from the user's script (no network); see the module docstring.
    ``scripted`` False: no ``--model-script`` was given, and a call is the user's error."""

    script: list[dict[str, Any]]
    scripted: bool = True
    _boundaries: Boundaries | None = PrivateAttr(default=None)

    def bind_tools(self, tools: object, **kwargs: object) -> ScriptModel:
        del tools, kwargs  # the script names the tools it calls
        return self

    def _turn(self, messages: list[BaseMessage], suffix: str) -> AIMessage:
        if not self.scripted:
            raise AppError(NO_SCRIPT)
        turn = sum(isinstance(m, AIMessage) for m in messages)
        text, calls = scripted_turn(self.script, turn, None)
        boundaries = self._boundaries
        if boundaries is not None:
            boundaries.crossing(boundaries.numbered("model.call"), lambda: None, turn=turn)
        return AIMessage(
            content=text,
            id=f"ai_{suffix}",
            tool_calls=[
                {"name": c.name, "args": c.args, "id": f"call_{suffix}_{i}", "type": "tool_call"}
                for i, c in enumerate(calls)
            ],
        )


def _wants_model(factory: Callable[..., object], scripted: bool) -> bool:
    """Whether the factory is given the scripted model: it must take one (a required
    positional parameter), or may (an optional one) and a script was given. A factory that
    builds a workflow without a model is called with nothing."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature: give it nothing
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = any(p.default is p.empty for p in positional)
    return required or (bool(positional) and scripted)


def _graph(ctx: ChildContext, saver: BaseCheckpointSaver[str]) -> Any:
    _, factory = load_app(ctx)
    wrap_tool_calls(ctx, BaseTool, "invoke", "ainvoke")
    app = ctx.options.app
    assert app is not None, "an app child runs only with --app"
    scripted = app.model_script is not None
    model = ScriptModel(script=app.turns(), scripted=scripted, process=ctx.process)
    model._boundaries = ctx.boundaries
    build: Any = factory
    graph = build(model) if _wants_model(factory, scripted) else build()
    if hasattr(graph, "compile"):
        return graph.compile(checkpointer=saver)
    graph.checkpointer = saver
    return graph


def _first_input(options: TargetOptions) -> object:
    assert options.app is not None and options.app.input is not None, "checked by the kit"
    given = options.app.input.value
    if isinstance(given, str):
        return {"messages": [HumanMessage(content=given, id="user-1")]}
    return given


def _config(options: TargetOptions) -> RunnableConfig:
    assert options.app is not None, "an app child runs only with --app"
    return {"configurable": {"thread_id": options.app.thread or THREAD_ID}}


def run_child(ctx: ChildContext) -> str:
    """Start or resume the user's graph on the chosen checkpointer, answering its interrupts
    (``Human``), to its end; then note the thread's state for the judge.

    An ``AppError`` out of a node is raised again bare: LangGraph adds a note naming the task
    (and its time-based id) to an exception it passes on, and the child reports an exception's
    last line, which would be that note instead of the error (``sim.targets.child``)."""
    try:
        return run_graph(
            ctx,
            lambda saver: _graph(ctx, saver),
            lambda: _first_input(ctx.options),
            _note_state,
            config=_config(ctx.options),
            follow=Human(ctx).follow,
        )
    except AppError as exc:
        raise AppError(str(exc)) from None


def open_interrupts(snapshot: StateSnapshot) -> list[Interrupt]:
    """The thread's interrupts waiting for an answer, each once, in the tasks' order."""
    found: dict[str, Interrupt] = {}
    for task in snapshot.tasks:
        for interrupt in task.interrupts:
            found.setdefault(interrupt.id, interrupt)
    return list(found.values())


class Human:
    """The person who answers the graph's ``interrupt()``s, from ``--answers``: the k-th distinct
    interrupt (by its id, which LangGraph derives from the task's checkpoint and so keeps across
    a restart) gets the k-th value.

    Which interrupt got which k is noted in the point's trace before the answer is sent, and
    every later process of the point reads it back: a person who approved a refund approves it
    again when the app, restarted after a crash, asks again -- and the next, different question
    gets the next answer, not the first one again. An interrupt with no answer left ends the
    run unfinished (the judge's I7 says so)."""

    def __init__(self, ctx: ChildContext) -> None:
        app = ctx.options.app
        assert app is not None, "an app child runs only with --app"
        values = [] if app.answers is None else app.answers.value
        assert isinstance(values, list), "checked by the kit"
        self._ctx = ctx
        self._values = values
        rows = read_trace(ctx.point_dir / TRACE_NAME)
        self._given = {str(n["interrupt"]): as_int(n["k"]) for n in notes_of(rows, ANSWERED_NOTE)}

    def follow(self, snapshot: StateSnapshot) -> object:
        """What to send the thread next (``sim.targets.langgraph.agent.run_graph``): the answers
        to its open interrupts that have one; ``None`` (continue) for a thread with work left
        and nothing waiting; else ``STOP``, finished or waiting for an answer there is none of."""
        waiting = open_interrupts(snapshot)
        if not waiting:
            return None if snapshot.next or snapshot.tasks else STOP
        answers: dict[str, Json] = {}
        for interrupt in waiting:
            k = self._given.get(interrupt.id)
            if k is None:
                k = len(self._given)
                if k >= len(self._values):
                    continue
                self._given[interrupt.id] = k
            self._ctx.boundaries.note(what=ANSWERED_NOTE, interrupt=interrupt.id, k=k)
            answers[interrupt.id] = self._values[k]
        if not answers:
            return STOP
        if len(waiting) == 1:
            return Command(resume=answers[waiting[0].id])
        return Command(resume=answers)  # several waiting: LangGraph needs them by id


def canonical(value: object) -> str:
    """``value`` as canonical JSON, the form the judge compares with the fault-free run's: keys
    sorted, a message as its history row (no ids), a pydantic model as its fields, anything
    else JSON cannot hold as its ``repr``."""
    return json.dumps(value, sort_keys=True, default=_plain)


def _plain(value: object) -> object:
    if isinstance(value, BaseMessage):
        return _message_row(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return repr(value)


def _note_state(ctx: ChildContext, snapshot: StateSnapshot) -> None:
    """The thread's state, noted for the judge (``sim.targets.langgraph.app_state``). A chat
    graph (``messages`` holds messages) is judged on its messages, its human inputs and the
    model's answer; any other graph on its values, one canonical JSON row per key, its input
    and its final values as the answer. Finished: the thread has a checkpoint, and nothing
    next, no task with saved or pending writes, no interrupt waiting."""
    values = _values(snapshot.values)
    messages = values.get("messages")
    waiting = open_interrupts(snapshot)
    pending = [
        f"{t.name} (waits at interrupt(): {canonical([i.value for i in t.interrupts])})"
        if t.interrupts
        else t.name
        for t in snapshot.tasks
    ]
    note: dict[str, object] = {
        "finished": snapshot.metadata is not None
        and not (snapshot.next or snapshot.tasks or waiting),
        "pending": pending,
        "next": list(snapshot.next),
    }
    if isinstance(messages, list) and all(isinstance(m, BaseMessage) for m in messages):
        last = messages[-1] if messages else None
        chat = isinstance(last, AIMessage) and not last.tool_calls
        note |= {
            "history": [_message_row(m) for m in messages] + _rows(values, skip="messages"),
            "inputs": [str(m.content) for m in messages if isinstance(m, HumanMessage)],
            "answer": str(last.content) if chat and last is not None else None,
            "results": _tool_results(messages),
        }
    else:
        given = ctx.options.app.input.value if ctx.options.app and ctx.options.app.input else None
        note |= {
            "history": _rows(values),
            "inputs": [canonical(given)] if values else [],
            "answer": canonical(values) if values else None,
            "results": {},
        }
    ctx.boundaries.note(what=STATE_NOTE, **note)


def _values(values: object) -> dict[str, object]:
    """A snapshot's values by key: a ``StateGraph``'s are a dict; a graph of LangGraph's
    functional API may hold one value of any kind, its one row."""
    if isinstance(values, dict):
        return values
    return {} if values is None else {"value": values}


def _rows(values: dict[str, object], skip: str = "") -> list[str]:
    """One comparable row per top-level key of the state (but ``skip``), in key order."""
    return [f"{key}: {canonical(values[key])}" for key in sorted(values) if key != skip]


def _tool_results(messages: list[BaseMessage]) -> dict[str, list[str]]:
    """Each tool's results in the thread's history: the call ids of its tool messages."""
    results: dict[str, list[str]] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            results.setdefault(str(message.name), []).append(str(message.tool_call_id))
    return results
