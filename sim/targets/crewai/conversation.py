"""The payment flow's conversation as its state keeps it: a list of chat messages in the shape
CrewAI's LLMs take and give (``crewai.utilities.types.LLMMessage``: the user's text, the
assistant's tool calls as OpenAI-style dicts, one ``tool`` message per result, the answer).

Plain dicts, no crewai: the flow (in the child) decides from these what runs next, and the state
reader (``sim.targets.crewai.state``) turns them into the judge's rows.
"""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]


def calls(messages: list[Message]) -> list[Message]:
    """Every tool call the assistant made, in order (OpenAI's ``{"id", "function": {"name",
    "arguments"}}``)."""
    return [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]


def answered(messages: list[Message]) -> list[str]:
    """The ids of the tool calls that have a result, in the order the results came."""
    return [str(m["tool_call_id"]) for m in messages if m.get("role") == "tool"]


def pending_call(messages: list[Message]) -> Message | None:
    """The first tool call the state holds without a result: what the flow runs next."""
    done = set(answered(messages))
    return next((c for c in calls(messages) if c["id"] not in done), None)


def results_since_user(messages: list[Message]) -> int:
    """Tool results after the user's last text: which step of the script the model is at."""
    done = 0
    for message in messages:
        if message.get("role") == "user":
            done = 0
        elif message.get("role") == "tool":
            done += 1
    return done


def answer(messages: list[Message]) -> str | None:
    """The assistant's final text, when the last message is one."""
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and not last.get("tool_calls") and last.get("content"):
        return str(last["content"])
    return None


def tool_name(messages: list[Message], call_id: str) -> str:
    """The tool a result answers (its call's name)."""
    return next((str(c["function"]["name"]) for c in calls(messages) if c["id"] == call_id), "?")


def row(messages: list[Message], message: Message) -> str:
    """One message as a history row: who, and the call, result or text, with no call id in it
    (a model asked again mints new ids; the history compares what was said)."""
    role = str(message.get("role"))
    if role == "tool":
        name = tool_name(messages, str(message["tool_call_id"]))
        return f"tool: {name} -> {message.get('content')}"
    made = message.get("tool_calls") or []
    if made:
        said = ", ".join(f"{c['function']['name']} {c['function']['arguments']}" for c in made)
        return f"{role}: calls {said}"
    return f"{role}: {message.get('content')}"
