"""A user's own pydantic-ai agent (``--app FILE.py:FACTORY``), crash-tested as the bundled one is.

The factory is the user's code, unmodified, and returns a ``pydantic_ai.Agent``. Its model is
replaced by pydantic-ai's testing model, a ``FunctionModel`` answering from ``--model-script``:
a factory that takes one argument is called with it (``factory(model)``); a factory that takes
none gets it set as the agent's model (``agent.model = ...``) before DBOS sees the agent --
``DBOSAgent`` wraps the model it finds at construction and refuses ``override(model=...)`` of a
plain model, so setting it is the only way in. Durability (``--durability``):

- ``agent``: the harness wraps the user's agent in ``DBOSAgent`` (as a deployment on
  pydantic-ai's first DBOS integration does); an agent that already carries ``DBOSDurability``
  is refused, it would be made durable twice;
- ``capability``: the user's agent carries ``DBOSDurability()`` itself and the harness runs it
  inside a ``@DBOS.workflow`` of its own. The capability binds the agent's model when the
  ``Agent`` is built and rejects any other model instance inside a workflow, so the factory
  must take the model as its argument.

The n-th model request of a run gets the n-th turn of the script, n counted from the model
responses already in the conversation (a recovered run replays its recorded requests, and one
re-asked after a crash gets the turn a real model would give), each tool call with an id of the
process and its own call count. A model request is a DBOS step, so a recovered workflow gets the
recorded response back with the first process's ids: ``ctx.tool_call_id`` is a sound
idempotency key. The effect functions (``--effect``) are the app's module-level clients of
outside services (or its tool functions), wrapped before the factory runs so an
``Agent(model, tools=[book])`` holds the wrapper.

Crash boundaries: the model request inside its step (``model.request#n``), pydantic-ai's
function-tool call (``pydantic_ai.call_tool#n``), each effect (``effect:app.NAME#NAME-n``), and
DBOS's ``init_workflow``, ``record_operation_result``, ``update_workflow_outcome``. The last
process notes the run's messages and answer in the trace (``sim.targets.pydantic_ai.app_state``
reads them there: the parent never imports the user's code).

Imports pydantic_ai and dbos at module level: import this module only in a child process.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from typing import Any

from dbos import DBOS, SetWorkflowID
from pydantic import TypeAdapter
from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.durable_exec.dbos import DBOSAgent, DBOSDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from sim.targets.dbos.system_db import FINAL, RESULT_POLL_S, poll_quickly, sqlite_url
from sim.targets.kit.declarations import AppError
from sim.targets.kit.landing import running_tool
from sim.targets.kit.loading import load_app
from sim.targets.kit.scripted import scripted_turn
from sim.targets.protocol import ChildContext, TargetState
from sim.targets.pydantic_ai.agent import DB_NAME, _history, wrap_boundaries
from sim.targets.pydantic_ai.app_state import STATE_NOTE
from sim.targets.shapes import Json

#: The run's workflow: one per point, so a later process finds the first one's.
WORKFLOW_ID = "app-agent-run"
#: The name a ``DBOSAgent`` gets when the user's agent has none (it names DBOS's steps).
DEFAULT_NAME = "app_agent"

# The agent the harness's workflow runs (the ``capability`` way), set before DBOS launches: DBOS
# registers workflows by name, so the workflow lives at module level and finds the agent here.
_AGENT: Agent[Any, Any] | None = None


class ScriptModel:
    """The ``FunctionModel``'s function: the user's script, turn by turn (see the module
    docstring). A turn that calls a tool the agent does not have is refused, naming the turn:
    pydantic-ai would answer it with a retry prompt and the script would drift."""

    def __init__(self, script: list[dict[str, Json]], process: str) -> None:
        self.script = script
        self.process = process
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        tools = {t.name for t in [*info.function_tools, *info.output_tools]}
        text, calls = scripted_turn(self.script, turn, tools)
        parts: list[ModelResponsePart] = [TextPart(text)] if text else []
        for i, call in enumerate(calls):
            call_id = f"call_{self.process}_{self.calls}_{i}"
            parts.append(ToolCallPart(call.name, dict(call.args), tool_call_id=call_id))
        return ModelResponse(parts=parts, model_name="scripted")


def _durable(agent: Agent[object, object]) -> bool:
    """Whether the agent carries pydantic-ai's ``DBOSDurability`` capability."""
    found: list[object] = []
    agent.root_capability.apply(found.append)
    return any(isinstance(c, DBOSDurability) for c in found)


def build_agent(ctx: ChildContext) -> Any:
    """The user's agent on the scripted model, its effect functions on the ledger, made durable
    the way ``--durability`` names (the module docstring says why each check)."""
    spec, capability = ctx.options.app, ctx.options.durability == "capability"
    assert spec is not None and spec.model_script is not None, "checked by the kit"
    app = spec.entry
    _, factory = load_app(ctx)
    script = spec.turns()
    model = FunctionModel(ScriptModel(script, ctx.process), model_name="scripted")
    takes_model = bool(inspect.signature(factory).parameters)
    if capability and not takes_model:
        raise AppError(
            f"--app {app}: with --durability capability the factory must take the model "
            "(DBOSDurability binds the agent's model when the Agent is built)"
        )
    try:
        agent = factory(model) if takes_model else factory()
    except Exception as exc:
        raise AppError(f"--app {app}: calling it raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(agent, Agent):
        raise AppError(f"--app {app}: returned a {type(agent).__name__}, not a pydantic_ai.Agent")
    if capability and not _durable(agent):
        raise AppError(f"--app {app}: --durability capability needs an agent with DBOSDurability()")
    if not capability and _durable(agent):
        raise AppError(
            f"--app {app}: the agent carries DBOSDurability; use --durability capability"
        )
    if capability:
        return agent
    if not takes_model:
        agent.model = model
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`DBOSAgent` is deprecated")
        return DBOSAgent(agent, name=agent.name or DEFAULT_NAME)


@DBOS.workflow(name="durable_sim_app_agent_run")
async def run_agent(prompt: str, deps: Json = None) -> AgentRunResult[object]:
    """The harness's workflow around the user's agent (the ``capability`` way): its input is
    the prompt and the ``--deps`` JSON, as a workflow's input is kept, and the deps object is
    made inside it."""
    if _AGENT is None:
        raise RuntimeError("the workflow runs only inside a target child")
    return await _AGENT.run(prompt, deps=agent_deps(_AGENT, deps))


def agent_deps(agent: Agent[object, object], given: Json) -> object:
    """``--deps``' JSON validated into the agent's ``deps_type`` (a dataclass, a pydantic model,
    a dict...), as pydantic validates any type; None without ``--deps``."""
    if given is None:
        return None
    try:
        return TypeAdapter(agent.deps_type).validate_python(given)
    except Exception as exc:
        raise AppError(
            f"--deps: not a {getattr(agent.deps_type, '__name__', agent.deps_type)}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        ) from exc


def run_child(ctx: ChildContext) -> str:
    """Build the user's agent, launch DBOS (which recovers a pending workflow by itself), start
    the workflow or wait for the recovered one, then note the run for the judge."""
    global _AGENT
    wrap_boundaries(ctx.boundaries)
    _wrap_tool_calls(ctx)
    _AGENT = build_agent(ctx)
    db = sqlite_url(ctx.point_dir / DB_NAME)
    DBOS(config={"name": "durable-sim-pydantic-ai-app", "system_database_url": db})
    poll_quickly()
    DBOS.launch()
    # No DBOS.destroy after: the child leaves with os._exit (sim.targets.child.leave).
    return asyncio.run(_start_or_wait(ctx, _AGENT))


def _wrap_tool_calls(ctx: ChildContext) -> None:
    """pydantic-ai's call of a function tool (the tool named by its argument) runs inside
    ``running_tool``: the caller of the effects it lands, or a tool the report lists as
    undeclared."""
    original = FunctionToolset.call_tool

    async def call_tool(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        with running_tool(ctx, name):
            return await original(self, name, *args, **kwargs)

    FunctionToolset.call_tool = call_tool  # type: ignore[method-assign]  # the child's own copy of the class


async def _start_or_wait(ctx: ChildContext, agent: Any) -> str:
    status = await DBOS.get_workflow_status_async(WORKFLOW_ID)
    if status is None:
        spec = ctx.options.app
        assert spec is not None and spec.input is not None, "checked by the kit"
        prompt, given = str(spec.input.value), None if spec.deps is None else spec.deps.value
        with SetWorkflowID(WORKFLOW_ID):
            if ctx.options.durability == "capability":
                handle = await DBOS.start_workflow_async(run_agent, prompt, given)
            else:
                workflow = agent.dbos_wrapped_run_workflow
                deps = agent_deps(agent.wrapped, given)
                handle = await DBOS.start_workflow_async(workflow, prompt, deps=deps)
        action = "start"
    else:
        action = "none" if status.status in FINAL else "resume"
        if action == "resume":
            ctx.boundaries.note(what="resume_state", next=[status.status], tasks=[], saved=[])
        handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
    try:
        result = await handle.get_result(polling_interval_sec=RESULT_POLL_S)
    except Exception as exc:
        _note(ctx, "ERROR", f"{type(exc).__name__}: {exc}", None)
        raise
    _note(ctx, "SUCCESS", "", result)
    return action


def _note(
    ctx: ChildContext, status: str, error: str, result: AgentRunResult[object] | None
) -> None:
    """The run's messages, the user's prompts and the answer, as the judge compares them."""
    state = TargetState()
    messages: list[ModelMessage] = [] if result is None else result.all_messages()
    _history(messages, state)
    ctx.boundaries.note(
        what=STATE_NOTE,
        status=status,
        error=error,
        inputs=[
            str(part.content)
            for message in messages
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ],
        history=state.history,
        results=state.results,
        answer=None if result is None else str(result.output),
    )
