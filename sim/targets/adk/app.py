"""A user's own Google ADK app (``--app MODULE:FACTORY``), crash-tested as the bundled agent is.

The factory is the user's code, unmodified, called with no argument. It returns an ADK ``App``
made resumable (``resumability_config=ResumabilityConfig(is_resumable=True)``), which runs as
it is, plugins and all; or an agent (any ``BaseAgent``: an ``LlmAgent``, a ``SequentialAgent``),
which the harness wraps in a resumable ``App`` named after it, as ADK's resume docs have a
caller do. A non-resumable ``App`` is refused in one line: the restart under test is ADK's
resume (``run_async(invocation_id=...)``), which such an app does not have.

The app's ``LlmAgent`` gets the scripted model in place of its own (a model name or a
``BaseLlm``): a ``BaseLlm`` answering from ``--model-script``, so no request leaves the process.
An app of several ``LlmAgent``s (sub-agents, the agents of ``AgentTool``s) is refused in one
line, naming them: one script follows one agent's turns. The n-th call in a conversation gets
the n-th turn, n counted from the model's turns in the contents ADK sends it (so a resumed
invocation gets the turn a real model would), each function call with an id of the process and
its own call count, as a model re-asked after a crash mints new ones. A script that runs out,
or a turn that calls a tool the agent does not have, is one line naming the turn.

Effects are the kit's (``sim.targets.kit.loading.load_app``): ``--effect`` names a function or a
method of a client object wherever it is (``payments_agent.clients:MAILER.send``), wrapped
before the app is imported; ``--effect-http`` a call to an outside API through httpx, requests
or urllib3, answered in the process by ``--http-stub`` and deduplicated by its
``Idempotency-Key`` header. Each call of a tool by ADK runs inside ``running_tool``, so an effect
carries the tool that made it (H1 is judged per effect against its tools' results in the
session) and a tool that lands none is listed as undeclared.

The run is the bundled agent's (``sim.targets.adk.agent.run_session``): a new session on the
point's ``SqliteSessionService`` gets ``--input`` as the user's message; a restart resumes the
unfinished invocation with ``run_async(invocation_id=...)``, approving any confirmation a tool
asks for (``require_confirmation``). Boundaries: ``model.call#n``, each effect, each
``session.append_event#n``. Each process notes the app's name in the trace, so the reader
(``sim.targets.adk.app_state``) finds the session without importing the user's code.

Imports google.adk at module level: import this module only in a child process, under the
target's own environment (``sim.targets.adk``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.apps import App
from google.adk.flows.llm_flows.tools import _caller
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import BaseTool, ToolContext
from google.adk.tools.agent_tool import AgentTool
from google.genai import types
from pydantic import PrivateAttr

from sim.targets.adk.agent import resumable_app, run_session, wrap_appends
from sim.targets.adk.app_state import APP_NOTE, APP_SESSION_ID
from sim.targets.boundaries import Boundaries
from sim.targets.kit.declarations import AppError
from sim.targets.kit.landing import running_tool
from sim.targets.kit.loading import call_factory, load_app
from sim.targets.kit.scripted import scripted_turn
from sim.targets.protocol import ChildContext

#: The name of the ``App`` the harness wraps an agent in, when the agent's own name is no app
#: name (ADK's app names start with a letter; an agent's may start with ``_``).
DEFAULT_APP_NAME = "app"


class ScriptModel(BaseLlm):
    """A ``BaseLlm`` answering from the user's script, turn by turn (see the module docstring).
    Each call crosses ``model.call#n``."""

    model: str = "scripted"
    script: list[dict[str, Any]] = []
    process: str = ""
    calls: int = 0
    _boundaries: Boundaries | None = PrivateAttr(default=None)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del stream
        boundaries = self._boundaries
        if boundaries is None:
            raise RuntimeError("the scripted model runs only inside a target child")
        self.calls += 1
        turn = sum(content.role == "model" for content in llm_request.contents)
        response = boundaries.crossing(
            boundaries.numbered("model.call"),
            lambda: self._turn(turn, set(llm_request.tools_dict)),
            turn=turn,
        )
        yield response

    def _turn(self, turn: int, tools: set[str]) -> LlmResponse:
        text, calls = scripted_turn(self.script, turn, tools)
        parts: list[types.Part] = [types.Part(text=text)] if text else []
        for i, call in enumerate(calls):
            function_call = types.FunctionCall(
                name=call.name, args=call.args, id=f"call_{self.process}_{self.calls}_{i}"
            )
            parts.append(types.Part(function_call=function_call))
        return LlmResponse(content=types.Content(role="model", parts=parts))


def build_app(ctx: ChildContext) -> App:
    """The user's app, its effects on the ledger, every ``LlmAgent`` on the scripted model; a
    one-line ``AppError`` for a factory that gives none (the module docstring says which)."""
    spec = ctx.options.app
    assert spec is not None, "an app child runs only with --app"
    _, factory = load_app(ctx)
    made = call_factory(
        spec.entry, factory, why_no_argument="the harness gives every LlmAgent its scripted model"
    )
    app = as_app(spec.entry, made)
    agents = llm_agents(app.root_agent)
    if len(agents) > 1:
        # Turns are counted from the contents ADK sends one agent; an AgentTool's agent starts a
        # session of its own and a transferred-to agent sees the others' turns as the user's,
        # so one script cannot follow several agents.
        names = ", ".join(agent.name for agent in agents)
        raise AppError(
            f"--app {spec.entry}: --model-script scripts one LlmAgent; this app has "
            f"{len(agents)}: {names}"
        )
    if not any(agent.tools for agent in agents):
        raise AppError(
            f"--app {spec.entry}: no LlmAgent of it has a tool, so it makes no effect to test "
            "(give its agent the tools that call your services)"
        )
    model = ScriptModel(script=spec.turns(), process=ctx.process)
    model._boundaries = ctx.boundaries
    for agent in agents:
        agent.model = model
    return app


def as_app(entry: str, made: object) -> App:
    """What the factory returned as the ``App`` the run runs: a resumable ``App`` as it is, an
    agent wrapped in one; anything else refused, naming what it is."""
    if isinstance(made, App):
        config = made.resumability_config
        if config is None or not config.is_resumable:
            raise AppError(
                f"--app {entry}: its App is not resumable; give it resumability_config="
                "ResumabilityConfig(is_resumable=True), or return its root agent"
            )
        return made
    if isinstance(made, BaseAgent):
        name = made.name if made.name[:1].isalpha() else DEFAULT_APP_NAME
        return resumable_app(name, made)
    raise AppError(
        f"--app {entry}: returned a {type(made).__name__}, not a google.adk App or agent"
    )


def llm_agents(root: object) -> list[LlmAgent]:
    """Every ``LlmAgent`` under ``root``, each once: itself, its sub-agents, and the agents its
    ``AgentTool``s run, in the order a walk from the root meets them."""
    found: list[LlmAgent] = []
    seen: set[int] = set()
    todo: list[object] = [root]
    while todo:
        node = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, LlmAgent):
            found.append(node)
            todo += [tool.agent for tool in node.tools if isinstance(tool, AgentTool)]
        todo += list(getattr(node, "sub_agents", None) or [])
    return found


def wrap_tool_calls(ctx: ChildContext) -> None:
    """ADK's call of one tool runs inside ``running_tool``: the caller of the effects it lands,
    or a tool the report lists as undeclared. ADK 2.13.0 calls every tool of a non-live run
    through ``_call_tool_async`` (private: the target's pin is exact), looked up in its module
    when called, so replacing it there reaches every call."""
    original = _caller._call_tool_async

    async def call_tool(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> Any:
        with running_tool(ctx, str(tool.name)):
            return await original(tool, args=args, tool_context=tool_context)

    _caller._call_tool_async = call_tool


def run_child(ctx: ChildContext) -> str:
    """Build the user's app, then start its session or resume its unfinished invocation, to its
    end. An ``AppError`` out of the run is raised again bare: the child reports an exception's
    last line, which a note ADK added on the way would otherwise be."""
    spec = ctx.options.app
    assert spec is not None and spec.input is not None, "checked by the kit"
    wrap_appends(ctx.boundaries)
    wrap_tool_calls(ctx)
    app = build_app(ctx)
    ctx.boundaries.note(what=APP_NOTE, app=app.name)
    message = types.Content(role="user", parts=[types.Part(text=str(spec.input.value))])
    try:
        return asyncio.run(run_session(ctx, app, session_id=APP_SESSION_ID, message=message))
    except AppError as exc:
        raise AppError(str(exc)) from None
