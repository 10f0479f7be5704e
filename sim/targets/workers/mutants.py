"""Deliberately broken stores for the fleet mode: each is a bug only several real processes can
show, and ``durable-sim workers --mutant NAME`` (and the fleet tests) must catch it.

A mutant is applied inside each worker process before it opens its store (a monkeypatch of the
store class), never in the parent that judges.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from durable.events import EventRecord
from durable.store.base import Lease, check_batch, check_conversation_id, check_sequences
from durable.store.file import FileStore
from durable.store.postgres import PostgresStore
from durable.store.sqlite import SQLiteStore


def _file_lock_dropped() -> None:
    """``FileStore``'s read-modify-write of ``lease.json`` without the OS lock: two workers that
    acquire at the same moment both read the old lease and both get the next epoch."""

    @contextlib.contextmanager
    def no_lock(self: FileStore, conversation_id: str) -> Iterator[None]:
        yield

    FileStore._exclusive = no_lock  # type: ignore[method-assign]  # the planted bug itself


# A renewal that writes the caller's lease back without comparing it with the stored one: a
# worker paused past its lease renews it on waking, over the new owner's. One per store class
# (the simulator's Postgres tests plant the Postgres one too).


def file_renew_ignoring_epoch(
    self: FileStore, lease: Lease, *, ttl_s: float, now_s: float
) -> Lease:
    renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
    self._write_lease(renewed)
    return renewed


async def sqlite_renew_ignoring_epoch(
    self: SQLiteStore, lease: Lease, *, ttl_s: float, now_s: float
) -> Lease:
    renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})

    def body(conn: Any) -> Lease:
        self._put_lease(conn, renewed)
        return renewed

    return await self._run("sqlite.lease", body, write=True)


async def postgres_renew_ignoring_epoch(
    self: PostgresStore, lease: Lease, *, ttl_s: float, now_s: float
) -> Lease:
    renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
    update = (
        "UPDATE {ns}.leases SET owner_id = %s, epoch = %s, expires_at_s = %s "
        "WHERE conversation_id = %s"
    )

    def body(conn: Any) -> Lease:
        values = (renewed.owner_id, renewed.epoch, renewed.expires_at_s, lease.conversation_id)
        conn.execute(self._sql(update), values)
        return renewed

    return await self._run("postgres.lease", body, write=True)


def _renew_ignores_epoch() -> None:
    FileStore._renew_lease = file_renew_ignoring_epoch  # type: ignore[method-assign]  # the planted bug itself
    SQLiteStore.renew_lease = sqlite_renew_ignoring_epoch  # type: ignore[method-assign]  # the planted bug itself
    PostgresStore.renew_lease = postgres_renew_ignoring_epoch  # type: ignore[method-assign]  # the planted bug itself


# The fence checked outside the append's transaction (its own statement, or outside the OS lock)
# and the batch written in the next: a takeover between the two lets a zombie's append in. The
# sequence check stays with the write, as a careful author would keep it, so only a write that
# lands in the new owner's window between its grant and its first append gets through -- the
# window the fleet's fence pause opens (``sim.targets.workers.takeover``).


async def postgres_fence_outside_transaction(
    self: PostgresStore,
    conversation_id: str,
    records: list[EventRecord],
    *,
    expected_sequence: int,
    owner_id: str,
    epoch: int,
) -> None:
    check_conversation_id(conversation_id)
    check_batch(conversation_id, records, owner_id, epoch)

    def fence() -> None:
        # The connection is in autocommit: the lease row's lock ends with this one statement.
        self._fence(self._connection(), conversation_id, owner_id, epoch)

    async with self._lock:
        await self._blocking.run("postgres.fence", fence)
    await self._run(
        "postgres.commit",
        lambda conn: self._insert_batch(conn, conversation_id, records, expected_sequence),
        write=True,
    )


async def sqlite_fence_outside_transaction(
    self: SQLiteStore,
    conversation_id: str,
    records: list[EventRecord],
    *,
    expected_sequence: int,
    owner_id: str,
    epoch: int,
) -> None:
    check_conversation_id(conversation_id)
    check_batch(conversation_id, records, owner_id, epoch)

    def fence() -> None:
        self._fence(self._connection(), conversation_id, owner_id, epoch)  # autocommit read

    async with self._lock:
        await self._blocking.run("sqlite.fence", fence)

    def write(conn: Any) -> None:
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(sequence), 0) FROM events WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchone()
        check_sequences(records, expected_sequence, last)
        conn.executemany(
            "INSERT INTO events (conversation_id, sequence, record) VALUES (?, ?, ?)",
            [(conversation_id, r.sequence, r.to_line()) for r in records],
        )

    await self._run("sqlite.commit", write, write=True)


async def file_fence_outside_lock(
    self: FileStore,
    conversation_id: str,
    records: list[EventRecord],
    *,
    expected_sequence: int,
    owner_id: str,
    epoch: int,
) -> None:
    check_batch(conversation_id, records, owner_id, epoch)
    self._fence(conversation_id, owner_id, epoch)  # outside the lock
    with self._exclusive(conversation_id):
        path = self._events_path(conversation_id)
        last = 0
        if self._fs.exists(path):
            scan = self._scan(conversation_id, path)
            self._settle(conversation_id, path, scan, repair=True)
            last = scan.last_sequence
        check_sequences(records, expected_sequence, last)
        self._fs.append(path, b"".join(r.to_line().encode("utf-8") + b"\n" for r in records))
        self._fs.fsync(path)
        self._cache.pop(conversation_id, None)  # the next append rescans


def _fence_outside_transaction() -> None:
    FileStore.append = file_fence_outside_lock  # type: ignore[method-assign]  # the planted bug itself
    SQLiteStore.append = sqlite_fence_outside_transaction  # type: ignore[method-assign]  # the planted bug itself
    PostgresStore.append = postgres_fence_outside_transaction  # type: ignore[method-assign]  # the planted bug itself


MUTANTS: dict[str, tuple[str, Callable[[], None]]] = {
    "file-lock-dropped": ("the file store's lease without its OS lock", _file_lock_dropped),
    "renew-ignores-epoch": ("a lease renewal that does not compare epochs", _renew_ignores_epoch),
    "fence-outside-transaction": (
        "an append's fence checked outside the transaction (or OS lock) that writes it",
        _fence_outside_transaction,
    ),
}


def apply_mutant(name: str) -> None:
    if name not in MUTANTS:
        raise ValueError(f"unknown fleet mutant {name!r}; known: {', '.join(sorted(MUTANTS))}")
    MUTANTS[name][1]()
