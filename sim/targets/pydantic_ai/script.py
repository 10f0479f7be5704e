"""The bundled payment agent's script and its reading, shared by every durability of the
pydantic-ai target: the DBOS ones (``sim.targets.pydantic_ai.agent``) and Prefect's
(``sim.targets.pydantic_ai.prefect_agent``), so the runtimes compare on one agent.

Imports pydantic_ai only (no durable-execution engine): a child of one durability never pays for
importing the other's library.

Determinism: the scripted model derives each tool call id from the process and its own call
count (``call_p1_1``). Where the engine records the model request (a DBOS step, a Prefect task
result), a recovered run gets the recorded response back, with the *first* process's call id:
the same tool call, not a new one.
"""

from __future__ import annotations

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from sim.targets.protocol import PAYMENT_ANSWER, PAYMENT_SCRIPT, PAYMENT_USER_INPUT, TargetState

AGENT_NAME = "payer"
USER_INPUT, SCRIPT, ANSWER = PAYMENT_USER_INPUT, PAYMENT_SCRIPT, PAYMENT_ANSWER


class ScriptedModel:
    """The ``FunctionModel``'s function: the number of tool results since the user's last
    prompt decides the next turn (charge, then email, then the answer), so a recovered run gets
    the turn a real model would give it."""

    def __init__(self, process: str) -> None:
        self.process = process
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        self.calls += 1
        done = 0
        for message in messages:
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    done = 0
                elif isinstance(part, ToolReturnPart):
                    done += 1
        if done < len(SCRIPT):
            name, args = SCRIPT[done]
            call_id = f"call_{self.process}_{self.calls}"
            return ModelResponse(parts=[ToolCallPart(name, dict(args), tool_call_id=call_id)])
        return ModelResponse(parts=[TextPart(ANSWER)])


def history(messages: list[ModelMessage], state: TargetState) -> None:
    """One comparable row per message part, and the tool calls and results they hold."""
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                state.history.append(f"user: {part.content}")
            elif isinstance(part, ToolCallPart):
                state.history.append(f"model: calls {part.tool_name}")
            elif isinstance(part, TextPart):
                state.history.append(f"model: {part.content}")
            elif isinstance(part, ToolReturnPart):
                state.history.append(f"tool {part.tool_name}: {part.content}")
                state.results.setdefault(part.tool_name, []).append(part.tool_call_id)


def record_calls(response: object, state: TargetState) -> None:
    """The tool calls a recorded model response asked for (the only record of them)."""
    if isinstance(response, ModelResponse):
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                state.calls.setdefault(part.tool_name, []).append(part.tool_call_id)


def describe_request(
    self: object, messages: list[ModelMessage], *args: object, **kw: object
) -> str:
    """A model request's boundary detail (both durable ways wrap ``FunctionModel.request``)."""
    del self, args, kw
    return f"{len(messages)} message(s) in"


def describe_call(
    self: object, name: str, args: object, run: RunContext[None], *rest: object
) -> str:
    """A function-tool call's boundary detail (``FunctionToolset.call_tool``)."""
    del self, args, rest
    return f"{name} call {run.tool_call_id}"
