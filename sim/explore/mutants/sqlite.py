"""Mutants of SQLite on the simulated disk (docs/crash-model.md, "SQLite on the simulated
disk"): the syncs each ``synchronous`` mode promises, in the store, in SQLite's checkpoint, and
in the disk under it (the simulator's own VFS)."""

from __future__ import annotations

from collections.abc import Callable

import apsw

from durable.store import sqlite as sqlite_store_mod
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world import sqlite_vfs as sqlite_vfs_mod
from sim.world.faults import CrashKind, When
from sim.world.stores import StoreKind

# Before the commit after pay-1's acknowledgement: pay-1 vanishes with the power.
BEFORE_COMMIT_3 = LabelledCrash(label="store.commit#3", when=When.BEFORE, kind=CrashKind.POWER)


@mutant(
    name="sqlite-off-as-full",
    bug_class="SQLite opened with synchronous=OFF while the store presents itself as FULL",
    scenario="idempotent_payment",
    store=StoreKind.SQLITE,
    caught_by=("I12",),
    also=("I5",),  # the client re-sends the lost input and gets a new submission
    witness=BEFORE_COMMIT_3,
    first_kill="25:before:power",
)
def sqlite_off_as_full(mp: Patcher) -> None:
    """``SQLiteStore(synchronous="FULL")`` opens its connections with ``synchronous=OFF``
    (no sync at a commit, nor around a checkpoint) while still describing itself as FULL: an
    acknowledged commit is lost on power loss."""
    original = sqlite_store_mod.SQLiteStore._connection

    def _connection(self: sqlite_store_mod.SQLiteStore) -> sqlite_store_mod.SQLConnection:
        conn = original(self)
        conn.execute("PRAGMA synchronous=OFF")
        return conn

    mp.setattr(sqlite_store_mod.SQLiteStore, "_connection", _connection)


@mutant(
    name="vfs-sync-noop",
    bug_class="the VFS's xSync does nothing: a disk or OS that lies about fsync (mutates the "
    "simulator's VFS, not the store)",
    scenario="idempotent_payment",
    store=StoreKind.SQLITE,
    caught_by=("I12",),
    also=("I5",),  # the client re-sends the lost input and gets a new submission
    witness=BEFORE_COMMIT_3,
    first_kill="16:before:power",
)
def vfs_sync_noop(mp: Patcher) -> None:
    """The VFS's ``xSync`` returns success without syncing: a disk or operating system that
    lies about fsync (this mutates the simulator's own VFS, not the store). SQLite believes each
    commit durable; power loss drops it."""

    def xSync(self: sqlite_vfs_mod.SimSQLiteFile, flags: int) -> None:
        return None

    mp.setattr(sqlite_vfs_mod.SimSQLiteFile, "xSync", xSync)


@mutant(
    name="checkpoint-without-wal-sync",
    bug_class="a WAL checkpoint copies into the database file before the log is synced "
    "(synchronous=NORMAL)",
    scenario="weak_durability_nofsync",
    store=StoreKind.SQLITE,
    caught_by=("I2",),
    also=("I0",),
    # After the database's seventh sync (the third WAL checkpoint's), before its log truncate:
    # the copied pages are durable, the unsynced log comes back as an older prefix that
    # recovery replays over them.
    witness=LabelledCrash(
        label="fs.fsync:store.sqlite", when=When.AFTER, kind=CrashKind.POWER, nth=7
    ),
    first_kill="63:after:power",
)
def checkpoint_without_wal_sync(mp: Patcher) -> None:
    """A checkpoint copies the write-ahead log into the database file without syncing the log
    first -- SQLite's ``walCheckpoint`` with its first ``sqlite3OsSync`` dropped.

    That sync is what lets a checkpoint be interrupted: the database pages are overwritten in
    place, and if power fails before the database's own sync, recovery redoes them from the log.
    Under ``synchronous=NORMAL`` (commits leave the log unsynced) it is also the first sync of
    the commits being copied; without it, a power loss mid-copy leaves a database that is part
    old, part new, with no log to repair it. Under FULL each commit already synced the log, so
    the mutant is harmless there, as the real bug would be.

    Expressed in the VFS, where SQLite's calls are seen in order: every sync of a ``-wal`` file
    is held back until the next call on any file of the same VFS. If that call is the database
    file's ``SQLITE_FCNTL_CKPT_START`` (which SQLite sends right after the log sync, before the
    first page is copied), the held sync is dropped; any other call performs it first. No byte
    is written between the sync and the next call, so a held sync that is performed leaves the
    disk exactly as an immediate one would, at the same crash boundary."""
    held: dict[int, sqlite_vfs_mod.SimSQLiteFile] = {}  # by the VFS's port
    sync = sqlite_vfs_mod.SimSQLiteFile.xSync
    file_control = sqlite_vfs_mod.SimSQLiteFile.xFileControl

    def settle(file: sqlite_vfs_mod.SimSQLiteFile, *, checkpoint: bool = False) -> None:
        pending = held.pop(id(file._files), None)
        if pending is not None and not checkpoint:
            sync(pending, 0)

    def xSync(self: sqlite_vfs_mod.SimSQLiteFile, flags: int) -> None:
        settle(self)
        if self._path.endswith("-wal"):
            held[id(self._files)] = self
        else:
            sync(self, flags)

    def xFileControl(self: sqlite_vfs_mod.SimSQLiteFile, op: int, ptr: int) -> bool:
        settle(self, checkpoint=op == apsw.SQLITE_FCNTL_CKPT_START)
        return file_control(self, op, ptr)

    mp.setattr(sqlite_vfs_mod.SimSQLiteFile, "xSync", xSync)
    mp.setattr(sqlite_vfs_mod.SimSQLiteFile, "xFileControl", xFileControl)
    for name in ("xRead", "xWrite", "xTruncate", "xFileSize", "xClose"):
        mp.setattr(sqlite_vfs_mod.SimSQLiteFile, name, _settled(settle, name))


def _settled(settle: Callable[..., None], name: str) -> Callable[..., object]:
    """``SimSQLiteFile.NAME`` that first performs a held log sync (see
    ``checkpoint_without_wal_sync``)."""
    original = getattr(sqlite_vfs_mod.SimSQLiteFile, name)

    def method(self: sqlite_vfs_mod.SimSQLiteFile, *args: object) -> object:
        settle(self)
        return original(self, *args)

    return method
