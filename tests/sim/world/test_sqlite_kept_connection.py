"""``SQLiteStore`` on the simulated disk keeps its connection across transactions while no other
connection changes the database's files (``sim.world.sqlite_vfs.database_version``), and
reopens it -- reading the log afresh -- once one has: two processes still see each other's
commits and are fenced by the lease's epoch, and a commit without a sync still begins a batch
(its first write a crash point), as it did with a connection per transaction."""

from __future__ import annotations

import functools
from typing import Any

import apsw
import pytest
from testkit import input_batch, lease_batch

from durable.events import EventRecord
from durable.ports import InlineBlocking
from durable.store import Lease, SequenceConflict, SQLiteStore, StaleLease
from sim.world.fs import SimFS
from sim.world.sqlite_vfs import SimSQLiteVFS, database_version

DB = "/store/store.sqlite"
CONV = "conv-1"
TTL = 30.0


class CountingVFS(SimSQLiteVFS):
    """Counts the connections opened through it (each opens the main database file once)."""

    def __init__(self, files: Any) -> None:
        super().__init__(files)
        self.opened = 0

    def xOpen(self, name: Any, flags: list[int]) -> Any:
        if flags[0] & apsw.SQLITE_OPEN_MAIN_DB:
            self.opened += 1
        return super().xOpen(name, flags)


class Port:
    """``SimFS`` with its crash points counted: the writes that begin a batch (``write_at``)
    and the ones that continue it (``write_more_at``), by file."""

    def __init__(self, fs: SimFS) -> None:
        self._fs = fs
        self.first: list[str] = []
        self.more: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        self.first.append(path)
        self._fs.write_at(path, offset, data)

    def write_more_at(self, path: str, offset: int, data: bytes) -> None:
        self.more.append(path)
        self._fs.write_at(path, offset, data)


def _store(vfs: SimSQLiteVFS, *, synchronous: str = "FULL") -> SQLiteStore:
    return SQLiteStore(
        DB,
        blocking=InlineBlocking(),
        synchronous="FULL" if synchronous == "FULL" else "NORMAL",
        vfs=vfs.name,
        shared_memory=False,
        wal_autocheckpoint=1000,
        files_version=functools.partial(database_version, DB),
    )


@pytest.fixture
def fs() -> SimFS:
    fs = SimFS()
    fs.makedirs("/store")
    return fs


async def _append(store: SQLiteStore, batch: list[EventRecord], lease: Lease) -> None:
    await store.append(
        CONV,
        batch,
        expected_sequence=batch[0].sequence,
        owner_id=lease.owner_id,
        epoch=lease.epoch,
    )


def _sequences(records: list[EventRecord]) -> list[int]:
    return [r.sequence for r in records]


async def test_the_connection_is_kept_until_another_process_writes(fs: SimFS) -> None:
    one_vfs, two_vfs = CountingVFS(fs), CountingVFS(fs)
    one, two = _store(one_vfs), _store(two_vfs)
    try:
        lease = await one.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
        await _append(one, input_batch(1, 2, lease=lease), lease)
        assert _sequences(await one.read_records(CONV)) == [1, 2]
        assert one_vfs.opened == 1  # three transactions, one connection
        await _append(two, input_batch(3, 1, lease=lease), lease)
        with pytest.raises(SequenceConflict):  # one reads two's commit
            await _append(one, input_batch(3, 1, lease=lease, batch="dup"), lease)
        assert one_vfs.opened == 2
        await _append(one, input_batch(4, 2, lease=lease), lease)
        assert _sequences(await two.read_records(CONV)) == [1, 2, 3, 4, 5]
        assert _sequences(await one.read_records(CONV, after_sequence=3)) == [4, 5]
        assert two_vfs.opened == 2  # again after one's writes
    finally:
        one.abandon()
        two.abandon()
        one_vfs.close()
        two_vfs.close()


async def test_a_zombie_with_a_kept_connection_is_fenced_by_the_new_epoch(fs: SimFS) -> None:
    zombie_vfs, owner_vfs = CountingVFS(fs), CountingVFS(fs)
    zombie, owner = _store(zombie_vfs), _store(owner_vfs)
    try:
        old = await zombie.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
        base = lease_batch(1, old)
        await _append(zombie, base, old)
        new = await owner.acquire_lease(CONV, "owner-b", ttl_s=TTL, now_s=100.0)
        assert new.epoch == old.epoch + 1
        mine = lease_batch(2, new)
        await _append(owner, mine, new)
        with pytest.raises(StaleLease):
            await _append(zombie, input_batch(3, 1, lease=old), old)
        with pytest.raises(StaleLease):
            await zombie.renew_lease(old, ttl_s=TTL, now_s=101.0)
        assert await zombie.current_lease(CONV) == new
        assert await zombie.read_records(CONV) == base + mine
    finally:
        zombie.abandon()
        owner.abandon()
        zombie_vfs.close()
        owner_vfs.close()


async def test_each_commit_without_a_sync_begins_a_batch(fs: SimFS) -> None:
    """Under NORMAL no commit syncs the log: each commit's first write to it is still a crash
    point of its own (as a fresh connection per transaction made it), the rest of its frames
    are not."""
    port = Port(fs)
    vfs = SimSQLiteVFS(port)
    store = _store(vfs, synchronous="NORMAL")
    try:
        lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
        port.first.clear()
        port.more.clear()
        for start in (1, 2, 3):
            await _append(store, input_batch(start, 1, lease=lease), lease)
        assert port.first == [f"{DB}-wal"] * 3
        assert port.more and set(port.more) == {f"{DB}-wal"}
    finally:
        store.abandon()
        vfs.close()


def test_the_version_moves_with_every_change_through_any_vfs(fs: SimFS) -> None:
    one, two = SimSQLiteVFS(fs), SimSQLiteVFS(fs)
    try:
        before = database_version(DB)
        conn = apsw.Connection(DB, vfs=one.name)
        conn.execute("CREATE TABLE t (n INTEGER)")
        written = database_version(DB)
        assert written != before
        reader = apsw.Connection(DB, vfs=two.name)
        assert reader.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
        assert database_version(DB) == written  # reading changes nothing
        reader.execute("INSERT INTO t VALUES (1)")
        assert database_version(DB) not in (before, written)
        assert database_version(f"{DB}-other") == 0  # another database: its own version
        conn.close()
        reader.close()
    finally:
        one.close()
        two.close()
