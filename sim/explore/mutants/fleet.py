"""Fleet mutants: deliberately broken stores whose bug only several real processes can show.
``durable-sim workers --mutant NAME`` (and the fleet tests, one per store each record names)
must catch each (``core.FleetMutant``).

A mutant is applied inside each worker process before it opens its store (a monkeypatch of the
store class, never undone: the process ends with it), never in the parent that judges.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from durable.events import EventRecord
from durable.store.base import Lease, check_batch, check_sequences
from durable.store.file import FileStore
from durable.store.postgres import PostgresStore
from durable.store.sql import SqlStore
from durable.store.sqlite import SQLiteStore
from sim.explore.mutants.core import Patcher, fleet_mutant
from sim.explore.mutants.leases import (
    ConnT,
    fence_outside_transaction_postgres,
    fence_outside_transaction_sqlite,
)
from sim.world.stores import StoreKind

EVERY_STORE = (StoreKind.FILE, StoreKind.SQLITE, StoreKind.POSTGRES)


@fleet_mutant(
    name="file-lock-dropped",
    bug_class="the file store's lease without its OS lock",
    stores=(StoreKind.FILE,),
)
def file_lock_dropped(mp: Patcher) -> None:
    """``FileStore``'s read-modify-write of ``lease.json`` without the OS lock: two workers that
    acquire at the same moment both read the old lease and both get the next epoch."""

    @contextlib.contextmanager
    def no_lock(self: FileStore, conversation_id: str) -> Iterator[None]:
        yield

    mp.setattr(FileStore, "_exclusive", no_lock)


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
    self: SqlStore[ConnT], lease: Lease, *, ttl_s: float, now_s: float
) -> Lease:
    """Both database stores' (``durable.store.sql``): the caller's lease written over the row as
    it is (SQLite upserts it, PostgreSQL updates the stored row), whatever epoch it holds."""
    renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})

    def body(conn: ConnT) -> Lease:
        self._put_lease(conn, renewed, previous=lease)
        return renewed

    return await self._run(self._label("lease"), body, write=True)


@fleet_mutant(
    name="renew-ignores-epoch",
    bug_class="a lease renewal that does not compare epochs",
    stores=EVERY_STORE,
)
def renew_ignores_epoch(mp: Patcher) -> None:
    mp.setattr(FileStore, "_renew_lease", file_renew_ignoring_epoch)
    mp.setattr(SQLiteStore, "renew_lease", sql_renew_ignoring_epoch)
    mp.setattr(PostgresStore, "renew_lease", sql_renew_ignoring_epoch)


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


@fleet_mutant(
    name="fence-outside-transaction",
    bug_class="an append's fence checked outside the transaction (or OS lock) that writes it",
    stores=EVERY_STORE,
)
def fence_outside_transaction(mp: Patcher) -> None:
    mp.setattr(FileStore, "append", file_fence_outside_lock)
    # The simulator's registered mutants, planted here too.
    fence_outside_transaction_sqlite(mp)
    fence_outside_transaction_postgres(mp)
