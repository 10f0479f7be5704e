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
from durable.store.base import Lease, check_batch, check_sequences
from durable.store.file import FileStore
from durable.store.postgres import PostgresStore
from durable.store.sql import SqlStore
from durable.store.sqlite import SQLiteStore
from sim.explore.mutants.core import Patches
from sim.explore.mutants.leases import (
    fence_outside_transaction_postgres,
    fence_outside_transaction_sqlite,
)


def _file_lock_dropped() -> None:
    """``FileStore``'s read-modify-write of ``lease.json`` without the OS lock: two workers that
    acquire at the same moment both read the old lease and both get the next epoch."""

    @contextlib.contextmanager
    def no_lock(self: FileStore, conversation_id: str) -> Iterator[None]:
        yield

    FileStore._exclusive = no_lock  # type: ignore[method-assign]  # the planted bug itself


# A renewal that writes the caller's lease back without comparing it with the stored one: a
# worker paused past its lease renews it on waking, over the new owner's. One for the file store
# and one for both database stores (the simulator's Postgres tests plant that one too).


def file_renew_ignoring_epoch(
    self: FileStore, lease: Lease, *, ttl_s: float, now_s: float
) -> Lease:
    renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
    self._write_lease(renewed)
    return renewed


async def sql_renew_ignoring_epoch(
    self: SqlStore[Any], lease: Lease, *, ttl_s: float, now_s: float
) -> Lease:
    """Both database stores' (``durable.store.sql``): the caller's lease written over the row as
    it is (SQLite upserts it, PostgreSQL updates the stored row), whatever epoch it holds."""
    renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})

    def body(conn: Any) -> Lease:
        self._put_lease(conn, renewed, previous=lease)
        return renewed

    return await self._run(self._label("lease"), body, write=True)


def _renew_ignores_epoch() -> None:
    FileStore._renew_lease = file_renew_ignoring_epoch  # type: ignore[method-assign]  # the planted bug itself
    SQLiteStore.renew_lease = sql_renew_ignoring_epoch  # type: ignore[method-assign]  # the planted bug itself
    PostgresStore.renew_lease = sql_renew_ignoring_epoch  # type: ignore[method-assign]  # the planted bug itself


# The fence checked outside the append's transaction (its own statement, or outside the OS lock)
# and the batch written in the next: a takeover between the two lets a zombie's append in. The
# SQLite and Postgres appends are the simulator's registered mutants too
# (``sim.explore.mutants.leases``), where a ``pause`` crash point opens the window; here the
# fleet's fence pause does (``sim.targets.workers.takeover``).


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
    # The simulator's registered mutants, planted for good in this worker (never undone).
    fence_outside_transaction_sqlite(Patches())
    fence_outside_transaction_postgres(Patches())


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
