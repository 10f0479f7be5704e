"""The store kinds a world can run on, as one object each: where a kind's store lives, how a
process opens it, how a fresh reader reads it afterwards, and which faults the simulator can
inject under it.

``StoreKind`` is a ``StrEnum``: it is also its own name (``"file"``, ``"sqlite"``), so it goes
into results, reports and repro lines as before, and a caller may pass either. Both hosts of a
world (the simulator, ``sim.run.runner``; the real-process child, ``sim.world.realhost``) open
and read their store through it, over their own ``StorePlace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from durable.ports import Blocking, InlineBlocking
from durable.store.sqlite import SQLiteStore
from sim.world.faults import CrashKind
from sim.world.process import InstrumentedStore, ProcessFS, SimProcess
from sim.world.seams import current as current_seams

StoreName = Literal["file", "sqlite"]
SQLITE_NAME = "store.sqlite"


@dataclass(frozen=True)
class StorePlace:
    """Where one world's store lives: the file system the file store is written on (``SimFS``
    or a real ``OsFileSystem``) and its root there, the SQLite database's real path, and whether
    the file store fsyncs (the scenario's ``fsync``)."""

    fs: Any
    root: str
    sqlite_path: str | None
    fsync: bool


class StoreKind(StrEnum):
    """A store kind: ``file`` (``FileStore`` through the process's file-system port: every
    write is a crash point and its files are on the simulated disk) or ``sqlite``
    (``SQLiteStore`` on a real database file, every non-read call a crash point)."""

    FILE = "file"
    SQLITE = "sqlite"

    @property
    def on_simulated_disk(self) -> bool:
        """Whether the store's files live on ``SimFS``, which alone knows what was synced: so
        whether the simulator can cut the power under it or damage its synced data. SQLite's
        files are on a real directory (a VFS over ``SimFS`` is not written yet)."""
        return self is StoreKind.FILE

    @property
    def needs_real_directory(self) -> bool:
        """Whether a simulated run needs a real temporary directory for the store."""
        return self is StoreKind.SQLITE

    def can_inject(self, kind: CrashKind) -> bool:
        """Whether the simulator can inject a crash of ``kind`` under this store."""
        return kind == "process" or self.on_simulated_disk

    def open(self, process: SimProcess, place: StorePlace, blocking: Blocking) -> InstrumentedStore:
        """The store ``process`` works on, every operation of it a labelled boundary."""
        if self is StoreKind.FILE:
            fs = ProcessFS(process, place.fs, place.root)
            return InstrumentedStore(
                current_seams().file_store(place.root, fs, place.fsync), process
            )
        assert place.sqlite_path is not None
        sqlite = SQLiteStore(place.sqlite_path, blocking=blocking)
        process.sqlite_stores.append(sqlite)  # a simulated kill abandons its connection
        return InstrumentedStore(sqlite, process)

    def reader(self, place: StorePlace) -> Any:
        """A fresh store that holds no lease and repairs nothing: the oracles' view of what is
        durable once the world has ended (no port of any process: nothing it does is a
        boundary)."""
        if self is StoreKind.FILE:
            return current_seams().file_store(place.root, place.fs, place.fsync)
        assert place.sqlite_path is not None
        return SQLiteStore(place.sqlite_path, blocking=InlineBlocking())


def store_kind(name: str) -> StoreKind:
    """The store kind called ``name`` (a ``ValueError`` naming the kinds if there is none)."""
    try:
        return StoreKind(name)
    except ValueError:
        kinds = ", ".join(k.value for k in StoreKind)
        raise ValueError(f"unknown store kind {name!r} (kinds: {kinds})") from None
