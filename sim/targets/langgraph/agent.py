"""The LangGraph agent under test, its crash boundaries, and the reader of its durable state.

Imports langgraph at module level: import this module only in a child process or when reading a
point's state (``sim.targets.langgraph`` does, lazily).

Determinism: the thread id is fixed, the scripted model derives each tool call id from the
process and its own call count (``call_p1_1``: a model re-asked after a crash issues a *new*
id, as a real model does), and nothing that decides the trace reads the clock. LangGraph's own
checkpoint ids are time-based uuids; they never enter a label.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import StateSnapshot
from pydantic import PrivateAttr

from sim.targets.boundaries import Boundaries, wrap_async_method, wrap_method
from sim.targets.protocol import ChildContext, TargetOptions, TargetState

CHECKPOINTS_NAME = "checkpoints.sqlite"
THREAD_ID = "thread-1"
USER_INPUT = "Please pay invoice INV-42 (42 EUR) and email the receipt to ada@example.com."
ANSWER = "Paid invoice INV-42 (42 EUR) and emailed the receipt to ada@example.com."


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script instead of the network: the number of tool
    results since the user's last message decides the next turn (charge, then email, then the
    answer), so a resumed run gets the turn a real model would give it."""

    process: str = "p0"
    _calls: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: object,
    ) -> ChatResult:
        del stop, run_manager, kwargs
        self._calls += 1
        message = self._turn(messages, f"{self.process}_{self._calls}")
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _turn(self, messages: list[BaseMessage], suffix: str) -> AIMessage:
        """The next turn; ``suffix`` (process and call count) makes its ids."""
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        done = sum(isinstance(m, ToolMessage) for m in messages[last_user:])
        calls = [
            ("charge_card", {"invoice": "INV-42", "amount_eur": 42}),
            ("send_receipt", {"to": "ada@example.com", "invoice": "INV-42"}),
        ]
        if done < len(calls):
            name, args = calls[done]
            message = AIMessage(
                content="",
                id=f"ai_{suffix}",
                tool_calls=[
                    {"name": name, "args": args, "id": f"call_{suffix}", "type": "tool_call"}
                ],
            )
        else:
            message = AIMessage(content=ANSWER, id=f"ai_{suffix}")
        return message


def _key(config: RunnableConfig, tool_call_id: str) -> str:
    """The idempotency key of the fixed variant: the thread and the tool call, so a re-run of the
    same call is recognised by the service, and a different call is not."""
    return f"{config['configurable']['thread_id']}:{tool_call_id}"


def make_tools(ctx: ChildContext | None) -> list[BaseTool]:
    """The agent's tools, acting on the point's ledger (``ctx`` None: tools that refuse to run,
    for building the graph only to read its state)."""

    def effect(
        service: str, op: str, name: str, call_id: str, key: str | None, detail: str
    ) -> None:
        if ctx is None:
            raise RuntimeError("tools of a state reader cannot run")
        ctx.effect(service=service, op=op, tool=name, call_id=call_id, key=key, detail=detail)

    @tool
    def charge_card(
        invoice: str,
        amount_eur: int,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Charge the customer's card for an invoice."""
        detail = f"{invoice} {amount_eur} EUR"
        effect(
            "payments", "charge", "charge_card", tool_call_id, _key(config, tool_call_id), detail
        )
        return f"charged {amount_eur} EUR for {invoice}"

    @tool
    def send_receipt(
        to: str,
        invoice: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Email the receipt of an invoice."""
        detail = f"receipt {invoice} to {to}"
        effect("outbox", "send", "send_receipt", tool_call_id, _key(config, tool_call_id), detail)
        return f"receipt for {invoice} sent to {to}"

    return [charge_card, send_receipt]


def build_graph(
    saver: BaseCheckpointSaver[str], ctx: ChildContext | None
) -> CompiledStateGraph[MessagesState, None, MessagesState, MessagesState]:
    """The agent graph: agent -> (tools -> agent)* -> end, checkpointed by ``saver``."""
    model = ScriptedChatModel(process=ctx.process if ctx else "p0")
    boundaries = ctx.boundaries if ctx else None

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        def call() -> dict[str, list[BaseMessage]]:
            return {"messages": [model.invoke(state["messages"])]}

        if boundaries is None:
            return call()
        return boundaries.crossing(boundaries.numbered("node:agent"), call)

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(make_tools(ctx)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def _describe_put(
    self: object,
    config: object,
    checkpoint: object,
    metadata: Mapping[str, object],
    *args: object,
    **kw: object,
) -> str:
    del self, config, checkpoint, args, kw
    return f"checkpoint step {metadata.get('step')} ({metadata.get('source')})"


def _describe_writes(
    self: object, config: object, writes: Sequence[tuple[str, object]], *args: object, **kw: object
) -> str:
    del self, config, args, kw
    shown: list[str] = []
    for channel, value in writes:
        items = value if isinstance(value, list) else [value]
        kinds = [_message_row(m) for m in items if isinstance(m, BaseMessage)]
        shown.append(f"{channel}: {', '.join(kinds)}" if kinds else str(channel))
    return "writes " + "; ".join(shown)


def wrap_savers(boundaries: Boundaries) -> None:
    """Both checkpointers' two writes become boundaries, with the same labels (so traces of
    the two savers compare), in this child process only."""
    wrap_method(SqliteSaver, "put", boundaries, "saver.put", _describe_put)
    wrap_method(SqliteSaver, "put_writes", boundaries, "saver.put_writes", _describe_writes)
    wrap_async_method(AsyncSqliteSaver, "aput", boundaries, "saver.put", _describe_put)
    wrap_async_method(
        AsyncSqliteSaver, "aput_writes", boundaries, "saver.put_writes", _describe_writes
    )


def _config() -> RunnableConfig:
    return {"configurable": {"thread_id": THREAD_ID}}


def _first_input() -> dict[str, list[BaseMessage]]:
    return {"messages": [HumanMessage(content=USER_INPUT, id="user-1")]}


def _decide(ctx: ChildContext, snapshot: StateSnapshot) -> str:
    """What a restarted service does with the thread: ``start`` it if it has no checkpoint,
    ``resume`` it if work is left, else ``none``.

    "Work left" is the restart rule under test (``options.resume``). ``tasks``: any task of the
    latest checkpoint, with or without saved writes. ``next``: only what ``snapshot.next``
    names -- and LangGraph leaves out of ``next`` a task whose writes ``put_writes`` saved before
    the kill, so that rule abandons a run killed between ``put_writes`` and ``put``. What the
    state looked like is noted in the trace either way (the judge's I7 witness)."""
    if not snapshot.values:
        return "start"
    saved = [t.name for t in snapshot.tasks if t.result is not None]
    ctx.boundaries.note(
        what="resume_state",
        next=list(snapshot.next),
        tasks=[t.name for t in snapshot.tasks],
        saved=saved,
    )
    left = snapshot.next if ctx.options.resume == "next" else snapshot.tasks
    return "resume" if left else "none"


def run_child(ctx: ChildContext) -> str:
    """Start or resume the run (see ``_decide``) on the chosen checkpointer, to its end."""
    return run_graph(ctx, lambda saver: build_graph(saver, ctx), _first_input)


#: The graph on a checkpointer: the bundled agent's, or whatever graph a user's factory built
#: (a compiled ``StateGraph``, a functional-API ``Pregel``), which no one type covers.
Build = Callable[[BaseCheckpointSaver[str]], Any]
Noted = Callable[[ChildContext, StateSnapshot], None]
#: What to send the thread next, given its state (``STOP``: nothing, this process is done).
Follow = Callable[[StateSnapshot], object]
#: ``Follow``'s "nothing more": ``None`` is an input of its own (continue the thread).
STOP: object = object()


def run_graph(
    ctx: ChildContext,
    build: Build,
    first_input: Callable[[], object],
    noted: Noted | None = None,
    *,
    config: RunnableConfig | None = None,
    follow: Follow | None = None,
) -> str:
    """Build the graph on the chosen checkpointer, start or resume it (``_decide``) to its end,
    then hand ``noted`` the thread's state (the ``--app`` mode notes it for the judge).

    ``config`` names the thread (default ``THREAD_ID``). ``follow`` says what to send a
    resumed thread and, after each run that returned, what to send next: the ``--app`` mode
    answers an open ``interrupt()`` there, as a human would (``sim.targets.langgraph.app``).
    Without it a resume sends ``None`` (continue) and one run is all, the bundled agent's
    loop."""
    wrap_savers(ctx.boundaries)
    config = config or _config()
    path = ctx.point_dir / CHECKPOINTS_NAME
    if ctx.options.saver == "aiosqlite":
        return asyncio.run(_run_async(ctx, str(path), build, first_input, noted, config, follow))
    graph = build(SqliteSaver(sqlite3.connect(str(path), check_same_thread=False)))
    snapshot = graph.get_state(config)
    action = _decide(ctx, snapshot)
    payload = _opening(action, first_input, follow, snapshot)
    while payload is not STOP:
        graph.invoke(payload, config, durability=ctx.options.durability)
        payload = STOP if follow is None else follow(graph.get_state(config))
    if noted is not None:
        noted(ctx, graph.get_state(config))
    return action


def _opening(
    action: str, first_input: Callable[[], object], follow: Follow | None, snapshot: StateSnapshot
) -> object:
    """The first thing this process sends the thread (``_decide``'s ``action``): the input of
    a new run, ``follow``'s choice (or ``None``, continue) for a resumed one, or ``STOP``."""
    if action == "none":
        return STOP
    if action == "start":
        return first_input()
    return None if follow is None else follow(snapshot)


async def _run_async(
    ctx: ChildContext,
    path: str,
    build: Build,
    first_input: Callable[[], object],
    noted: Noted | None,
    config: RunnableConfig,
    follow: Follow | None,
) -> str:
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        graph = build(saver)
        snapshot = await graph.aget_state(config)
        action = _decide(ctx, snapshot)
        payload = _opening(action, first_input, follow, snapshot)
        while payload is not STOP:
            await graph.ainvoke(payload, config, durability=ctx.options.durability)
            payload = STOP if follow is None else follow(await graph.aget_state(config))
        if noted is not None:
            noted(ctx, await graph.aget_state(config))
        return action


def _message_row(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return f"human: {message.content}"
    if isinstance(message, ToolMessage):
        return f"tool {message.name}: {message.content}"
    if isinstance(message, AIMessage) and message.tool_calls:
        return "ai: calls " + ", ".join(c["name"] for c in message.tool_calls)
    return f"ai: {message.content}"


async def _snapshot_async(path: Path) -> StateSnapshot:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        return await build_graph(saver, None).aget_state(_config())


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The thread's state as a fresh process sees it through ``get_state`` (``aget_state`` on
    the async saver).

    Finished means the graph has nothing left to run: no task without saved writes, and the
    last message is the model's answer (``tools_condition`` routes that to the end). A run
    whose final writes were saved but whose last checkpoint was not is finished by that rule:
    everything it would still do is bookkeeping."""
    path = point_dir / CHECKPOINTS_NAME
    if not path.exists():
        return TargetState()
    if options.saver == "aiosqlite":
        snapshot = asyncio.run(_snapshot_async(path))
    else:
        conn = sqlite3.connect(str(path), check_same_thread=False)
        try:
            snapshot = build_graph(SqliteSaver(conn), None).get_state(_config())
        finally:
            conn.close()
    if not snapshot.values:
        return TargetState()
    messages: list[BaseMessage] = list(snapshot.values.get("messages", []))
    state = TargetState(exists=True, pending=[t.name for t in snapshot.tasks])
    for m in messages:
        state.history.append(_message_row(m))
        if isinstance(m, HumanMessage):
            state.inputs.append(str(m.content))
        elif isinstance(m, ToolMessage):
            state.results.setdefault(str(m.name), []).append(m.tool_call_id)
        elif isinstance(m, AIMessage):
            for call in m.tool_calls:
                state.calls.setdefault(call["name"], []).append(str(call["id"]))
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and not last.tool_calls:
        state.answer = str(last.content)
    state.finished = not snapshot.next and state.answer is not None
    return state
