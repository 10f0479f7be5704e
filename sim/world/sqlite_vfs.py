"""SQLite's operating-system interface (a VFS) over the simulated disk.

SQLite's durability rests on the same things the simulator models for the file store: which
writes were synced and in which order, whether a new file's directory entry reached the disk, and
what a power loss leaves of a block that was being written. Run through this VFS, every file
operation SQLite makes goes to a ``SQLiteFiles`` port -- ``SimFS`` itself for a reader that
crosses no boundary, or a process's port, where every write, sync, truncate and delete is a
labelled crash boundary and a dead process's calls are refused -- so a simulated power loss drops
exactly what SQLite did not sync (docs/crash-model.md, "SQLite on the simulated disk").

What it does, and why:

- **Files** are ``SimFS`` files written with ``pwrite`` (``write_at``): the database file's pages
  are overwritten in place (a power loss leaves each block old or new), the write-ahead log grows
  at its end (a power loss tears it like an append) until a checkpoint restarts it from the top.
- **Directory entries.** Like SQLite's unix VFS, the first sync of a newly created journal or
  write-ahead log also syncs its directory, and a delete asked to sync its directory does so; the
  database file's own entry is SQLite's caller's to make durable.
- **No shared memory.** A Python VFS has no ``xShm*`` methods, so write-ahead logging needs
  ``PRAGMA locking_mode=EXCLUSIVE`` (the log's index lives in the connection's heap). A connection
  then must not outlive one transaction if another process may write in between: the store opens
  one per transaction under the simulator (``SQLiteStore(reopen_per_transaction=True)``), and each
  open rebuilds the index from the log as SQLite's recovery does after a crash.
- **Locks** are granted at once: simulated processes interleave only at ``await`` points and a
  store transaction never awaits, so no two transactions overlap (SQLite's own file locks would
  only add boundaries that cannot matter).
- **Determinism.** No wall clock (``xCurrentTime`` is a fixed instant; the store never asks for
  the time through SQL), no sleeping, and randomness (``xRandomness``, which seeds SQLite's
  generator: write-ahead-log salts, temporary names) comes from a seed: see
  ``seed_sqlite_randomness``.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Protocol

import apsw

__all__ = ["SQLiteFiles", "SimSQLiteVFS", "seed_sqlite_randomness"]

#: SQLite's sector size as this VFS reports it: SimFS's block, the unit a power loss tears at.
SECTOR_SIZE_BYTES = 512

#: Julian day of 1970-01-01 in milliseconds: the fixed "now" of ``xCurrentTimeInt64``.
_FIXED_NOW_MS = 210866760000000

#: Files whose creation SQLite expects the VFS to make durable with a directory sync on their
#: first sync (the unix VFS's ``DIRSYNC``): a log whose entry is lost loses every commit in it.
_DIRSYNC_KINDS = (
    apsw.SQLITE_OPEN_WAL | apsw.SQLITE_OPEN_MAIN_JOURNAL | apsw.SQLITE_OPEN_SUPER_JOURNAL
)

_names = itertools.count(1)


class SQLiteFiles(Protocol):
    """The file operations SQLite's VFS needs. ``SimFS`` has them (a reader, no boundaries);
    a process's file-system port has them as crash boundaries."""

    def exists(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def read_at(self, path: str, offset: int, size: int) -> bytes: ...

    def write_at(self, path: str, offset: int, data: bytes) -> None: ...

    def truncate(self, path: str, size: int) -> None: ...

    def fsync(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def unlink(self, path: str) -> None: ...


class SimSQLiteVFS(apsw.VFS):
    """One registered VFS over one ``SQLiteFiles`` port. Open connections with
    ``apsw.Connection(path, vfs=vfs.name)``; ``close()`` unregisters it."""

    def __init__(self, files: SQLiteFiles) -> None:
        self.name = f"durable-sim-{next(_names)}"
        self.files = files
        super().__init__(self.name, "")

    def close(self) -> None:
        """Unregister: connections opened on it must be closed or abandoned first."""
        self.unregister()

    def xOpen(self, name: Any, flags: list[int]) -> SimSQLiteFile | _MemoryFile:
        if name is None:  # a temporary file (statement journal, sorter): memory, never durable
            return _MemoryFile()
        path = name if isinstance(name, str) else name.filename()
        created = not self.files.exists(path)
        if created and not flags[0] & apsw.SQLITE_OPEN_CREATE:
            raise apsw.CantOpenError(f"{path}: no such file")
        if created:
            self.files.write_at(path, 0, b"")
        dirsync = created and bool(flags[0] & _DIRSYNC_KINDS)
        return SimSQLiteFile(self.files, path, dirsync=dirsync)

    def xAccess(self, pathname: str, flags: int) -> bool:
        # As the unix VFS: an empty file counts as absent (a journal truncated to nothing).
        return self.files.exists(pathname) and self.files.size(pathname) > 0

    def xDelete(self, filename: str, syncdir: bool) -> None:
        if not self.files.exists(filename):
            raise apsw.IOError(f"{filename}: no such file")  # SQLITE_IOERR_DELETE_NOENT
        self.files.unlink(filename)
        if syncdir:
            self.files.fsync_dir(_parent(filename))

    def xFullPathname(self, name: str) -> str:
        return name

    def xRandomness(self, numbytes: int) -> bytes:
        return bytes(numbytes)  # SQLite's generator is seeded elsewhere: seed_sqlite_randomness

    def xSleep(self, microseconds: int) -> int:
        return microseconds  # never busy: locks are granted at once

    def xCurrentTime(self) -> float:
        return _FIXED_NOW_MS / 86_400_000

    def xCurrentTimeInt64(self) -> int:
        return _FIXED_NOW_MS

    def xGetLastError(self) -> tuple[int, str]:
        return 0, ""


class SimSQLiteFile:
    """One open file of ``SimSQLiteVFS``: every call goes to the port, so a write or sync of a
    dead process is refused there (it raises, and SQLite's transaction fails)."""

    def __init__(self, files: SQLiteFiles, path: str, *, dirsync: bool) -> None:
        self._files = files
        self._path = path
        self._dirsync = dirsync

    def xRead(self, amount: int, offset: int) -> bytes:
        return self._files.read_at(self._path, offset, amount)  # short at the end: apsw zero-fills

    def xWrite(self, data: bytes, offset: int) -> None:
        self._files.write_at(self._path, offset, bytes(data))

    def xTruncate(self, newsize: int) -> None:
        self._files.truncate(self._path, newsize)

    def xSync(self, flags: int) -> None:
        self._files.fsync(self._path)
        if self._dirsync:
            self._files.fsync_dir(_parent(self._path))
            self._dirsync = False

    def xFileSize(self) -> int:
        return self._files.size(self._path)

    def xLock(self, level: int) -> None:
        pass  # see the module docstring: transactions never overlap under the simulator

    def xUnlock(self, level: int) -> None:
        pass

    def xCheckReservedLock(self) -> bool:
        return False

    def xFileControl(self, op: int, ptr: int) -> bool:
        return False  # no file control is understood: SQLite falls back to its defaults

    def xSectorSize(self) -> int:
        return SECTOR_SIZE_BYTES

    def xDeviceCharacteristics(self) -> int:
        return 0  # promise nothing: no atomic writes, no safe append, no power-safe overwrite

    def xClose(self) -> None:
        pass  # closing writes nothing (the file descriptor's state is the kernel's)


class _MemoryFile:
    """A temporary file SQLite names none for: private to one connection, gone when closed."""

    def __init__(self) -> None:
        self._data = bytearray()

    def xRead(self, amount: int, offset: int) -> bytes:
        return bytes(self._data[offset : offset + amount])

    def xWrite(self, data: bytes, offset: int) -> None:
        if len(self._data) < offset:
            self._data += bytes(offset - len(self._data))
        self._data[offset : offset + len(data)] = data

    def xTruncate(self, newsize: int) -> None:
        del self._data[newsize:]

    def xSync(self, flags: int) -> None:
        pass

    def xFileSize(self) -> int:
        return len(self._data)

    def xLock(self, level: int) -> None:
        pass

    def xUnlock(self, level: int) -> None:
        pass

    def xCheckReservedLock(self) -> bool:
        return False

    def xFileControl(self, op: int, ptr: int) -> bool:
        return False

    def xSectorSize(self) -> int:
        return SECTOR_SIZE_BYTES

    def xDeviceCharacteristics(self) -> int:
        return 0

    def xClose(self) -> None:
        pass


def seed_sqlite_randomness(seed: int) -> None:
    """Reseed SQLite's process-wide random generator from ``seed``.

    SQLite draws write-ahead-log salts and temporary names from one generator, seeded from the
    *default* VFS the first time it is used; unseeded, the bytes SQLite writes would differ from
    run to run. ``apsw.randomness(0)`` marks it for reseeding, from the default VFS at its next
    use: so a seeded VFS is made the default, one byte is drawn (the reseed happens then), and
    the previous default is restored."""
    previous = apsw.vfs_names()[0]  # the default is listed first
    seeded = _SeededVFS(random.Random(seed))
    try:
        apsw.set_default_vfs(seeded.name)
        apsw.randomness(0)
        apsw.randomness(1)
    finally:
        apsw.set_default_vfs(previous)
        seeded.unregister()


class _SeededVFS(apsw.VFS):
    def __init__(self, rng: random.Random) -> None:
        self.name = f"durable-sim-seed-{next(_names)}"
        self._rng = rng
        super().__init__(self.name, "")

    def xRandomness(self, numbytes: int) -> bytes:
        return self._rng.randbytes(numbytes)


def _parent(path: str) -> str:
    head, _, _ = path.rstrip("/").rpartition("/")
    return head or "/"
