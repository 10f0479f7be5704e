"""The Google ADK agent under test, its crash boundaries, and the caller's restart.

Imports google.adk at module level: import this module only in a child process or a state
reader, both under the target's own environment (``sim.targets.adk``).

Determinism: the session id is fixed, and the scripted model derives each tool call id from the
process and its own call count (``call_p1_1``), as a real model mints a new id for every
response: a call the session recorded keeps its id on resume, a call the model is asked for
again gets a new one. ADK's own ids (invocation, event, confirmation) are random and never
reach the judge.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools import FunctionTool, ToolContext
from google.genai import types

from sim.targets.boundaries import Boundaries, wrap_async_method
from sim.targets.protocol import PAYMENT_ANSWER, PAYMENT_SCRIPT, PAYMENT_USER_INPUT, ChildContext

DB_NAME = "sessions.sqlite"
APP_NAME = "payments"
USER_ID = "ada"
SESSION_ID = "pay-INV-42"
CONFIRMATION = "adk_request_confirmation"  # ADK's function call asking the human

# The child's context, set before the agent runs: the tools reach the point's ledger through it.
_CTX: ChildContext | None = None


class ScriptedLlm(BaseLlm):
    """A ``BaseLlm`` whose turn depends on the request: the number of tool results since the
    user's last text picks the next call (charge, then receipt, then the answer), so a resumed
    run gets the turn a real model would. Each call crosses ``model.call#n``."""

    model: str = "scripted"
    process: str = "reader"
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del stream
        if _CTX is None:
            raise RuntimeError("a reader's agent is never run")
        label = _CTX.boundaries.numbered("model.call")
        _CTX.boundaries.before(label, what=f"{len(llm_request.contents)} content(s) in")
        self.calls += 1
        done = 0
        for content in llm_request.contents:
            for part in content.parts or []:
                if content.role == "user" and part.text:
                    done = 0
                elif part.function_response is not None:
                    done += 1
        if done < len(PAYMENT_SCRIPT):
            name, args = PAYMENT_SCRIPT[done]
            call = types.FunctionCall(name=name, args=dict(args), id=self._call_id())
            part = types.Part(function_call=call)
        else:
            part = types.Part(text=PAYMENT_ANSWER)
        _CTX.boundaries.after(label)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))

    def _call_id(self) -> str:
        return f"call_{self.process}_{self.calls}"


def _apply(context: ToolContext, service: str, op: str, tool: str, detail: str) -> None:
    """A tool's effect on the ledger; the ``idempotent`` variant keys it by the invocation id
    and the function call id, which the session keeps and a resumed invocation reuses."""
    if _CTX is None:
        raise RuntimeError("the agent's tools run only inside a target child")
    call_id = str(context.function_call_id)
    _CTX.effect(
        service=service,
        op=op,
        tool=tool,
        call_id=call_id,
        key=f"{context.invocation_id}:{call_id}",
        detail=detail,
    )


def charge_card(invoice: str, amount_eur: int, tool_context: ToolContext) -> str:
    """Charge the customer's card for an invoice."""
    _apply(tool_context, "payments", "charge", "charge_card", f"{invoice} {amount_eur} EUR")
    return f"charged {amount_eur} EUR for {invoice}"


def send_receipt(to: str, invoice: str, tool_context: ToolContext) -> str:
    """Email the receipt of an invoice."""
    _apply(tool_context, "outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


def build_app(process: str, *, approval: bool) -> App:
    """The app as a user writes it: resumable, the charge behind a human's approval when
    ``approval``."""
    charge = FunctionTool(charge_card, require_confirmation=approval)
    agent = LlmAgent(
        name="payer",
        model=ScriptedLlm(process=process),
        instruction="Pay the invoice the user names, then email its receipt.",
        tools=[charge, FunctionTool(send_receipt)],
    )
    return resumable_app(APP_NAME, agent)


def resumable_app(name: str, agent: BaseAgent) -> App:
    """``agent`` in a resumable ``App`` called ``name``, as ADK's resume docs have a caller make
    one (its ``ResumabilityConfig`` warns that it is experimental: silenced here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        resumable = ResumabilityConfig(is_resumable=True)
    return App(name=name, root_agent=agent, resumability_config=resumable)


def parts_of(event: Event) -> list[types.Part]:
    return list(event.content.parts or []) if event.content is not None else []


def finished(events: list[Event]) -> bool:
    """The agent's run ended: its last event closes the agent, or is its final answer."""
    if not events:
        return False
    last = events[-1]
    return bool(last.actions.end_of_agent) or (
        last.author != "user" and last.is_final_response() and any(p.text for p in parts_of(last))
    )


def unanswered_confirmation(events: list[Event]) -> str | None:
    """The id of ADK's confirmation request no function response answered yet, if any."""
    asked = [
        p.function_call.id
        for e in events
        for p in parts_of(e)
        if p.function_call is not None and p.function_call.name == CONFIRMATION
    ]
    answered = {p.function_response.id for e in events for p in parts_of(e) if p.function_response}
    return next((str(i) for i in asked if i not in answered), None)


def _approval(confirmation: str) -> types.Content:
    """The human's answer to ADK's confirmation request: approved (scripted)."""
    response = types.FunctionResponse(
        id=confirmation, name=CONFIRMATION, response={"confirmed": True}
    )
    return types.Content(role="user", parts=[types.Part(function_response=response)])


def _describe_append(self: Any, session: Session, event: Event) -> str:
    del self, session
    return describe(event)


def describe(event: Event) -> str:
    """An event in a trace row: who appended what (a call, a result, a text, the end)."""
    kinds = []
    for part in parts_of(event):
        if part.function_call is not None:
            kinds.append(f"call {part.function_call.name} {part.function_call.id}")
        elif part.function_response is not None:
            kinds.append(f"result {part.function_response.name} {part.function_response.id}")
        elif part.text:
            kinds.append("text")
    if event.actions.end_of_agent:
        kinds.append("end of agent")
    return f"{event.author}: {', '.join(kinds) or 'no content'}"


def run_child(ctx: ChildContext) -> str:
    """Start the conversation, or resume its unfinished invocation from the session."""
    global _CTX
    _CTX = ctx
    wrap_appends(ctx.boundaries)
    return asyncio.run(_run(ctx))


def wrap_appends(boundaries: Boundaries) -> None:
    """Each ``SqliteSessionService.append_event`` crosses ``session.append_event#n``: an event
    is durable once its append returns."""
    wrap_async_method(
        SqliteSessionService, "append_event", boundaries, "session.append_event",
        _describe_append,
    )  # fmt: skip


async def _run(ctx: ChildContext) -> str:
    approval = ctx.options.durability == "approval"
    app = build_app(ctx.process, approval=approval)
    message = types.Content(role="user", parts=[types.Part(text=PAYMENT_USER_INPUT)])
    return await run_session(ctx, app, session_id=SESSION_ID, message=message)


async def run_session(
    ctx: ChildContext, app: App, *, session_id: str, message: types.Content
) -> str:
    """Run ``app`` on the point's ``SqliteSessionService`` as its caller does: a new session
    gets ``message``; a session whose last invocation has not ended is resumed with
    ``run_async(invocation_id=...)`` and no message; a confirmation ADK asks for is answered
    (approved) under the same invocation. Returns ``start``, ``resume`` or ``none``."""
    service = SqliteSessionService(str(ctx.point_dir / DB_NAME))
    runner = Runner(app=app, session_service=service)
    key = {"app_name": app.name, "user_id": USER_ID, "session_id": session_id}
    session = await service.get_session(**key)
    if session is None:
        session = await service.create_session(**key)
    events = list(session.events)
    if finished(events):
        return "none"
    action = "resume" if events else "start"
    invocation: str | None = events[-1].invocation_id if events else None
    given: types.Content | None = None if events else message
    if events:
        _note_resume(ctx.boundaries, events)
    while True:
        confirmation = unanswered_confirmation(events) if events else None
        if confirmation is not None:
            given = _approval(confirmation)
        await _drain(runner, session_id, invocation=invocation, message=given)
        session = await service.get_session(**key)
        assert session is not None, "the session was created above"
        events = list(session.events)
        invocation = events[-1].invocation_id
        if finished(events) or unanswered_confirmation(events) is None:
            return action
        given = None


async def _drain(
    runner: Runner, session_id: str, *, invocation: str | None, message: types.Content | None
) -> None:
    """One ``run_async`` of the runner, every event consumed (each one appended as it comes)."""
    async for _ in runner.run_async(
        user_id=USER_ID, session_id=session_id, invocation_id=invocation, new_message=message
    ):
        pass


def _note_resume(boundaries: Boundaries, events: list[Event]) -> None:
    """What the restart found: the session's last event and the calls with a saved result (not
    ADK's placeholder while a confirmation is asked for, which the reader, ``.state``, does not
    count as a result either)."""
    saved = [
        str(p.function_response.id)
        for e in events
        for p in parts_of(e)
        if p.function_response is not None
        and p.function_response.name != CONFIRMATION
        and p.function_response.id not in (e.actions.requested_tool_confirmations or {})
    ]
    boundaries.note(what="resume_state", next=[describe(events[-1])], tasks=[], saved=saved)
