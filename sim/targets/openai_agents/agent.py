"""The OpenAI Agents SDK agent under test, its crash boundaries, and the caller's restart.

Imports the SDK at module level: import this module only in a child process or when reading a
point's state (``sim.targets.openai_agents`` does, lazily).

Determinism: the session id and the run id are fixed, and the scripted model derives each tool
call id from the process and its own call count (``call_p1_1``), as a real model mints a new id
for every response: a call the durable state recorded keeps its id on resume, a call the model
is asked for again gets a new one. Tracing is disabled before anything runs, so no exporter
ever tries the network.

The restart is what the SDK's docs give a caller (see the package docstring): the same
``SQLiteSession`` again (``session``), or the saved ``RunState`` loaded with
``RunState.from_string`` and resumed by ``Runner.run(agent, state)`` (``run_state``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, RunResult, RunState, SQLiteSession, set_tracing_disabled
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.testing import assistant_message, function_call
from agents.tool import Tool, function_tool
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses.response_prompt_param import ResponsePromptParam

from sim.targets.boundaries import Boundaries, wrap_async_method
from sim.targets.protocol import (
    PAYMENT_ANSWER,
    PAYMENT_SCRIPT,
    PAYMENT_USER_INPUT,
    ChildContext,
)

DB_NAME = "session.sqlite"
STATE_NAME = "run_state.json"
RUN_ID = "pay-INV-42"  # the session id, and the caller's name for its saved RunState
AGENT_NAME = "payer"
USER_INPUT, SCRIPT, ANSWER = PAYMENT_USER_INPUT, PAYMENT_SCRIPT, PAYMENT_ANSWER

# The child's context, set before the agent runs: the tools reach the point's ledger through it.
_CTX: ChildContext | None = None


class ScriptedModel(Model):
    """A ``Model`` of the SDK's interface whose turn depends on the input it is given: the number
    of tool outputs since the user's last message picks the next call (charge, then email, then
    the answer), so a resumed run gets the turn a real model would give it. Each call crosses
    ``model.call#n``: its ``after`` instant is the response returned to the runner."""

    def __init__(self, process: str, boundaries: Boundaries | None) -> None:
        self.process = process
        self.boundaries = boundaries
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        del system_instructions, model_settings, tools, output_schema, handoffs, tracing
        del previous_response_id, conversation_id, prompt
        if self.boundaries is None:
            raise RuntimeError("a reader's agent is never run")
        items: list[str | TResponseInputItem] = [input] if isinstance(input, str) else list(input)
        label = self.boundaries.numbered("model.call")
        self.boundaries.before(label, what=f"{len(items)} item(s) in")
        self.calls += 1
        done = 0
        for item in items:
            if isinstance(item, str) or item.get("role") == "user":
                done = 0
            elif item.get("type") == "function_call_output":
                done += 1
        if done < len(SCRIPT):
            name, args = SCRIPT[done]
            call_id = f"call_{self.process}_{self.calls}"
            output = [function_call(name, dict(args), call_id=call_id)]
        else:
            output = [assistant_message(ANSWER, item_id=f"msg_{self.process}_{self.calls}")]
        self.boundaries.after(label)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Never called: the caller uses ``Runner.run``, which asks for whole responses. A
        streamed run would bypass the script, so it is refused rather than faked."""
        nothing: tuple[TResponseStreamEvent, ...] = ()
        for event in nothing:  # an async generator, as the interface expects, with no events
            yield event
        raise NotImplementedError("the openai-agents target runs Runner.run, never streamed")


def effect_key(ctx: ToolContext[None], tool: str) -> str | None:
    """The idempotency key a variant sends: ``call_id`` the run id and the tool call id (stable
    only for a call the durable state recorded), ``idempotent`` the run id, the tool and its
    canonical arguments (what the re-asked model repeats)."""
    if _CTX is None or _CTX.options.variant == "as_is":
        return None
    if _CTX.options.variant == "call_id":
        return f"{RUN_ID}:{ctx.tool_call_id}"
    args = json.dumps(json.loads(ctx.tool_arguments or "{}"), sort_keys=True)
    return f"{RUN_ID}:{tool}:{args}"


def _apply(ctx: ToolContext[None], service: str, op: str, tool: str, detail: str) -> None:
    """A tool's effect on the ledger, with the variant's key (``ChildContext.effect`` would
    drop any key but the ``idempotent`` variant's, so the ledger is called directly)."""
    if _CTX is None:
        raise RuntimeError("the agent's tools run only inside a target child")
    _CTX.ledger.effect(
        _CTX.boundaries,
        service=service,
        op=op,
        tool=tool,
        call_id=ctx.tool_call_id,
        key=effect_key(ctx, tool),
        process=_CTX.process,
        detail=detail,
    )


async def charge_card(ctx: ToolContext[None], invoice: str, amount_eur: int) -> str:
    """Charge the customer's card for an invoice."""
    _apply(ctx, "payments", "charge", "charge_card", f"{invoice} {amount_eur} EUR")
    return f"charged {amount_eur} EUR for {invoice}"


async def send_receipt(ctx: ToolContext[None], to: str, invoice: str) -> str:
    """Email the receipt of an invoice."""
    _apply(ctx, "outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


def build_agent(process: str, boundaries: Boundaries | None, *, approval: bool) -> Agent[None]:
    """The agent as a user writes it; ``approval``: the charge needs a human's approval
    (``needs_approval=True``, the ``run_state`` mode's interruption). Without ``boundaries``:
    a reader's agent, which loads a saved state and never runs."""
    tools: list[Tool] = [
        function_tool(charge_card, needs_approval=approval),
        function_tool(send_receipt),
    ]
    return Agent(
        name=AGENT_NAME,
        instructions="Pay the invoice the user names, then email its receipt.",
        model=ScriptedModel(process, boundaries),
        tools=tools,
    )


def _describe_add(self: object, items: list[object], *args: object, **kwargs: object) -> str:
    del self, args, kwargs
    kinds = [str(i.get("type") or i.get("role")) for i in items if isinstance(i, dict)]
    calls = [str(i["call_id"]) for i in items if isinstance(i, dict) and "call_id" in i]
    return " ".join(kinds) + (f" ({', '.join(dict.fromkeys(calls))})" if calls else "")


def run_child(ctx: ChildContext) -> str:
    """Start the conversation, or re-enter it from the durable state the caller kept."""
    global _CTX
    _CTX = ctx
    set_tracing_disabled(True)
    run_state = ctx.options.durability == "run_state"
    agent = build_agent(ctx.process, ctx.boundaries, approval=run_state)
    if run_state:
        return asyncio.run(_run_with_state(ctx, agent))
    wrap_async_method(
        SQLiteSession, "add_items", ctx.boundaries, "session.add_items", _describe_add
    )
    return asyncio.run(_run_with_session(ctx, agent))


async def _run_with_session(ctx: ChildContext, agent: Agent[None]) -> str:
    """An empty session: the user's request. An answered one: nothing. Otherwise the turn was
    cut short: ``continue`` runs the agent on the session with no new input, ``resend``
    repeats the request."""
    session = SQLiteSession(RUN_ID, str(ctx.point_dir / DB_NAME))
    try:
        items: list[Any] = list(await session.get_items())
        given: str | list[TResponseInputItem] = USER_INPUT
        action = "start"
        if items:
            last = items[-1]
            if isinstance(last, dict) and last.get("role") == "assistant":
                return "none"
            ctx.boundaries.note(
                what="resume_state",
                next=[str(last.get("type") or last.get("role")) if isinstance(last, dict) else "?"],
                tasks=[],
                saved=[str(i["call_id"]) for i in items if i.get("type") == "function_call_output"],
            )
            action = "resume"
            if ctx.options.resume != "resend":
                given = []
        await Runner.run(agent, given, session=session)
    finally:
        session.close()
    return action


def _save(ctx: ChildContext, result: RunResult) -> RunState[None]:
    """The caller persists the run's state (a temporary file, then ``os.replace``: a reader
    sees the old file or the new one, never half of one)."""
    state = result.to_state()
    path = ctx.point_dir / STATE_NAME
    text = state.to_string()

    def write() -> None:
        temporary = path.with_suffix(".tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)

    pending = [i.tool_name or "?" for i in result.interruptions]
    what = f"interrupted: approve {', '.join(pending)}" if pending else "final"
    ctx.boundaries.crossing(ctx.boundaries.numbered("caller.save_state"), write, what=what)
    return state


async def _run_with_state(ctx: ChildContext, agent: Agent[None]) -> str:
    """No saved state: run the request, save the interruption. A saved state: load it; a final
    one is over, an interrupted one is approved and resumed; every result is saved."""
    path = ctx.point_dir / STATE_NAME
    if path.exists():
        text = path.read_text(encoding="utf-8")
        state: RunState[None] = await RunState.from_string(agent, text)
        interruptions = state.get_interruptions()
        if not interruptions:
            return "none"
        ctx.boundaries.note(
            what="resume_state",
            next=[f"approve {i.tool_name}" for i in interruptions],
            tasks=[],
            saved=sorted(json.loads(text)["context"].get("tool_invocations", {})),
        )
        action = "resume"
    else:
        result = await Runner.run(agent, USER_INPUT)
        state = _save(ctx, result)
        action = "start"
        if not result.interruptions:
            return action
    while True:
        for item in state.get_interruptions():
            state.approve(item)  # the human's decision, scripted: approve the charge
        result = await Runner.run(agent, state)
        state = _save(ctx, result)
        if not result.interruptions:
            return action
