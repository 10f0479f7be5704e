"""The store kinds a world can run on, as one object each: where a kind's store lives, how a
process opens it, how a fresh reader reads it afterwards, and which faults the simulator can
inject under it.

``StoreKind`` is a ``StrEnum``: it is also its own name (``"file"``, ``"sqlite"``,
``"postgres"``), so it goes into results, reports and repro lines as before, and a caller may
pass either. Both hosts of a world (the simulator, ``sim.run.runner``; the real-process child,
``sim.world.realhost``) open and read their store through it, over their own ``StorePlace`` --
``postgres`` only under the simulator (``SIMULATED_ONLY``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

from durable.ports import Blocking, InlineBlocking
from durable.store.sqlite import SQLiteStore
from sim.errors import StoreKindError
from sim.world import seams
from sim.world.faults import CrashKind
from sim.world.pgserver import RunDatabase
from sim.world.process import InstrumentedStore, ProcessFS, SimProcess
from sim.world.storage_faults import SQLITE_NAME

#: The log size (pages) at which a SQLite commit checkpoints the log into the database file.
#: SQLite's default, 1000 pages, is more than any bundled scenario writes, so no sweep would
#: ever cross a checkpoint (the log copied into the database in place, then restarted from its
#: top): the path whose syncs ``NORMAL``'s promise rests on. At 16 a scenario checkpoints every
#: few commits.
WAL_AUTOCHECKPOINT_PAGES = 16


@dataclass(frozen=True)
class StorePlace:
    """Where one world's store lives: the file system it is written on (``SimFS``, or real
    files: ``sim.world.realhost.RealFiles``) and its root there (the SQLite database is
    ``ROOT/store.sqlite``), and whether the store syncs every commit (the scenario's ``fsync``:
    ``FileStore(fsync=...)``; SQLite's ``synchronous=FULL``, or ``NORMAL`` when false -- see
    ``StoreKind.promises_power``). A ``postgres`` world's store is on the server instead: its
    ``database`` is the run's own schema (``sim.world.pgserver.run_database``)."""

    fs: Any
    root: str
    fsync: bool
    database: RunDatabase | None = None


class StoreKind(StrEnum):
    """A store kind: ``file`` (``FileStore`` through the process's file-system port) or ``sqlite``
    (``SQLiteStore``). Both write through the process's file-system port, every write and sync
    a crash point: the file store directly, SQLite through a VFS over the same port
    (``sim.world.sqlite_vfs``) -- on the simulated disk, or on real files in the real-process
    host. Or ``postgres`` (``PostgresStore`` on a real server, a schema per run: see
    ``sim.world.pgserver``), whose crash points are its operations and its transactions."""

    FILE = "file"
    SQLITE = "sqlite"
    POSTGRES = "postgres"

    @classmethod
    def _missing_(cls, value: object) -> NoReturn:
        # ``StoreKind("tape")`` raises this (Enum raises what ``_missing_`` raises): every entry
        # point that takes a store's name refuses an unknown one eagerly, in the package's error.
        kinds = ", ".join(kind.value for kind in cls)
        raise StoreKindError(f"unknown store kind {value!r} (kinds: {kinds})")

    def can_inject(self, kind: CrashKind | str) -> bool:
        """Whether the simulator can inject a crash of ``kind`` under this store. Process kills:
        every store. Power loss and storage faults (damage to synced data): the file store and
        SQLite (their files are on ``SimFS``; SQLite's faults are aimed at what SQLite and the
        store can tell -- a record's checksummed text, the header, the log's last transaction
        -- since SQLite keeps no checksum of its pages: ``sim.world.storage_faults``), not
        Postgres -- the server is the durable service, outside the simulated machine, and is
        neither power-crashed nor damaged here. Pauses: every store (a stopped worker is a
        state of the process, not of the disk or the server) -- where the scenario has a
        standby to take the lease over (``Scenario.standby_at_s``).

        The one authority on what a store can take (sweeps, replay, the sweep's cost estimate
        ask it): an unknown ``kind`` is refused here (``ScheduleError``), not answered."""
        kind = CrashKind(kind)
        if kind is CrashKind.PAUSE:
            return True
        if self is StoreKind.POSTGRES:
            return kind is CrashKind.PROCESS
        return True

    @property
    def forks(self) -> bool:
        """Whether a sweep may fork a run at its boundaries (``sim.explore.forking``). Not on
        Postgres: a forked child would share the parent's connection and the one schema on the
        server, so its crash would change the parent's store; each schedule runs from scratch
        in a schema of its own instead."""
        return self is not StoreKind.POSTGRES

    def promises_power(self, fsync: bool) -> bool:
        """Whether the store mode promises that acknowledged commits survive power loss: the one
        home of that decision (the oracles ask it). ``fsync`` is the scenario's: the store syncs
        every commit -- ``FileStore(fsync=True)``, ``SQLiteStore(synchronous="FULL")`` -- or it
        does not: ``FileStore(fsync=False)``, or ``synchronous="NORMAL"``, whose commits reach
        the write-ahead log unsynced (synced only before a checkpoint). Those promise less: a
        power loss may lose a suffix of the acknowledged commits, never one from the middle."""
        return fsync

    def open(self, process: SimProcess, place: StorePlace, blocking: Blocking) -> InstrumentedStore:
        """The store ``process`` works on, every operation of it a labelled boundary."""
        port = ProcessFS(process, place.fs, place.root)
        if self is StoreKind.FILE:
            return InstrumentedStore(seams.file_store(place.root, port, place.fsync), process)
        if self is StoreKind.POSTGRES:
            postgres = _database(place).store(blocking)
            # A simulated kill abandons its connection: the kernel closing a dead process's
            # socket (``PostgresStore.abandon``), so the server rolls back what it left open.
            process.open_stores.append(postgres)
            return InstrumentedStore(postgres, process)
        sqlite = _sqlite_store(place, port, blocking, alive=lambda: process.alive)
        process.open_stores.append(sqlite)  # a simulated kill abandons its connection
        return InstrumentedStore(sqlite, process)

    def reader(self, place: StorePlace) -> Any:
        """A fresh store that holds no lease and repairs nothing: the oracles' view of what is
        durable once the world has ended (no port of any process: nothing it does is a
        boundary)."""
        if self is StoreKind.FILE:
            return seams.file_store(place.root, place.fs, place.fsync)
        if self is StoreKind.POSTGRES:
            return _database(place).store(InlineBlocking())
        return _sqlite_store(place, place.fs, InlineBlocking())


#: The kinds a real-process host can run (``durable-sim realcrash``): its store lives in files
#: beside the point's record. Postgres is swept under the simulator only (and, with real
#: processes, by ``durable-sim workers``).
FILE_KINDS: tuple[StoreKind, ...] = (StoreKind.FILE, StoreKind.SQLITE)


def _database(place: StorePlace) -> RunDatabase:
    """The run's schema of a ``postgres`` place (a place without one is the harness's bug)."""
    if place.database is None:
        raise ValueError("a postgres store needs the run's database (sim.world.pgserver)")
    return place.database


def _sqlite_store(
    place: StorePlace,
    files: Any,
    blocking: Blocking,
    *,
    alive: Callable[[], bool] = lambda: True,
) -> SQLiteStore:
    """``ROOT/store.sqlite`` through a VFS over ``files`` (a process's port, or the bare file
    system for a reader): no shared memory, so the store keeps its connection only while no
    other connection has changed the files (the VFS's ``database_version``); ``synchronous``
    FULL, or NORMAL when the scenario does not sync every commit (``StoreKind.promises_power``);
    checkpoints every ``WAL_AUTOCHECKPOINT_PAGES``."""
    # Imported here, not with this module: importing the VFS wraps ``sys.unraisablehook`` (see
    # ``sim.world.sqlite_vfs``), which must come after pytest installs its own hook -- and the
    # store kinds are imported before that, by the pytest plugin's options and the test kit.
    from sim.world.sqlite_vfs import SimSQLiteVFS, database_version

    vfs = SimSQLiteVFS(files, alive=alive)
    path = f"{place.root}/{SQLITE_NAME}"
    return SQLiteStore(
        path,
        blocking=blocking,
        synchronous="FULL" if place.fsync else "NORMAL",
        vfs=vfs.name,
        shared_memory=False,
        wal_autocheckpoint=WAL_AUTOCHECKPOINT_PAGES,
        files_version=functools.partial(database_version, path),
    )


def store_kind(name: str) -> StoreKind:
    """The store kind called ``name``: ``StoreKind(name)``, which refuses an unknown one with a
    ``StoreKindError`` (a ``ValueError`` too) naming the kinds."""
    return StoreKind(name)
