"""Event records: the durable source of truth of a conversation.

Every state change of a conversation is an event appended to its log. A record wraps one event with
its position (``sequence``), its commit (``batch``), who wrote it (``owner_id``, ``epoch``) and a
sha256 ``checksum`` over the canonical JSON of everything else, so a reader can tell a torn or
corrupted record from a good one without trusting the medium.

Canonical JSON is the only serialisation used for checksums (``durable.codec``, the home of
the encoding and of every memo; ``canonical_json``, ``sha256_hex``, ``parse_json`` and ``Memo``
are re-exported here, where callers have always imported them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
)

from durable.codec import (
    PARSED_LINES,
    RECORD_LINES,
    RECORDS_VERIFIED,
    canonical_json,
    parse_json,
    sha256_hex,
)
from durable.codec import Memo as Memo  # re-exported: sim/ and tests import it from here

SCHEMA_VERSION = 1

Policy = Literal["replay_safe", "idempotent", "verify_then_continue", "unsafe", "manual"]
#: ``abandoned``: the caller abandoned the run and its compensations were applied (docs/runtime.md,
#: "Compensation"); the run stops only once they have all settled. ``unvalidated``: the model
#: answered, but a required criterion has no passing validation at the conversation's current
#: mutation revision (docs/architecture.md, 1.7).
StopReason = Literal[
    "completed",
    "model_error",
    "aborted",
    "budget_exhausted",
    "no_model",
    "abandoned",
    "unvalidated",
]
#: ``compensation``: the task that undoes an abandoned run's compensable calls, one at a time.
#: ``compaction``: a task that asks the model to summarise a prefix of the conversation
#: (``durable.compaction``); the generation turn that needs it waits on it in ``prepare``.
TaskKind = Literal["generation", "tool", "compensation", "compaction"]
#: How a task ended (``TaskSettled``); ``superseded``: a compaction found stale, whose turn goes
#: back to ``prepare`` (docs/architecture.md, 1.8).
TaskOutcome = Literal["completed", "failed", "aborted", "superseded"]
#: How an input that arrives while a run is active is treated (``Conversation.submit``):
#: ``follow_up`` waits for the run to settle and starts the next run; ``steer`` is placed into the
#: running run at its next post-tools boundary; ``reject`` is refused with ``ConversationBusy``.
InboxMode = Literal["follow_up", "steer", "reject"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(BaseModel):
    """A tool call proposed by the model; ``call_id`` is unique within the conversation."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    call_id: str
    tool: str
    arguments: dict[str, Any]


class Budget(BaseModel):
    """Per-run limits. A run that would exceed one stops with ``budget_exhausted``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    model_turns: int = 16
    tool_calls: int = 32
    tokens: int = 200_000


def unset(value: object) -> bool:
    """Whether an optional field added after logs and checkpoints were written holds its unset
    value (None, False, 0, empty): such a field is left out of the serialisation
    (``Field(exclude_if=unset)``), so old data keeps its canonical JSON, checksums and
    fingerprints. A predicate per field, not a serialiser of the whole model written in Python:
    a wrap serialiser on the state's models was a third of a checkpoint, and checkpoints are
    serialised on every ``checkpoint_every`` commits of a run."""
    return not value


def is_none(value: object) -> bool:
    """An unset optional field whose set values include falsy ones (a revision may be 0, a
    pre-image may be empty): left out only while None."""
    return value is None


def is_follow_up(value: object) -> bool:
    """An inbox mode at its default (``follow_up``), left out of the encoding as in logs
    written before modes existed."""
    return value == "follow_up"


class InputAccepted(_Event):
    """An input accepted durably. ``mode`` is the inbox mode it was submitted with (absent from
    the encoding when ``follow_up``, as in logs written before modes existed); a ``reject``
    input is only ever accepted while no run is active."""

    type: Literal["input_accepted"] = "input_accepted"
    submission_id: str
    request_id: str | None
    content: str
    mode: InboxMode = Field(default="follow_up", exclude_if=is_follow_up)


class RunStarted(_Event):
    """A run begins; its ``inputs`` move from queued to placed in the same commit."""

    type: Literal["run_started"] = "run_started"
    run_id: str
    inputs: list[str]
    budget: Budget


class InputsSteered(_Event):
    """Queued steering inputs placed into the running run at a post-tools boundary.

    Written only in the commit that settles the generation task ``task_id`` (which waited on
    its turn's tools) and creates the next turn, between the two: the inputs become user messages
    after that turn's tool results and before the next model request, in acceptance order, and
    join the run's inputs (its answer answers them too)."""

    type: Literal["inputs_steered"] = "inputs_steered"
    run_id: str
    task_id: str
    inputs: list[str]


class TaskCreated(_Event):
    type: Literal["task_created"] = "task_created"
    task_id: str
    kind: TaskKind
    run_id: str
    phase: str
    data: dict[str, Any] = Field(default_factory=dict)
    call: ToolCall | None = None


class TaskCheckpoint(_Event):
    """Where a task continues: its phase and the data that phase needs (e.g. a retry deadline)."""

    type: Literal["task_checkpoint"] = "task_checkpoint"
    task_id: str
    phase: str
    data: dict[str, Any] = Field(default_factory=dict)


class TaskWaiting(_Event):
    type: Literal["task_waiting"] = "task_waiting"
    task_id: str
    on: list[str]


class ModelRequested(_Event):
    """The pinned request: a crash before its response is committed re-sends exactly this.

    Its window is ``window`` (the applied compaction whose summary stands in for the messages
    before its ``through``; "" for none, left out of the encoding) and the messages up to
    ``cutoff``: a compaction applied later does not change what a re-send contains.

    ``cursor`` is the provider cursor the request continues from (a previous response's id),
    pinned only when the model declared it resumable, so a re-send after a crash carries the
    same cursor or none (docs/architecture.md, 1.7). Absent from the encoding when None."""

    type: Literal["model_requested"] = "model_requested"
    task_id: str
    model: str
    options: dict[str, Any] = Field(default_factory=dict)
    cutoff: int
    attempt: int
    window: str = Field(default="", exclude_if=unset)
    cursor: str | None = Field(default=None, exclude_if=unset)


class ModelCompleted(_Event):
    """A model response. ``cursor`` and ``resumable`` are the provider cursor the response
    returned and whether the provider said a later request (in another process) may continue
    from it; both absent from the encoding when unset."""

    type: Literal["model_completed"] = "model_completed"
    task_id: str
    text: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tokens: int = 0
    cursor: str | None = Field(default=None, exclude_if=unset)
    resumable: bool = Field(default=False, exclude_if=unset)


class PlanUpdated(_Event):
    """The model replaced the agent's plan (written in the commit of its response)."""

    type: Literal["plan_updated"] = "plan_updated"
    task_id: str
    steps: list[str]


class ModelFailed(_Event):
    type: Literal["model_failed"] = "model_failed"
    task_id: str
    message: str
    retryable: bool


class PlannedEdit(BaseModel):
    """A file edit as planned before it runs: the file's content hash now and after the edit.
    Recorded in the intent, so a recovery can tell from the file's current hash whether an
    interrupted edit landed (``durable.tools.content_hash``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    before_hash: str
    after_hash: str


class ToolIntent(_Event):
    """Committed *before* the tool runs: the durable promise that the effect may happen.

    ``compensable``: the tool declared a compensating action, so an abandoned run undoes this
    call; ``pre_image`` is what the tool captured before the effect for its compensation to
    restore (e.g. a file's content), durable before the effect can happen. Both are left out of
    the encoding at their defaults, so logs of tools without compensation are unchanged.
    ``edit`` (a file-edit tool's planned hashes) and ``validates`` (the criterion a validation
    tool checks) are absent from the encoding when unset."""

    type: Literal["tool_intent"] = "tool_intent"
    task_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    policy: Policy
    idempotency_key: str
    epoch: int
    compensable: bool = Field(default=False, exclude_if=unset)
    pre_image: dict[str, Any] | None = Field(default=None, exclude_if=is_none)
    edit: PlannedEdit | None = Field(default=None, exclude_if=unset)
    validates: str | None = Field(default=None, exclude_if=unset)


class ToolResult(_Event):
    type: Literal["tool_result"] = "tool_result"
    task_id: str
    call_id: str
    output: str
    is_error: bool
    source: Literal["executed", "verified", "interrupted", "operator", "aborted", "rejected"]


class FileChanged(_Event):
    """A file-edit call's effect is known: ``revision`` is the conversation's new mutation
    revision (one more than the last). ``after_hash`` None: the edit may or may not have
    landed (an operator resolved it, or the run stopped with it in flight), so the content is
    unknown and any earlier validation is stale."""

    type: Literal["file_changed"] = "file_changed"
    task_id: str
    call_id: str
    path: str
    before_hash: str
    after_hash: str | None
    revision: int


class ValidationRecorded(_Event):
    """A validation tool's verdict on ``criterion``, at the mutation revision its call saw
    (the revision when its intent was committed)."""

    type: Literal["validation_recorded"] = "validation_recorded"
    task_id: str
    call_id: str
    criterion: str
    passed: bool
    revision: int


class ToolInterrupted(_Event):
    """Recovery found an intent without a result; what follows depends on the tool's policy."""

    type: Literal["tool_interrupted"] = "tool_interrupted"
    task_id: str
    call_id: str
    policy: Policy


class ReconciliationRequested(_Event):
    type: Literal["reconciliation_requested"] = "reconciliation_requested"
    task_id: str
    call_id: str
    reason: str


class CompensationIntent(_Event):
    """Committed *before* a compensating action runs (the same protocol as ``ToolIntent``): the
    compensation of call ``call_id`` may now happen, under ``idempotency_key`` (derived from the
    call, so the service dedupes a re-run after a crash) and fencing ``epoch``."""

    type: Literal["compensation_intent"] = "compensation_intent"
    task_id: str
    call_id: str
    idempotency_key: str
    epoch: int


class CompensationResult(_Event):
    """The compensating action of call ``call_id`` ran (or failed: ``is_error``)."""

    type: Literal["compensation_result"] = "compensation_result"
    task_id: str
    call_id: str
    output: str
    is_error: bool


class TaskSettled(_Event):
    type: Literal["task_settled"] = "task_settled"
    task_id: str
    outcome: TaskOutcome
    detail: str = ""


class RunStopped(_Event):
    type: Literal["run_stopped"] = "run_stopped"
    run_id: str
    reason: StopReason
    detail: str = ""


class InputSettled(_Event):
    type: Literal["input_settled"] = "input_settled"
    submission_id: str
    status: Literal["done", "unanswered"]
    answer: str | None = None
    reason: str | None = None


class CompactionStarted(_Event):
    """The intent of a compaction (docs/architecture.md, 1.8): task ``task_id`` asks the model
    to summarise the context of the first ``through`` messages, as seen through ``window`` (the
    compaction applied when it started, "" for none). ``prefix_digest`` is the sha256 of that
    context's canonical JSON; ``requested_by`` is the generation turn that waits on it; the
    summarisation request is pinned by this event (model ``model``, attempt 1)."""

    type: Literal["compaction_started"] = "compaction_started"
    compaction_id: str
    task_id: str
    requested_by: str
    run_id: str
    model: str
    through: int
    window: str = ""
    prefix_digest: str
    tokens: int
    reason: Literal["budget", "context_exceeded"]


class CompactionApplied(_Event):
    """The summary of compaction ``compaction_id`` replaces the prefix its intent named, from
    this commit on. Applied only at a turn boundary, by the incarnation (lease epoch) that
    started it, while the prefix is unchanged (``reduce`` refuses it otherwise)."""

    type: Literal["compaction_applied"] = "compaction_applied"
    compaction_id: str
    through: int
    prefix_digest: str
    summary: str


class CompactionSettled(_Event):
    """A compaction that ends without being applied: ``stale`` (its intent was written by an
    earlier incarnation, so its summary was lost with it, or the prefix changed), ``failed``
    (the model refused the summarisation request), ``aborted`` (its run stopped first)."""

    type: Literal["compaction_settled"] = "compaction_settled"
    compaction_id: str
    outcome: Literal["stale", "failed", "aborted"]
    detail: str = ""


class LeaseAcquired(_Event):
    type: Literal["lease_acquired"] = "lease_acquired"
    owner_id: str
    epoch: int
    expires_at_s: float


Event = Annotated[
    InputAccepted
    | RunStarted
    | InputsSteered
    | TaskCreated
    | TaskCheckpoint
    | TaskWaiting
    | ModelRequested
    | ModelCompleted
    | ModelFailed
    | PlanUpdated
    | ToolIntent
    | ToolResult
    | FileChanged
    | ValidationRecorded
    | ToolInterrupted
    | ReconciliationRequested
    | CompensationIntent
    | CompensationResult
    | TaskSettled
    | RunStopped
    | InputSettled
    | LeaseAcquired
    | CompactionStarted
    | CompactionApplied
    | CompactionSettled,
    Field(discriminator="type"),
]


class EventRecord(BaseModel):
    """One line of the log. ``batch_index`` is the record's position in its commit and
    ``last_in_batch`` marks the record that completes it: together they let a reader tell a torn
    last commit from damage to an earlier one."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = SCHEMA_VERSION
    conversation_id: str
    sequence: int
    event_id: str
    recorded_at_s: float
    batch: str
    batch_index: int = 0
    last_in_batch: bool
    owner_id: str
    epoch: int
    event: Event
    checksum: str = ""

    def body(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"checksum"})

    def compute_checksum(self) -> str:
        return sha256_hex(canonical_json(self.body()))

    def sealed(self) -> EventRecord:
        """This record with its checksum. The canonical body is serialised once and reused for
        the line (``to_line``) and the verification (``verify``) of the sealed record."""
        text = canonical_json(self.body())
        checksum = sha256_hex(text)
        record = self.model_copy(update={"checksum": checksum})
        RECORD_LINES.put(record, _line_with_checksum(text, checksum))
        if record.schema_version == SCHEMA_VERSION:
            RECORDS_VERIFIED.put(record, True)
        return record

    def verify(self) -> bool:
        """Whether the checksum matches; computed once per record (records are frozen), so a
        record read once and then checked by the store, the journal and an oracle is
        serialised once."""
        if RECORDS_VERIFIED.get(self):
            return True
        ok = self.schema_version == SCHEMA_VERSION and self.checksum == self.compute_checksum()
        if ok:
            RECORDS_VERIFIED.put(self, True)
        return ok

    def to_line(self) -> str:
        """The record's canonical JSON (one line of the log, without its newline)."""
        line = RECORD_LINES.get(self)
        return line if line is not None else canonical_json(self.model_dump(mode="json"))


# Keys of a record's canonical JSON that sort before ``checksum``: ``batch`` (a string) and
# ``batch_index`` (an integer); ``conversation_id`` is the first key after it.
_AFTER_CHECKSUM = ',"conversation_id":'


def _line_with_checksum(body_text: str, checksum: str) -> str:
    """The canonical JSON of a record from that of its body: ``checksum`` inserted where sorted
    keys put it, before ``conversation_id``. The first ``,"conversation_id":`` is that key:
    canonical JSON escapes every quote inside a string, so ``,"`` never occurs in one, and the
    only keys before it are ``batch`` and ``batch_index``. Byte-identical to
    ``canonical_json(record.model_dump(mode="json"))`` (tests/durable/test_events_memo.py)."""
    at = body_text.index(_AFTER_CHECKSUM)
    return f'{body_text[:at]},"checksum":{canonical_json(checksum)}{body_text[at:]}'


RECORD_ADAPTER: TypeAdapter[EventRecord] = TypeAdapter(EventRecord)


def remember_written(line: str | bytes) -> None:
    """Parse and verify a line the writer just stored, exactly as a reader of those bytes
    would: the next read of the line -- a recovery, an audit, or a forked sweep child, which
    inherits this memo -- then finds it parsed and verified instead of redoing both."""
    try:
        parse_record(line).verify()
    except ValueError:
        pass  # a line that does not parse is the reader's to report, as ever


def parse_record(line: str | bytes) -> EventRecord:
    """Parse one JSON line; raises ``ValueError`` (pydantic's or json's) on malformed input.
    Memoised by the line's exact content (a line that fails to parse is not remembered)."""
    known = PARSED_LINES.get(line)
    if known is not None:
        return cast(EventRecord, known)  # only records are put here
    record = RECORD_ADAPTER.validate_python(parse_json(line))
    PARSED_LINES.put(line, record)
    return record
