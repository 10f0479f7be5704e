"""A conversation's state: the pydantic models ``reduce`` builds (``durable.state``) and their
queries.

``State`` is what a checkpoint stores and what every decision of the runtime reads; it changes
only through ``durable.state.apply`` (the reducer gives events meaning, this module gives the
result a shape). Fields added after logs and checkpoints were first written are left out of the
serialisation while unset, so old checkpoints keep their bytes, checksums and digests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable.codec import canonical_json, frozen_dump, sha256_hex
from durable.events import (
    SCHEMA_VERSION,
    Budget,
    InboxMode,
    PlannedEdit,
    Policy,
    StopReason,
    TaskKind,
    ToolCall,
    ToolResult,
    is_follow_up,
    is_none,
    unset,
)

NOT_EXECUTED = "(not executed: the run stopped before this call ran)"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Submission(_Model):
    """An accepted input. While ``queued`` it waits in ``State.queue`` (acceptance order); its
    ``mode`` says where it is placed: a ``steer`` input at the active run's next post-tools
    boundary, any other when the next run starts. ``mode`` is left out of the serialised state
    while ``follow_up``, so checkpoints of conversations without other modes are unchanged."""

    id: str
    request_id: str | None
    content: str
    status: Literal["queued", "placed", "done", "unanswered"] = "queued"
    run_id: str | None = None
    answer: str | None = None
    reason: str | None = None
    accepted_sequence: int
    mode: InboxMode = Field(default="follow_up", exclude_if=is_follow_up)


class Run(_Model):
    id: str
    inputs: list[str]
    budget: Budget
    status: Literal["active", "stopped"] = "active"
    stop_reason: StopReason | None = None
    detail: str = ""
    model_turns: int = 0
    tool_calls: int = 0
    tokens: int = 0
    started_sequence: int


class Task(_Model):
    id: str
    kind: TaskKind
    run_id: str
    status: Literal["pending", "waiting", "terminal"] = "pending"
    phase: str
    data: dict[str, Any] = Field(default_factory=dict)
    waiting_on: list[str] = Field(default_factory=list)
    outcome: str | None = None
    call: ToolCall | None = None


class Intent(_Model):
    """A committed tool intent. The compensation fields (docs/runtime.md, "Compensation") are left
    out of the serialised state at their defaults, so checkpoints without compensation are
    unchanged: ``compensable`` and ``pre_image`` from the intent, ``compensation_sequence`` the
    sequence of its ``CompensationIntent``, ``compensated_sequence`` of its
    ``CompensationResult`` and ``compensation_failed`` whether that result is an error.
    ``edit`` and ``validates`` come from the intent event; ``revision`` is the mutation
    revision when a validation's intent was committed (what the validation can have seen at the
    earliest). All three absent from the serialised state while unset
    (``durable.events.unset``), so checkpoints without agent state are unchanged."""

    call_id: str
    task_id: str
    tool: str
    arguments: dict[str, Any]
    policy: Policy
    idempotency_key: str
    epoch: int
    sequence: int
    result_sequence: int | None = None
    interrupted: bool = False
    reconciliation: bool = False
    compensable: bool = Field(default=False, exclude_if=unset)
    pre_image: dict[str, Any] | None = Field(default=None, exclude_if=is_none)
    compensation_sequence: int | None = Field(default=None, exclude_if=is_none)
    compensated_sequence: int | None = Field(default=None, exclude_if=is_none)
    compensation_failed: bool = Field(default=False, exclude_if=unset)
    edit: PlannedEdit | None = Field(default=None, exclude_if=unset)
    validates: str | None = Field(default=None, exclude_if=unset)
    revision: int | None = Field(default=None, exclude_if=is_none)


class Message(_Model):
    """One entry of the model context. Tool results are kept per call, see ``State.context``.
    Frozen: a message never changes once added, so its dump is computed once (``dump_state``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["user", "assistant"]
    content: str
    submission_id: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class PinnedRequest(_Model):
    """A request committed before it is sent: its window is the summary of compaction
    ``window`` (if any) and the messages after it up to ``cutoff`` (``State.context``).
    ``cursor`` is absent from the serialised state while None. Frozen, as ``Message``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task_id: str
    model: str
    options: dict[str, Any] = Field(default_factory=dict)
    cutoff: int
    attempt: int
    window: str = Field(default="", exclude_if=unset)
    cursor: str | None = Field(default=None, exclude_if=unset)


class Compaction(_Model):
    """A compaction's intent and fate (``durable.compaction``): ``open`` until it is applied or
    settled; ``epoch`` is the lease epoch of the incarnation that started it."""

    id: str
    task_id: str
    requested_by: str
    run_id: str
    through: int
    window: str = ""
    prefix_digest: str
    epoch: int
    started_sequence: int
    status: Literal["open", "applied", "stale", "failed", "aborted"] = "open"
    summary: str | None = None


class PlanRevision(_Model):
    """One version of the agent's plan: its number (from 1), steps and the log position."""

    revision: int
    steps: list[str]
    sequence: int


class ChangedFile(_Model):
    """A file edit whose effect is known, at mutation revision ``revision`` (``after_hash``
    None: unknown content, see ``durable.events.FileChanged``)."""

    path: str
    call_id: str
    before_hash: str
    after_hash: str | None
    revision: int
    sequence: int


class Validation(_Model):
    criterion: str
    call_id: str
    passed: bool
    revision: int
    sequence: int


class ProviderCursor(_Model):
    """The latest provider cursor a model response returned, and whether it is resumable."""

    cursor: str
    resumable: bool
    task_id: str
    sequence: int


class State(_Model):
    """A conversation's state. ``compactions`` and ``window`` (the applied compaction the
    context starts from) are left out of the serialised state while empty, so checkpoints of
    conversations that never compacted are unchanged. The agent fields (plan, changed files,
    mutation revision, validations, provider cursor; docs/architecture.md, 1.7) are absent from
    the serialised state while unset (``durable.events.unset``), and so are the agent fields of
    its intents and pinned requests, so conversations that never use them keep their
    checkpoints and digests."""

    schema_version: int = SCHEMA_VERSION
    conversation_id: str
    last_sequence: int = 0
    epoch: int = 0
    owner_id: str | None = None
    submissions: dict[str, Submission] = Field(default_factory=dict)
    request_ids: dict[str, str] = Field(default_factory=dict)
    queue: list[str] = Field(default_factory=list)
    runs: dict[str, Run] = Field(default_factory=dict)
    active_run: str | None = None
    tasks: dict[str, Task] = Field(default_factory=dict)
    messages: list[Message] = Field(default_factory=list)
    tool_results: dict[str, ToolResult] = Field(default_factory=dict)
    intents: dict[str, Intent] = Field(default_factory=dict)
    pinned: dict[str, PinnedRequest] = Field(default_factory=dict)
    compactions: dict[str, Compaction] = Field(default_factory=dict, exclude_if=unset)
    window: str = Field(default="", exclude_if=unset)
    plan: list[str] = Field(default_factory=list, exclude_if=unset)
    plan_history: list[PlanRevision] = Field(default_factory=list, exclude_if=unset)
    mutation_revision: int = Field(default=0, exclude_if=unset)
    changed_files: dict[str, ChangedFile] = Field(default_factory=dict, exclude_if=unset)
    file_changes: list[ChangedFile] = Field(default_factory=list, exclude_if=unset)
    validations: list[Validation] = Field(default_factory=list, exclude_if=unset)
    cursor: ProviderCursor | None = Field(default=None, exclude_if=unset)

    # -- queries -------------------------------------------------------------------------------

    def live_tasks(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.status != "terminal"]

    def runnable_tasks(self) -> list[Task]:
        """Pending tasks, and waiting tasks whose every dependency is terminal."""
        return [
            t
            for t in self.tasks.values()
            if t.status == "pending"
            or (t.status == "waiting" and t.waiting_on and self._deps_done(t))
        ]

    def _deps_done(self, task: Task) -> bool:
        return all(self.tasks[d].status == "terminal" for d in task.waiting_on)

    def context(self, cutoff: int, window: str = "") -> list[dict[str, Any]]:
        """The model context of the first ``cutoff`` messages, each tool round's results in call
        order, so the context does not depend on the order concurrent tools finished in. With
        ``window`` (an applied compaction), its summary stands in for the messages before its
        ``through``: the context is the summary and the suffix."""
        out: list[dict[str, Any]] = []
        start = 0
        if window:
            applied = self.compactions[window]
            assert applied.status == "applied" and applied.summary is not None, window
            out.append({"role": "summary", "content": applied.summary})
            start = applied.through
        for message in self.messages[start:cutoff]:
            if message.role == "user":
                out.append({"role": "user", "content": message.content})
                continue
            out.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [frozen_dump(c) for c in message.tool_calls],
                }
            )
            for call in message.tool_calls:
                # Every call gets a tool message (model APIs reject an unanswered call): a call
                # that never ran because its run stopped first is answered as such.
                result = self.tool_results.get(call.call_id)
                out.append(
                    {
                        "role": "tool",
                        "call_id": call.call_id,
                        "content": result.output if result else NOT_EXECUTED,
                        "is_error": result.is_error if result else True,
                    }
                )
        return out

    def open_compaction(self) -> Compaction | None:
        """The compaction started and not yet applied or settled (at most one)."""
        for compaction in self.compactions.values():
            if compaction.status == "open":
                return compaction
        return None

    def steering_queue(self) -> list[str]:
        """The queued steering inputs, in acceptance order: what the next post-tools boundary
        of the active run places."""
        return [sid for sid in self.queue if self.submissions[sid].mode == "steer"]

    def compensating_task(self) -> Task | None:
        """The live compensation task of the active run, if it is being abandoned."""
        for task in self.tasks.values():
            if (
                task.kind == "compensation"
                and task.status != "terminal"
                and task.run_id == self.active_run
            ):
                return task
        return None

    def unvalidated(self, criteria: Iterable[str]) -> list[str]:
        """The required ``criteria`` not met: a criterion is met when its latest validation at
        the current mutation revision passed. A validation of an earlier revision checked other
        file contents, and a later failure at the same revision overrides an earlier pass (a
        flaky check is not a pass); docs/architecture.md, 1.7."""
        latest: dict[str, bool] = {}
        for validation in self.validations:
            if validation.revision == self.mutation_revision:
                latest[validation.criterion] = validation.passed
        return [c for c in criteria if not latest.get(c, False)]

    def resumable_cursor(self) -> str | None:
        """The cursor a new request may continue from: the latest one, if its model said it
        can resume from it (else None: the full request is sent)."""
        cursor = self.cursor
        return cursor.cursor if cursor is not None and cursor.resumable else None

    def unresolved_intents(self) -> list[Intent]:
        return [i for i in self.intents.values() if i.result_sequence is None]

    def digest(self) -> str:
        return sha256_hex(canonical_json(dump_state(self)))


# The fields of ``State`` whose values are frozen models (or collections of them). A ``set``, not
# a ``frozenset``: pydantic's ``exclude`` is typed as a set (or a mapping). Never changed.
_FROZEN_FIELDS: set[str] = {"messages", "tool_results", "pinned"}


def dump_state(state: State) -> dict[str, Any]:
    """``state.model_dump(mode="json")`` (equal dicts, hence the same canonical JSON), with its
    frozen parts dumped once per object (``frozen_dump``): what a checkpoint and a digest
    serialise. Its nested dicts may be shared: read it, never change it."""
    out = state.model_dump(mode="json", exclude=_FROZEN_FIELDS)
    out["messages"] = [frozen_dump(m) for m in state.messages]
    out["tool_results"] = {k: frozen_dump(v) for k, v in state.tool_results.items()}
    out["pinned"] = {k: frozen_dump(v) for k, v in state.pinned.items()}
    return out
