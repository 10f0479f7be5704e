"""The recording run of ``durable-sim target record`` (``sim.targets.recording``):

    python -m sim.targets.recording.child FRAMEWORK SPEC_JSON OUT_JSON

``SPEC_JSON`` holds the app's ``AppSpec`` as the parent checked it (``AppSpec.to_json``).

Imports the framework: run only as this child. An error is one line on stderr, exit 2 (the
parent shows the line).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from sim.targets.kit.declarations import AppError
from sim.targets.kit.loading import import_app
from sim.targets.kit.spec import AppSpec
from sim.targets.shapes import Json, ScriptCall, ScriptTurn


def _factory(spec: AppSpec) -> Any:
    """The app's factory, called with no argument: it builds the model it uses for real."""
    _, factory = import_app(spec)
    app = spec.entry
    required = [
        p
        for p in inspect.signature(factory).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if required:
        raise AppError(
            f"--app {app}: record runs the app with its own model, so {required[0].name!r} needs "
            "a default that builds it (e.g. model=None, then your provider's chat model)"
        )
    return factory()


def record_langgraph(app: AppSpec, given: Json) -> list[ScriptTurn]:
    """Every response of a LangChain chat model while the graph runs once, to its end."""
    # the recorded framework's extra: only the one asked for need be installed
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    turns: list[ScriptTurn] = []

    def keep(message: object) -> object:
        if isinstance(message, AIMessage):
            calls: list[ScriptCall] = [
                {"name": c["name"], "args": c["args"]} for c in message.tool_calls
            ]
            turns.append({"content": str(message.content), "tool_calls": calls})
        return message

    invoke, ainvoke = BaseChatModel.invoke, BaseChatModel.ainvoke

    @functools.wraps(invoke)
    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        return keep(invoke(self, *args, **kwargs))

    @functools.wraps(ainvoke)
    async def recorded_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        return keep(await ainvoke(self, *args, **kwargs))

    BaseChatModel.invoke = recorded  # type: ignore[method-assign]  # this child only
    BaseChatModel.ainvoke = recorded_async  # type: ignore[method-assign]  # this child only
    graph = _factory(app)
    graph = graph.compile(checkpointer=InMemorySaver()) if hasattr(graph, "compile") else graph
    first = (
        {"messages": [HumanMessage(content=given, id="user-1")]}
        if isinstance(given, str)
        else given
    )
    graph.invoke(first, {"configurable": {"thread_id": "record"}})
    return turns


def record_pydantic_ai(app: AppSpec, given: Json) -> list[ScriptTurn]:
    """Every response of the agent's model while it runs once on the prompt."""
    # the recorded framework's extra: only the one asked for need be installed
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models import infer_model
    from pydantic_ai.models.wrapper import WrapperModel

    if not isinstance(given, str):
        raise AppError("--input: pydantic-ai takes the prompt, a JSON string")
    turns: list[ScriptTurn] = []

    class Recording(WrapperModel):
        async def request(self, *args: Any, **kwargs: Any) -> ModelResponse:
            response = await super().request(*args, **kwargs)
            text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
            calls: list[ScriptCall] = [
                {"name": p.tool_name, "args": p.args_as_dict()}
                for p in response.parts
                if isinstance(p, ToolCallPart)
            ]
            turns.append({"content": text, "tool_calls": calls})
            return response

    agent = _factory(app)
    if not isinstance(agent, Agent):
        raise AppError(
            f"--app {app.entry}: the factory returned {type(agent).__name__}, not an Agent"
        )
    if agent.model is None:
        raise AppError(f"--app {app.entry}: the agent has no model of its own to record")
    with agent.override(model=Recording(infer_model(agent.model))):
        asyncio.run(agent.run(given))
    return turns


RECORDERS = {"langgraph": record_langgraph, "pydantic-ai": record_pydantic_ai}


def main(argv: list[str]) -> int:
    framework, spec_path, out = argv
    spec = AppSpec.from_json(json.loads(Path(spec_path).read_text(encoding="utf-8")))
    given = None if spec.input is None else spec.input.value
    try:
        turns = RECORDERS[framework](spec, given)
    except Exception as exc:  # the user's app: its failure is the one line the parent shows
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    Path(out).write_text(json.dumps(turns), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
