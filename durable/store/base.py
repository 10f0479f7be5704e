"""The store contract shared by ``FileStore``, ``SQLiteStore`` and ``PostgresStore``: the protocol,
the checks every store runs (one definition each), and its typed errors.

A store keeps, per conversation: an append-only log of sealed ``EventRecord``s, up to two
checkpoints, and one lease. Every mutation is fenced: an append or checkpoint carries the writer's
``owner_id`` and lease ``epoch``, and a store rejects it with ``StaleLease`` unless that is the
current lease, and with ``SequenceConflict`` unless ``expected_sequence`` is the next sequence. A
rejected operation writes nothing.

Reads verify: ``read_records`` returns only complete batches of records whose checksums verify, in
contiguous sequence order, and raises ``CorruptStore`` if a *committed* record (one followed by more
data) is damaged. A damaged *tail* (a torn last write) is what a crash leaves, not corruption: with
``repair=True`` (the lease holder recovering) it is truncated, never trusted.

The typed errors are defined in ``durable.errors`` (under ``DurableError``) and re-exported here.
``SQLCursor`` is what both database stores read their drivers' rows through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from durable.codec import (
    CHECKPOINT_TEXTS,
    CHECKPOINTS_VERIFIED,
    canonical_json,
    parse_json,
    sha256_hex,
)
from durable.errors import (
    CorruptStore,
    LeaseHeld,
    SequenceConflict,
    StaleLease,
    StoreBusy,
    StoreError,
)
from durable.events import SCHEMA_VERSION, EventRecord, parse_record, remember_written
from durable.state import State
from durable.state_model import dump_state


class Lease(BaseModel):
    """The lease on record. An owner is never empty and epochs start at 1 (``granted_lease``):
    a stored lease outside that range is damage, and every store refuses it as it reads it
    (``CorruptStore``) instead of granting the next epoch over it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    conversation_id: str
    owner_id: str = Field(min_length=1)
    epoch: int = Field(ge=1)
    expires_at_s: float


class Checkpoint(BaseModel):
    """Reduced state through ``through_sequence``; ``checksum`` covers everything else."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = SCHEMA_VERSION
    conversation_id: str
    through_sequence: int
    saved_at_s: float
    state: dict[str, Any]
    checksum: str

    def compute_checksum(self) -> str:
        return sha256_hex(canonical_json(self.model_dump(mode="json", exclude={"checksum"})))

    def verify(self) -> bool:
        """Whether the checksum matches; once per checkpoint (frozen), as for records."""
        if CHECKPOINTS_VERIFIED.get(self):
            return True
        ok = self.schema_version == SCHEMA_VERSION and self.checksum == self.compute_checksum()
        if ok:
            CHECKPOINTS_VERIFIED.put(self, True)
        return ok

    def to_text(self) -> str:
        """The checkpoint's canonical JSON, as both stores write it; for a checkpoint from
        ``make_checkpoint`` the body serialised for its checksum is reused, not redone."""
        text = CHECKPOINT_TEXTS.get(self)
        return text if text is not None else canonical_json(self.model_dump(mode="json"))

    def to_state(self) -> State:
        return State.model_validate(self.state)


__all__ = [
    "Append",
    "Checkpoint",
    "CorruptStore",
    "Lease",
    "LeaseHeld",
    "Row",
    "SQLCursor",
    "SQLValue",
    "SequenceConflict",
    "StaleLease",
    "Store",
    "StoreBusy",
    "StoreError",
    "check_batch",
    "check_conversation_id",
    "check_fence",
    "check_lease_follows_log",
    "check_recoverable_rows",
    "check_sequences",
    "checkpoint_usable",
    "granted_lease",
    "is_conversation_id",
    "lost_commits",
    "make_checkpoint",
    "parsed_checkpoints",
    "refused_renewal",
    "renewed_lease",
    "verified_rows",
]


def make_checkpoint(state: State, saved_at_s: float) -> Checkpoint:
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "conversation_id": state.conversation_id,
        "through_sequence": state.last_sequence,
        "saved_at_s": float(saved_at_s),  # the model stores a float: hash the same value
        "state": dump_state(state),
    }
    text = canonical_json(body)
    checksum = sha256_hex(text)
    checkpoint = Checkpoint(**body, checksum=checksum)
    # Sorted keys put ``checksum`` first (before ``conversation_id``, the body's first key).
    if text.startswith('{"conversation_id":'):
        CHECKPOINT_TEXTS.put(checkpoint, f'{{"checksum":{canonical_json(checksum)},{text[1:]}')
    CHECKPOINTS_VERIFIED.put(checkpoint, True)
    return checkpoint


# -- the contract's checks, one definition for every store -----------------------------------------

_CONVERSATION_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def is_conversation_id(name: str) -> bool:
    """Whether ``name`` is a valid conversation id (``check_conversation_id`` without raising):
    how ``FileStore`` tells a conversation's directory from anything else in its root."""
    return (
        isinstance(name, str)
        and _CONVERSATION_ID.fullmatch(name) is not None
        and name not in (".", "..")
    )


def check_conversation_id(conversation_id: str) -> str:
    """Reject ids that could escape the store directory or collide (``..``, ``/``, empty, huge).

    Shared by every store so a conversation id valid for one is valid for the others (a file
    store names a directory after it).
    """
    if not is_conversation_id(conversation_id):
        pattern = "" if conversation_id in (".", "..") else ": must match [A-Za-z0-9_.-]"
        raise ValueError(f"invalid conversation id {conversation_id!r}{pattern}")
    return conversation_id


def check_batch(
    conversation_id: str, records: list[EventRecord], owner_id: str, epoch: int
) -> None:
    """Caller bugs, not store states: an append must be one well-formed, sealed batch.

    Checked before anything is written so a malformed batch can never reach the log (a reader
    would otherwise see an incomplete batch and treat committed data as a torn tail).
    """
    if not records:
        raise ValueError("append needs at least one record")
    batch = records[0].batch
    for i, record in enumerate(records):
        where = f"record {i} (sequence {record.sequence})"
        if record.conversation_id != conversation_id:
            raise ValueError(f"{where} belongs to {record.conversation_id}, not {conversation_id}")
        if not record.verify():
            raise ValueError(f"{where} is not sealed or its checksum does not verify")
        if record.owner_id != owner_id or record.epoch != epoch:
            raise ValueError(
                f"{where} written as ({record.owner_id}, epoch {record.epoch}) "
                f"but appended as ({owner_id}, epoch {epoch})"
            )
        if record.batch != batch:
            raise ValueError(f"{where} is in batch {record.batch}, the append is batch {batch}")
        if record.last_in_batch != (i == len(records) - 1):
            raise ValueError(f"{where}: only the last record of a batch has last_in_batch")


def check_sequences(records: list[EventRecord], expected_sequence: int, last_sequence: int) -> None:
    """The optimistic-concurrency check: the batch must continue the log exactly
    (``SequenceConflict``). Each store calls it inside its critical section, on the last
    sequence it read there."""
    if expected_sequence != last_sequence + 1:
        raise SequenceConflict(
            f"expected_sequence {expected_sequence}, but the next sequence is {last_sequence + 1}"
        )
    for i, record in enumerate(records):
        if record.sequence != expected_sequence + i:
            raise SequenceConflict(
                f"record {i} has sequence {record.sequence}, expected {expected_sequence + i}"
            )


def check_fence(stored: Lease | None, conversation_id: str, *, owner_id: str, epoch: int) -> None:
    """The fence: ``StaleLease`` unless (``owner_id``, ``epoch``) is ``stored``, the lease on
    record (None: there is none). Every mutation but an acquisition passes it.

    It is only a fence if ``stored`` is read inside the critical section that also writes: each
    store calls it from its own ``_fence`` method, under the conversation directory's lock
    (``FileStore``), inside ``BEGIN IMMEDIATE`` (``SQLiteStore``), or on the lease row locked
    ``FOR UPDATE`` (``PostgresStore``). Read outside, a takeover between the check and the write
    lets a zombie's write in."""
    if stored is None:
        raise StaleLease(f"{conversation_id}: no lease; {owner_id} (epoch {epoch}) is fenced")
    if stored.owner_id != owner_id or stored.epoch != epoch:
        raise StaleLease(
            f"{conversation_id}: lease is ({stored.owner_id}, epoch {stored.epoch}); "
            f"{owner_id} (epoch {epoch}) is fenced"
        )


class Append:
    """One append's batch: checked before anything is written, remembered once it is.

    Every store's ``append`` runs the same steps around its own critical section:
    ``Append.checked`` first (a bad conversation id or a malformed, unsealed or foreign batch is
    a caller bug, ``ValueError``, before anything is locked or written); inside the section, the
    store's ``_fence`` (``check_fence``) and ``check_sequences`` on the log it reads there, then
    the write of ``lines``; after the write, ``stored`` -- the written-lines memo.
    """

    def __init__(
        self, conversation_id: str, records: list[EventRecord], *, owner_id: str, epoch: int
    ) -> None:
        self.conversation_id = conversation_id
        self.records = records
        self.owner_id = owner_id
        self.epoch = epoch
        #: The records' lines (canonical JSON, no newline): a row's text, a file's line.
        self.lines = [record.to_line() for record in records]

    @classmethod
    def checked(
        cls, conversation_id: str, records: list[EventRecord], *, owner_id: str, epoch: int
    ) -> Append:
        check_conversation_id(conversation_id)
        check_batch(conversation_id, records, owner_id, epoch)
        return cls(conversation_id, records, owner_id=owner_id, epoch=epoch)

    def stored(self, *, encoded: list[bytes] | None = None) -> None:
        """After the write: each line, in the form a reader gets it back -- a row's text, or
        ``encoded``, the bytes a reader slices out of a file -- is parsed and verified now,
        exactly as that reader would (``remember_written``), so the next read (a recovery, an
        audit, a forked sweep child, which inherits the memo) finds it done."""
        for line in self.lines if encoded is None else encoded:
            remember_written(line)


class Store(Protocol):
    """What the runtime needs from durable storage. Both stores implement exactly this."""

    async def list_conversations(self) -> list[str]: ...

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, *, repair: bool = False
    ) -> list[EventRecord]: ...

    async def append(
        self,
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None: ...

    async def load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        """Newest first; returns what is stored, verified or not (the caller verifies)."""
        ...

    async def save_checkpoint(
        self, checkpoint: Checkpoint, *, owner_id: str, epoch: int
    ) -> None: ...

    async def acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease: ...

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease: ...

    async def release_lease(self, lease: Lease) -> None: ...

    async def current_lease(self, conversation_id: str) -> Lease | None: ...

    def describe(self) -> str:
        """One line naming the store and its durability mode (for reports)."""
        ...


#: A database row: its cells have the types of the store's schema (``_SCHEMA`` in each database
#: store), which no driver knows.
Row = tuple[Any, ...]
#: A value a statement's parameters bind.
SQLValue = int | float | str | bytes | None


class SQLCursor(Protocol):
    """The rows of one statement, as both database stores' drivers return them."""

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...


def verified_rows(
    place: str, conversation_id: str, start: int, rows: list[tuple[int, str]]
) -> list[EventRecord]:
    """A database store's event rows after sequence ``start``, parsed and verified: a gap, a row
    that does not parse, a bad checksum, a row holding another record, or a log that ends inside
    a batch is ``CorruptStore`` naming ``place`` (the database) and the row. A database commits a
    batch whole, so unlike a file's torn tail nothing here is a crash's leftover to cut away."""
    out: list[EventRecord] = []
    expected = start + 1
    for sequence, text in rows:
        where = f"{place}: events row ({conversation_id}, {sequence})"
        if sequence != expected:
            raise CorruptStore(f"{where}: sequence gap, expected {expected}")
        try:
            record = parse_record(text)
        except ValueError as exc:
            raise CorruptStore(f"{where}: record does not parse: {exc}") from exc
        if not record.verify():
            raise CorruptStore(f"{where}: checksum mismatch")
        if record.sequence != sequence or record.conversation_id != conversation_id:
            raise CorruptStore(
                f"{where}: holds ({record.conversation_id}, {record.sequence}) instead"
            )
        out.append(record)
        expected += 1
    if out and not out[-1].last_in_batch:
        raise CorruptStore(
            f"{place}: conversation {conversation_id} ends inside batch {out[-1].batch}"
        )
    return out


def parsed_checkpoints(
    place: str, conversation_id: str, rows: list[tuple[int, str]]
) -> list[Checkpoint]:
    """A database store's checkpoint rows (``through_sequence``, body), newest first, as stored
    (the caller verifies them). A transaction writes a row whole, so one that does not parse, or
    whose key is not the sequence its body holds, is damage: ``CorruptStore``. The key is
    metadata no checksum covers: trusted, a key beyond the log would "prove" commits the body
    never claimed."""
    out: list[Checkpoint] = []
    for through, text in rows:
        where = f"{place}: checkpoints row ({conversation_id}, {through})"
        try:
            checkpoint = Checkpoint.model_validate(parse_json(text))
        except ValueError as exc:
            raise CorruptStore(f"{where} does not parse: {str(exc).splitlines()[0]}") from exc
        if checkpoint.through_sequence != through:
            raise CorruptStore(
                f"{where} holds a checkpoint through {checkpoint.through_sequence}: its key "
                "is damaged"
            )
        out.append(checkpoint)
    out.sort(key=lambda cp: cp.through_sequence, reverse=True)
    return out


def checkpoint_usable(checkpoint: Checkpoint, conversation_id: str) -> bool:
    """Whether recovery may start from ``checkpoint`` (``durable.journal.usable_checkpoint``
    builds its state when it may): its checksum verifies, it is this conversation's, and its
    state ends where it says. Cheap (no state is built), so a store can tell, before it writes
    anything, which records a recovery will read."""
    return (
        checkpoint.verify()
        and checkpoint.conversation_id == conversation_id
        and checkpoint.state.get("last_sequence") == checkpoint.through_sequence
    )


def lost_commits(place: str, conversation_id: str, *, through: int, last_sequence: int) -> None:
    """A database store's check that no checkpoint lies beyond its log: a checkpoint is saved
    only after the commits it covers, so one through ``through`` over a log that ends at
    ``last_sequence`` proves commits were lost (``CorruptStore`` naming them)."""
    if through > last_sequence:
        raise CorruptStore(
            f"{place}: events of {conversation_id} end at sequence {last_sequence}, but a "
            f"checkpoint proves commits through {through} were acknowledged: sequences "
            f"{last_sequence + 1}..{through} are lost (nothing was repaired or deleted)"
        )


def check_lease_follows_log(
    stored: Lease, last: EventRecord, *, lease_place: str, log_place: str
) -> None:
    """Refuse to grant the next epoch over a stored lease that went back: every record carries
    the epoch of the lease it was written under, and a lease is stored before anything is
    written under it, so a log whose last record has a newer epoch than the stored lease means
    the lease record was reset (an operator, a restored backup, damage). Granting over it would
    hand out an epoch the log already holds; refusing *before* the new lease is written keeps
    the evidence, so every retry refuses the same way."""
    if last.epoch > stored.epoch:
        raise CorruptStore(
            f"{lease_place} holds epoch {stored.epoch}, but {log_place} holds commits of epoch "
            f"{last.epoch} (sequence {last.sequence}): the lease went back (nothing was "
            "written)"
        )


def check_recoverable_rows(
    place: str,
    conversation_id: str,
    *,
    stored: Lease | None,
    last_row: tuple[int, str] | None,
    checkpoint_rows: list[tuple[int, str]],
    rows_after: Callable[[int], list[tuple[int, str]]],
) -> None:
    """Everything a database store's recovery would refuse, checked inside an acquisition's
    transaction *before* it writes the lease, so a refusal writes nothing and the next attempt
    refuses the same way: the stored lease against the log's last record
    (``check_lease_follows_log``), the checkpoint rows (``parsed_checkpoints``), no checkpoint
    beyond the log (``lost_commits``), and the rows recovery will read -- those after the
    newest usable checkpoint (``checkpoint_usable``), read through ``rows_after(sequence)``
    (``verified_rows``) -- and, first, a lease row missing while the events table holds
    commits: the row is written before the first commit and never deleted, so it was lost, and
    epoch 1 again would let fencing go back."""
    last_sequence = 0
    if last_row is not None:
        if stored is None:
            raise CorruptStore(
                f"{place}: leases row ({conversation_id}) is missing, but the events table "
                "holds its commits (nothing was written)"
            )
        last_sequence = last_row[0]
        (last,) = verified_rows(place, conversation_id, last_sequence - 1, [last_row])
        check_lease_follows_log(
            stored,
            last,
            lease_place=f"{place}: leases row ({conversation_id})",
            log_place="the events table",
        )
    checkpoints = parsed_checkpoints(place, conversation_id, checkpoint_rows)
    newest = checkpoints[0].through_sequence if checkpoints else 0
    lost_commits(place, conversation_id, through=newest, last_sequence=last_sequence)
    usable = (cp for cp in checkpoints if checkpoint_usable(cp, conversation_id))
    start = max(next((cp.through_sequence for cp in usable), 0) - 1, 0)
    verified_rows(place, conversation_id, start, rows_after(start))


def granted_lease(
    previous: Lease | None, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
) -> Lease:
    """The lease an acquisition grants over ``previous`` (the stored lease, None if there is none
    yet): ``LeaseHeld`` while another owner holds it unexpired, else the next epoch, so fencing
    tokens only grow. One rule for every store; each reads and writes the lease under its own
    exclusion (a file lock, a database transaction)."""
    if previous is not None and previous.owner_id != owner_id and previous.expires_at_s > now_s:
        raise LeaseHeld(
            f"{conversation_id}: held by {previous.owner_id} (epoch {previous.epoch}) "
            f"until {previous.expires_at_s}",
            expires_at_s=previous.expires_at_s,
        )
    return Lease(
        conversation_id=conversation_id,
        owner_id=owner_id,
        epoch=(previous.epoch + 1) if previous is not None else 1,
        expires_at_s=now_s + ttl_s,
    )


def renewed_lease(stored: Lease | None, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
    """``lease`` extended by ``ttl_s`` if it is still the stored one (same owner and epoch);
    anything else is ``StaleLease``: its holder was fenced and must stop writing."""
    if stored is None or (stored.owner_id, stored.epoch) != (lease.owner_id, lease.epoch):
        raise refused_renewal(lease, stored)
    return stored.model_copy(update={"expires_at_s": now_s + ttl_s})


def refused_renewal(lease: Lease, stored: Lease | None) -> StaleLease:
    """The ``StaleLease`` of a renewal of ``lease`` while ``stored`` is the lease on record."""
    held = f"({stored.owner_id}, epoch {stored.epoch})" if stored is not None else "none"
    return StaleLease(
        f"{lease.conversation_id}: cannot renew ({lease.owner_id}, epoch {lease.epoch}); "
        f"the stored lease is {held}"
    )
