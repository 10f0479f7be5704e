"""The model driver protocol: a pinned request in, a response or a typed error out."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from durable.errors import ModelError
from durable.events import ToolCall, unset


class ModelRequest(BaseModel):
    """What the model is asked. Built from the pinned ``model_requested`` event, so a request
    re-sent after a crash is identical to the one that was in flight. ``cursor`` (absent from
    the serialisation when None) is the pinned provider cursor: set only when the model said
    it can resume from it (docs/architecture.md, 1.7)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    conversation_id: str
    task_id: str
    model: str
    options: dict[str, Any] = Field(default_factory=dict)
    messages: list[dict[str, Any]]
    attempt: int
    cursor: str | None = Field(default=None, exclude_if=unset)


class ProposedCall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelResponse(BaseModel):
    """A response. ``plan`` (not None) replaces the agent's plan; ``cursor`` is a provider
    cursor (like a previous response id) and ``resumable`` says whether a later request, even
    from another process after a crash, may continue from it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    text: str = ""
    tool_calls: list[ProposedCall] = Field(default_factory=list)
    tokens: int = 0
    plan: list[str] | None = None
    cursor: str | None = None
    resumable: bool = False


class ModelDriver(Protocol):
    async def complete(self, request: ModelRequest) -> ModelResponse: ...


__all__ = ["ModelDriver", "ModelError", "ModelRequest", "ModelResponse", "ProposedCall", "ToolCall"]
