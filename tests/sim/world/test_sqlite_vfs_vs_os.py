"""The simulator's SQLite does, call by call, what SQLite does on a real disk.

What a power loss leaves depends on which writes SQLite made and which it synced. Under the
simulator SQLite writes through ``SimSQLiteVFS`` (``sim.world.sqlite_vfs``); on a real machine
through the operating system's VFS. SQLite decides its writes and syncs itself, but from what the
VFS tells it (sector size, device characteristics): a VFS that reports differently makes SQLite
write differently (it once did: reporting no power-safe overwrite made SQLite pad its log with
writes and syncs no real run makes). So the same workload runs on real files through a recording
VFS that inherits the OS's, and on the simulated disk through a recording port, and the two
sequences of writes (file, offset, length), syncs and truncates must be equal. A real power cut
cannot be run here; this checks the part of the simulator's accounting that a real run can.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import apsw
import pytest

from sim.world.fs import SimFS
from sim.world.sqlite_vfs import SimSQLiteVFS, seed_sqlite_randomness

Op = tuple[Any, ...]
COMMITS = 14


def _kind(path: str) -> str:
    name = os.path.basename(path)
    return "wal" if name.endswith("-wal") else "journal" if name.endswith("-journal") else "db"


class _RecordingFile(apsw.VFSFile):
    """The OS's file, each write, sync and truncate recorded."""

    def __init__(self, log: list[Op], name: Any, flags: list[int]) -> None:
        super().__init__("", name, flags)
        self._log = log
        self._kind = _kind(name.filename() if hasattr(name, "filename") else str(name))

    def xWrite(self, data: bytes, offset: int) -> None:
        self._log.append((self._kind, "write", offset, len(data)))
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:
        self._log.append((self._kind, "sync"))
        super().xSync(flags)

    def xTruncate(self, newsize: int) -> None:
        self._log.append((self._kind, "truncate", newsize))
        super().xTruncate(newsize)


class _RecordingOsVFS(apsw.VFS):
    def __init__(self, log: list[Op]) -> None:
        self.name = "durable-sim-recording-os"
        self._log = log
        super().__init__(self.name, "")

    def xOpen(self, name: Any, flags: list[int]) -> _RecordingFile:
        return _RecordingFile(self._log, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        self._log.append((_kind(filename), "delete"))
        super().xDelete(filename, syncdir)


class _RecordingPort:
    """``SimFS`` as ``SimSQLiteVFS``'s port, each write, sync, truncate and delete recorded (the
    directory syncs are the OS VFS's own business inside its ``xSync``: not compared)."""

    def __init__(self, fs: SimFS, log: list[Op]) -> None:
        self._fs = fs
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        if data or offset:  # the empty write that creates a file is no write of SQLite's
            self._log.append((_kind(path), "write", offset, len(data)))
        self._fs.write_at(path, offset, data)

    def write_more_at(self, path: str, offset: int, data: bytes) -> None:
        self._log.append((_kind(path), "write", offset, len(data)))
        self._fs.write_more_at(path, offset, data)

    def fsync(self, path: str) -> None:
        self._log.append((_kind(path), "sync"))
        self._fs.fsync(path)

    def truncate(self, path: str, size: int) -> None:
        self._log.append((_kind(path), "truncate", size))
        self._fs.truncate(path, size)

    def unlink(self, path: str) -> None:
        self._log.append((_kind(path), "delete"))
        self._fs.unlink(path)


def _connect(path: str, vfs: str, synchronous: str) -> apsw.Connection:
    conn = apsw.Connection(path, vfs=vfs)
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def _workload(path: str, vfs: str, synchronous: str, *, kept: bool = False) -> None:
    """The store's way under the simulator: a connection per transaction (as after another
    process's write) or one ``kept`` across them (while no other process writes), exclusive
    locking, WAL, rows of several sizes (frames that do and do not fill a page), TRUNCATE
    checkpoints."""
    conn = _connect(path, vfs, synchronous)
    for n in range(COMMITS):
        if not kept and n:
            conn.close()
            conn = _connect(path, vfs, synchronous)
        conn.execute("BEGIN IMMEDIATE")
        if n == 0:
            conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT)")
        conn.execute("INSERT INTO t VALUES (?, ?)", (n, "x" * (300 * (n % 5 + 1))))
        conn.execute("COMMIT")
        if n % 5 == 4:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_the_simulated_disk_sees_the_writes_and_syncs_of_a_real_one(
    synchronous: str, kept: bool, tmp_path: Path
) -> None:
    real: list[Op] = []
    os_vfs = _RecordingOsVFS(real)
    try:
        _workload(str(tmp_path / "store.sqlite"), os_vfs.name, synchronous, kept=kept)
    finally:
        os_vfs.unregister()
    simulated: list[Op] = []
    fs = SimFS()
    fs.makedirs("/store")
    seed_sqlite_randomness(1)
    sim_vfs = SimSQLiteVFS(_RecordingPort(fs, simulated))
    try:
        _workload("/store/store.sqlite", sim_vfs.name, synchronous, kept=kept)
    finally:
        sim_vfs.close()
    assert sum(op[1] == "sync" for op in real) >= COMMITS if synchronous == "FULL" else True
    assert any(op == ("wal", "truncate", 0) for op in real)  # the checkpoints ran
    first = next((i for i, (a, b) in enumerate(zip(real, simulated, strict=False)) if a != b), None)
    assert first is None and len(real) == len(simulated), (
        f"first difference at call {first}: real {real[first or 0 : (first or 0) + 4]}, "
        f"simulated {simulated[first or 0 : (first or 0) + 4]} ({len(real)} vs {len(simulated)})"
    )
