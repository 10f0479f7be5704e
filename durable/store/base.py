"""The store contract shared by ``FileStore`` and ``SQLiteStore``, and its typed errors.

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
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from durable.codec import (
    CHECKPOINT_TEXTS,
    CHECKPOINTS_VERIFIED,
    canonical_json,
    dump_state,
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
from durable.events import SCHEMA_VERSION, EventRecord, parse_record
from durable.state import State


class Lease(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    conversation_id: str
    owner_id: str
    epoch: int
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
    "Checkpoint",
    "CorruptStore",
    "Lease",
    "LeaseHeld",
    "SequenceConflict",
    "StaleLease",
    "Store",
    "StoreBusy",
    "StoreError",
    "granted_lease",
    "make_checkpoint",
    "parsed_checkpoints",
    "refused_renewal",
    "renewed_lease",
    "verified_rows",
]


def make_checkpoint(state: State, saved_at_s: float) -> Checkpoint:
    body = {
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


def parsed_checkpoints(place: str, conversation_id: str, texts: list[str]) -> list[Checkpoint]:
    """A database store's checkpoint rows, newest first, as stored (the caller verifies them). A
    transaction writes a row whole, so one that does not parse is damage: ``CorruptStore``."""
    out: list[Checkpoint] = []
    for text in texts:
        try:
            out.append(Checkpoint.model_validate(parse_json(text)))
        except ValueError as exc:
            raise CorruptStore(
                f"{place}: checkpoints row of {conversation_id} does not parse: "
                f"{str(exc).splitlines()[0]}"
            ) from exc
    out.sort(key=lambda cp: cp.through_sequence, reverse=True)
    return out


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
