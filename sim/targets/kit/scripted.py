"""A ``--model-script`` turn as the scripted model inside a user's app answers it.

Every app mode whose framework lets the harness swap the model (pydantic-ai's ``FunctionModel``,
ADK's ``BaseLlm``) answers turn n of the conversation with turn n of the script: its text and
its tool calls. What a turn may hold is one rule, here, so every framework refuses the same
script the same way: a turn past the script's end, or a call of a tool the agent does not have,
is one ``AppError`` line naming the turn (a framework would answer an unknown tool with a retry
prompt, and the script would drift from the conversation it was written for).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sim.targets.kit.declarations import AppError
from sim.targets.shapes import Json, as_list, as_object


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call of a scripted turn: the tool's name and its arguments."""

    name: str
    args: dict[str, Json]


def scripted_turn(
    script: list[dict[str, Json]], turn: int, tools: Collection[str] | None
) -> tuple[str, list[ScriptedCall]]:
    """Turn ``turn`` (from 0) of ``script``: its text ("" for none) and its tool calls, each
    naming one of ``tools``; the module's ``AppError`` otherwise. ``tools`` None: the framework
    does not tell the model its tools (a LangGraph model need not be bound to the tools its
    graph's nodes run), and any name is taken."""
    if turn >= len(script):
        raise AppError(
            f"--model-script has {len(script)} turns; the agent asked for turn {turn + 1}"
        )
    step = script[turn]
    calls: list[ScriptedCall] = []
    for given in as_list(step.get("tool_calls", [])):
        call = as_object(given)
        if tools is not None and call["name"] not in tools:
            raise AppError(
                f"--model-script turn {turn + 1} calls {call['name']!r}, a tool the agent "
                f"does not have (it has: {', '.join(sorted(tools)) or 'none'})"
            )
        calls.append(ScriptedCall(str(call["name"]), dict(as_object(call.get("args", {})))))
    content = step.get("content")
    return (str(content) if content else ""), calls
