"""Tool specifications and their recovery policies (docs/architecture.md, 1.4).

A tool's *policy* says what the runtime may do when it finds the tool's intent committed but no
result (the process died somewhere between the two). The policy is a promise about the *effect*:

==========================  ========================================  ==============================
policy                      on recovery                               effect promise
==========================  ========================================  ==============================
``replay_safe``             execute again                             at least once
``idempotent``              execute again with the same key           exactly once (service dedupes)
``verify_then_continue``    ask the verifier; applied → record its    exactly once
                            result, not applied → execute, unknown →
                            as ``manual``
``unsafe`` (default)        never again; record an interrupted error  at most once
``manual``                  never again; wait for an operator         at most once
==========================  ========================================  ==============================

A tool may also declare a *compensating action* (``Compensation``, docs/runtime.md "Compensation"):
when a run is abandoned (``Conversation.abandon``, or an operator rejecting an interrupted call with
``Conversation.reject``), the runtime undoes the run's completed compensable calls in reverse
order. ``capture`` runs before the call's intent is committed and its result (the pre-image,
e.g. a file's content) is part of the intent, durable before the effect; ``undo`` gets it back.
A compensation is journaled like a call (an intent before it runs, a result after) and, after a
crash between the two, run again with the same key: the compensating operation must be
idempotent under ``ToolContext.idempotency_key`` (``compensation_key``), so the service
dedupes it and it takes effect exactly once.

"Exactly once" assumes the effect cannot come from a zombie: a worker paused past its lease can
still run a tool it had started. A service that honours ``ToolContext.epoch`` as a fencing token
closes that window; without one, only ``idempotent`` (dedupe by key) keeps its promise then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from durable.codec import sha256_hex
from durable.errors import ToolError as ToolError  # re-exported: its documented home
from durable.events import PlannedEdit, Policy

POLICIES: tuple[Policy, ...] = (
    "replay_safe",
    "idempotent",
    "verify_then_continue",
    "unsafe",
    "manual",
)


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool is told about its call. ``epoch`` is the fencing token for external services."""

    conversation_id: str
    call_id: str
    idempotency_key: str
    epoch: int
    attempt: Literal["first", "recovery"]
    #: A file-edit call's planned hashes (recorded in its intent): the effect applies only to
    #: the content it was planned against, and a verifier compares the file's current hash.
    edit: PlannedEdit | None = None


@dataclass(frozen=True, kw_only=True)
class Verification:
    """A verifier's answer: was the interrupted call's effect applied, and with what result."""

    status: Literal["applied", "not_applied", "unknown"]
    output: str = ""


ToolFn = Callable[[dict[str, Any], ToolContext], Awaitable[str]]
VerifierFn = Callable[[dict[str, Any], ToolContext], Awaitable[Verification]]
#: Reads the pre-image a compensation needs, before the call's intent is committed.
CaptureFn = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]
#: Undoes a call: its arguments, its recorded pre-image (``{}`` without a capture), and a context
#: whose ``idempotency_key`` is the compensation's (the service must dedupe by it).
UndoFn = Callable[[dict[str, Any], dict[str, Any], ToolContext], Awaitable[str]]


@dataclass(frozen=True, kw_only=True)
class Compensation:
    """A tool's compensating action (module docstring): ``undo``, idempotent under its key, and
    optionally ``capture``, the pre-image it restores."""

    undo: UndoFn
    capture: CaptureFn | None = None


#: A file-edit tool's planner: from the call's arguments, the file and its content hashes now
#: and after the edit, computed before the intent is committed (it must not change anything).
EditPlanner = Callable[[dict[str, Any]], Awaitable[PlannedEdit]]


def content_hash(content: str | None) -> str:
    """The hash a file edit records: sha256 of the content, ``absent`` for no file."""
    return "absent" if content is None else sha256_hex(content)


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    name: str
    fn: ToolFn
    policy: Policy = "unsafe"
    verifier: VerifierFn | None = None
    description: str = ""
    compensation: Compensation | None = None
    #: A file-edit tool: its planner (the hashes go into the intent; the result records the
    #: change and bumps the mutation revision). Needs ``verify_then_continue``: the planned
    #: hashes are what lets a recovery tell whether an interrupted edit landed.
    plan_edit: EditPlanner | None = None
    #: A validation tool: the criterion its calls check (a call without error passes).
    validates: str | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"tool {self.name!r}: unknown policy {self.policy!r}")
        if self.policy == "verify_then_continue" and self.verifier is None:
            raise ValueError(f"tool {self.name!r}: verify_then_continue needs a verifier")
        if self.plan_edit is not None and self.policy != "verify_then_continue":
            raise ValueError(f"tool {self.name!r}: a file-edit tool needs verify_then_continue")
        if self.plan_edit is not None and self.validates is not None:
            raise ValueError(f"tool {self.name!r}: a tool edits files or validates, not both")


class ToolRegistry:
    """Tools by name. Re-registering a name is an error (it would silently change a policy)."""

    def __init__(self, specs: list[ToolSpec] | None = None) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs or []:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"tool {spec.name!r} registered twice")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)


def idempotency_key(conversation_id: str, call_id: str) -> str:
    """One key per call, never per attempt: a service dedupes retries of the same call by it."""
    return f"{conversation_id}:{call_id}"


def compensation_key(conversation_id: str, call_id: str) -> str:
    """The key of a call's compensation: derived from the call (so every re-run after a crash
    carries it and the service dedupes), distinct from the call's own key."""
    return f"{idempotency_key(conversation_id, call_id)}:undo"


def compensation_call_id(call_id: str) -> str:
    """The id a compensation is known by outside the runtime (its ``ToolContext.call_id``, so its
    effect is booked apart from the call's own)."""
    return f"{call_id}.undo"


def interrupted_message(tool: str) -> str:
    return f"Tool {tool} was interrupted and may have partially run"
