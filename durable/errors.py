"""Every error ``durable`` raises on purpose, under one root: ``DurableError``.

A host can tell the runtime's own refusals from bugs and from the outside world's failures with
one ``except DurableError``, and each subclass says what happened and what to do about it. The
classes are re-exported where they were first defined (``durable.store.base``,
``durable.journal``, ``durable.runtime``, ``durable.model``, ``durable.tools``,
``durable.state``, ``durable.inspect``), so existing imports keep working; this module is their
one definition.

The tree::

    DurableError
    +-- StoreError            a store refused or failed an operation on purpose
    |   +-- StaleLease        the writer's lease is not the stored one (a zombie)
    |   +-- LeaseHeld         another owner holds an unexpired lease
    |   +-- SequenceConflict  the batch does not continue the log
    |   +-- StoreBusy         another process held the store's lock too long
    |   +-- CorruptStore      committed data fails verification
    +-- Fenced                this process lost the conversation's lease
    +-- ConversationBusy      a reject-mode input met an active run
    +-- ModelError            the model failed (retryable or not)
    +-- ToolError             a tool failed: the call's error result
    +-- InvariantViolation    an event cannot follow the state it is applied to
    +-- UsageError            ``python -m durable inspect`` was pointed at no store

``InvariantViolation`` is deliberately *not* an ``AssertionError``: it reports a wrong log or a
runtime bug in every interpreter mode (``python -O`` strips ``assert`` statements, not raises),
and an ``except AssertionError`` meant for a test's own assertions does not swallow it.
"""

from __future__ import annotations


class DurableError(Exception):
    """The root of every error ``durable`` raises on purpose. Catch a subclass to handle one
    case; catch this to tell the runtime's refusals from anything else (a bug, an ``OSError``
    of the host, a tool's own exception)."""


# -- stores --------------------------------------------------------------------------------------


class StoreError(DurableError):
    """Base of every error a store raises on purpose. A rejected operation wrote nothing."""


class StaleLease(StoreError):
    """Raised by a store's append, checkpoint save or renewal when the writer's (owner, epoch) is
    not the stored lease: another owner took the conversation over. The writer is a zombie and
    must stop writing; the journal turns this into ``Fenced``."""


class LeaseHeld(StoreError):
    """Raised by ``acquire_lease`` while another owner holds an unexpired lease on the
    conversation. Nothing was written; wait until ``expires_at_s`` (the holder's expiry, on the
    store's clock) and try again. ``Journal.open`` does so up to ``lease_wait_limit`` times, then
    raises it (``expires_at_s`` NaN): the holder is alive and keeps renewing."""

    def __init__(self, message: str, *, expires_at_s: float) -> None:
        super().__init__(message)
        self.expires_at_s = expires_at_s


class SequenceConflict(StoreError):
    """Raised by ``append`` when ``expected_sequence`` is not the log's next sequence (or the
    batch's sequences do not continue it). Nothing was written. The writer's idea of the log is
    stale: a bug in a single-writer runtime, since the lease makes it the only writer; re-read
    the log before writing again."""


class StoreBusy(StoreError):
    """Raised when another process held the store's lock longer than the store waits (e.g. a
    worker stopped by the kernel inside a transaction). Nothing was written; the caller may try
    again later."""


class CorruptStore(StoreError):
    """Raised when committed data fails verification: a bad checksum, a gap, an unparseable
    committed record, checkpoint or lease, or a log that lost commits a checkpoint proves were
    acknowledged. The message names the damaged file or row, and the store changed nothing it
    found: stop and hand the evidence to an operator (``python -m durable inspect``) rather than
    retry or repair."""


# -- the runtime ---------------------------------------------------------------------------------


class Fenced(DurableError):
    """Raised by the journal (a commit, a renewal, the check before a tool runs, an open that
    was overtaken) when this process lost the conversation's lease to a newer epoch: its work
    on the conversation stops and it writes nothing more. The new owner resumes the
    conversation; do not retry the write -- open the conversation again, which waits for the
    lease and recovers whatever the new owner committed."""


class ConversationBusy(DurableError):
    """Raised by ``Conversation.submit`` when a ``reject``-mode input arrives while a run is
    active: it was refused and nothing was written, so the same request id may be sent again
    later (when idle it is accepted)."""

    def __init__(self, conversation_id: str, run_id: str, request_id: str | None) -> None:
        request = f" (request {request_id})" if request_id is not None else ""
        super().__init__(
            f"{conversation_id}: busy with run {run_id}; reject-mode input{request} refused, "
            f"nothing written"
        )
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.request_id = request_id


class ModelError(DurableError):
    """Raised by a ``ModelDriver`` when the model failed. ``retryable`` errors back off
    (``retry_after_s`` if given); others stop the run with ``model_error`` -- except
    ``context_exceeded`` (the request was too long for the model), after which the turn compacts
    the conversation and tries again (``durable.compaction``)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after_s: float | None = None,
        context_exceeded: bool = False,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.context_exceeded = context_exceeded


class ToolError(DurableError):
    """Raised by a tool to fail its call: the failure becomes the call's (error) result and the
    run goes on (the model sees the error). Any other exception of a tool is treated the same,
    except a ``CorruptStore`` (``durable.tasks.NOT_A_TOOL_RESULT``)."""


class InvariantViolation(DurableError):
    """Raised by ``reduce``/``apply`` at the first event that cannot follow the state it is
    applied to, and by the scheduler when a task makes no progress: the log or the runtime is
    wrong. Not recoverable by retrying; keep the log as evidence (``python -m durable
    inspect`` replays it and names the event)."""


class UsageError(DurableError):
    """Raised by ``python -m durable inspect`` when the path is missing or is not a store: exit
    status 2. Point it at a ``FileStore`` directory or a ``SQLiteStore`` file."""


__all__ = [
    "ConversationBusy",
    "CorruptStore",
    "DurableError",
    "Fenced",
    "InvariantViolation",
    "LeaseHeld",
    "ModelError",
    "SequenceConflict",
    "StaleLease",
    "StoreBusy",
    "StoreError",
    "ToolError",
    "UsageError",
]
