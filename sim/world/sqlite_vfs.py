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
  at its end (a power loss tears it like an append) until a checkpoint truncates it and it is
  written again from the top (a rewrite: old, new, empty or a block-wise mix until synced).
- **Crash points.** Every sync, truncate and delete is one, and so is the *first* write to a
  file since its last sync or since SQLite's last commit through this VFS (it tells the
  database file ``SQLITE_FCNTL_COMMIT_PHASETWO``: without a sync per commit, ``synchronous=
  NORMAL``, each commit still begins a batch); the later writes of the same batch (the rest of
  a commit's log frames, the rest of a checkpoint's pages) are not (``write_more_at``). A kill
  anywhere inside a batch leaves what a kill after its first write leaves -- a transaction
  SQLite's recovery discards -- and a kill after its last write is the kill before its sync; a
  power loss tears the pending writes of a batch wherever it falls (docs/crash-model.md). So a
  commit costs the sweep two crash points, as the file store's append and fsync do, not one per
  page.
- **Directory entries.** Like SQLite's unix VFS, the first sync of a newly created journal or
  write-ahead log also syncs its directory, and a delete asked to sync its directory does so; the
  database file's own entry is SQLite's caller's to make durable.
- **No shared memory.** A Python VFS has no ``xShm*`` methods, so write-ahead logging needs
  ``PRAGMA locking_mode=EXCLUSIVE`` (the log's index lives in the connection's heap). A connection
  then must not outlive one transaction if another process writes in between. Every change to a
  database's files through any of these VFSes (a write, a truncate, a create, a delete: every
  process's, and a reader's) gives the database a new version (``database_version``), which
  the store is handed (``SQLiteStore(shared_memory=False, files_version=...)``): it keeps its
  connection while the version is the one its own last transaction left, and reopens it --
  rebuilding the index from the log as SQLite's recovery does after a crash -- when another
  connection has changed the files since.
- **Locks** are granted at once: simulated processes interleave only at ``await`` points and a
  store transaction never awaits, so no two transactions overlap (SQLite's own file locks would
  only add boundaries that cannot matter).
- **After a crash.** The crash itself is raised out of the port inside SQLite (a ``pwrite`` that
  is a crash point); SQLite then tries to roll back and close. A dead process's calls reach
  nothing -- no byte is read or written, nothing raises again -- exactly as a killed process's
  last system calls never happen (``alive``).
- **Determinism.** No wall clock (``xCurrentTime`` is a fixed instant; the store never asks for
  the time through SQL), no sleeping, and randomness (``xRandomness``, which seeds SQLite's
  generator: write-ahead-log salts, temporary names) comes from a seed: see
  ``seed_sqlite_randomness``.
"""

from __future__ import annotations

import itertools
import random
import struct
import sys
from collections.abc import Callable
from typing import Any, Protocol

import apsw

from durable.codec import parse_json
from durable.store.base import Checkpoint, checkpoint_usable
from sim.world.fs import SimFS
from sim.world.injector import SimulatedCrash
from sim.world.process import ProcessDead
from sim.world.storage_faults import DatabaseView, Rows, WalFrames, register_sqlite_readers


def _multi_thread_mode() -> None:
    """Put SQLite in multi-thread mode (no mutex per connection) before any connection opens.

    The fast sweep forks the process at crash points, and with SQLite on the simulated disk a
    crash point can fall inside SQLite (a ``pwrite`` of a log frame). In SQLite's default
    serialized mode the parent holds the connection's *recursive* mutex there; a forked child is
    a different thread to that mutex, cannot release it, and hangs the next time SQLite locks
    it. Multi-thread mode drops those mutexes (each connection used by one thread at a time,
    which the simulator -- one thread -- and ``SQLiteStore`` -- one connection per store, calls
    serialised -- both satisfy); SQLite's global mutexes stay, and are never held across a VFS
    call. The mode is process-wide and settable only while SQLite is shut down, so this runs
    when the simulator is imported, before it opens any database."""
    try:
        apsw.config(apsw.SQLITE_CONFIG_MULTITHREAD)
    except apsw.MisuseError:  # apsw initialised SQLite at import: shut it down to configure it
        apsw.shutdown()
        apsw.config(apsw.SQLITE_CONFIG_MULTITHREAD)
        apsw.initialize()


_multi_thread_mode()


def _quiet_dead_process_reports() -> None:
    """Keep SQLite from printing a process's death as an error.

    A crash point inside a VFS call SQLite does not check (a journal's delete while switching to
    write-ahead logging, say) raises the crash where SQLite ignores it: apsw then hands the
    exception to ``sys.unraisablehook``, which would print a traceback per crash. The process is
    dead all the same (it was marked dead before the crash was raised, so its later calls reach
    nothing and its next port call raises again), so those reports are dropped. So is an
    interrupt (Ctrl-C, SIGTERM) raised there: a sweep records every stop before it raises one
    (``sim.explore.interrupts``) and raises it again at its next fork or wait, where nothing
    drops it. Any other unraisable exception goes to the hook that was installed before."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        quiet = (SimulatedCrash, ProcessDead, KeyboardInterrupt)
        if not isinstance(unraisable.exc_value, quiet):
            previous(unraisable)

    sys.unraisablehook = hook


_quiet_dead_process_reports()

__all__ = [
    "SQLiteFiles",
    "SimSQLiteVFS",
    "database_version",
    "end_worlds",
    "read_database",
    "seed_sqlite_randomness",
    "wal_frames",
]

#: SQLite's sector size as this VFS reports it: what SQLite's unix VFS reports (its default), so
#: SQLite lays out its writes as it does on a real disk. A power loss still tears at SimFS's
#: smaller block: no disk promises a sector is written atomically.
SECTOR_SIZE_BYTES = 4096

#: Julian day of 1970-01-01 in milliseconds: the fixed "now" of ``xCurrentTimeInt64``.
_FIXED_NOW_MS = 210866760000000

#: Files whose creation SQLite expects the VFS to make durable with a directory sync on their
#: first sync (the unix VFS's ``DIRSYNC``): a log whose entry is lost loses every commit in it.
_DIRSYNC_KINDS = (
    apsw.SQLITE_OPEN_WAL | apsw.SQLITE_OPEN_MAIN_JOURNAL | apsw.SQLITE_OPEN_SUPER_JOURNAL
)

_names = itertools.count(1)

#: The version of each database's files, by the database's path (its log's and journal's
#: changes count as its own): a new stamp at every change made through any ``SimSQLiteVFS``.
#: Stamps come from one counter, so a version never returns to an earlier value, and a path
#: shared by two file systems (a world and its clone) only ever costs a needless reopen.
_versions: dict[str, int] = {}
_stamps = itertools.count(1)

#: The files SQLite keeps beside a database, by the suffix it gives them.
_BESIDE_SUFFIXES = ("-wal", "-journal")


def database_version(path: str) -> int:
    """The version of the database at ``path``'s files: it changes whenever a connection
    through any ``SimSQLiteVFS`` changes them (``SQLiteStore``'s ``files_version``)."""
    return _versions.get(path, 0)


def _database_of(path: str) -> str:
    for suffix in _BESIDE_SUFFIXES:
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


def _changed(database: str) -> None:
    _versions[database] = next(_stamps)


#: Every VFS registered and not yet closed. SQLite keeps registered VFSes in one process-wide
#: list that it searches by name, so a sweep of thousands of runs must not leave them behind:
#: the runner calls ``end_worlds`` when a world ends, which closes the connections still open on
#: them and unregisters them.
_registered: list[SimSQLiteVFS] = []


class SQLiteFiles(Protocol):
    """The file operations SQLite's VFS needs. ``SimFS`` has them (a reader, no boundaries);
    a process's file-system port has them as crash boundaries."""

    def exists(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def read_at(self, path: str, offset: int, size: int) -> bytes: ...

    def write_at(self, path: str, offset: int, data: bytes) -> None: ...

    def write_more_at(self, path: str, offset: int, data: bytes) -> None: ...

    def truncate(self, path: str, size: int) -> None: ...

    def fsync(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def unlink(self, path: str) -> None: ...


class SimSQLiteVFS(apsw.VFS):
    """One registered VFS over one ``SQLiteFiles`` port. Open connections with
    ``apsw.Connection(path, vfs=vfs.name)``; ``close()`` unregisters it."""

    def __init__(self, files: SQLiteFiles, *, alive: Callable[[], bool] = lambda: True) -> None:
        self.name = f"durable-sim-{next(_names)}"
        self.files = files
        self.ended = False  # the world is over (``end_worlds``): every call reaches nothing
        self._process_alive = alive
        self.commits = 0  # SQLite's commits through this VFS: each one ends every open batch
        super().__init__(self.name, "")
        _registered.append(self)

    def alive(self) -> bool:
        """Whether a call reaches the files: its process lives and its world has not ended."""
        return not self.ended and self._process_alive()

    def close(self) -> None:
        """Unregister the name (connections already open on it keep working)."""
        _registered.remove(self)
        self.unregister()

    # apsw takes any object with the xRead.. methods (apsw.VFSFile: derive from it only to wrap
    # another VFS's file); its stubs name VFSFile alone, which these files must not derive from.
    def xOpen(  # type: ignore[override]  # apsw duck-types the file: see the comment above
        self, name: Any, flags: list[int]
    ) -> SimSQLiteFile | _MemoryFile:
        if name is None or not self.alive():  # a temporary file (memory, never durable), or a
            return _MemoryFile()  # dead process's open: it reaches nothing
        path = name if isinstance(name, str) else name.filename()
        created = not self.files.exists(path)
        if created and not flags[0] & apsw.SQLITE_OPEN_CREATE:
            raise apsw.CantOpenError(f"{path}: no such file")
        if created:
            _changed(_database_of(path))
            self.files.write_at(path, 0, b"")
        dirsync = created and bool(flags[0] & _DIRSYNC_KINDS)
        return SimSQLiteFile(self, path, dirsync=dirsync)

    def xAccess(self, pathname: str, flags: int) -> bool:
        # As the unix VFS: an empty file counts as absent (a journal truncated to nothing).
        if not self.alive():
            return False
        return self.files.exists(pathname) and self.files.size(pathname) > 0

    def xDelete(self, filename: str, syncdir: bool) -> None:
        if not self.alive():
            return
        if not self.files.exists(filename):
            raise apsw.IOError(f"{filename}: no such file")  # SQLITE_IOERR_DELETE_NOENT
        _changed(_database_of(filename))
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

    def __init__(self, vfs: SimSQLiteVFS, path: str, *, dirsync: bool) -> None:
        self._vfs = vfs
        self._files = vfs.files
        self._path = path
        self._database = _database_of(path)
        self._dirsync = dirsync
        self._alive = vfs.alive
        # The VFS's commit count when this file was first written since its last sync (None:
        # not written since): while the count is unchanged, a later write is no crash point.
        self._batch_of: int | None = None

    def xRead(self, amount: int, offset: int) -> bytes:
        if not self._alive():
            return b""
        return self._files.read_at(self._path, offset, amount)  # short at the end: apsw zero-fills

    def xWrite(self, data: bytes, offset: int) -> None:
        if not self._alive():
            return
        _changed(self._database)
        if self._batch_of == self._vfs.commits:
            self._files.write_more_at(self._path, offset, bytes(data))
        else:
            self._files.write_at(self._path, offset, bytes(data))
            self._batch_of = self._vfs.commits

    def xTruncate(self, newsize: int) -> None:
        if self._alive():
            _changed(self._database)
            self._files.truncate(self._path, newsize)

    def xSync(self, flags: int) -> None:
        if not self._alive():
            return
        self._batch_of = None
        self._files.fsync(self._path)
        if self._dirsync:
            self._files.fsync_dir(_parent(self._path))
            self._dirsync = False

    def xFileSize(self) -> int:
        return self._files.size(self._path) if self._alive() else 0

    def xLock(self, level: int) -> None:
        pass  # see the module docstring: transactions never overlap under the simulator

    def xUnlock(self, level: int) -> None:
        pass

    def xCheckReservedLock(self) -> bool:
        return False

    def xFileControl(self, op: int, ptr: int) -> bool:
        """Noted, never handled: SQLite falls back to its defaults. A commit's second phase
        (sent to the database file once the commit is durable as ``synchronous`` says) ends
        the batches of every file of the VFS: see the module docstring, "Crash points"."""
        if op == apsw.SQLITE_FCNTL_COMMIT_PHASETWO:
            self._vfs.commits += 1
        return False

    def xSectorSize(self) -> int:
        return SECTOR_SIZE_BYTES

    def xDeviceCharacteristics(self) -> int:
        """Power-safe overwrite, as SQLite's unix VFS reports it by default: SQLite then writes
        and syncs exactly as on a real Linux disk (``tests/sim/world/test_sqlite_vfs_vs_os.py``
        compares the two call by call; with nothing promised, SQLite padded its log to sector
        boundaries with extra writes and syncs a real run never makes). SimFS keeps the promise:
        a power loss changes only the blocks a write reached, never bytes outside its range."""
        return apsw.SQLITE_IOCAP_POWERSAFE_OVERWRITE

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


def end_worlds() -> None:
    """The end of a world: close every connection still open on a VFS of ours, then unregister
    each VFS (see ``_registered``).

    A simulated process that crashed never closed its connections (a crash runs no cleanup),
    and such a connection is never freed: SQLite holds its open files, which hold the VFS and
    through it the whole world, in a cycle through C that the garbage collector cannot see
    (apsw's ``Connection.close`` says so). A sweep of thousands of SQLite runs in one process
    kept every run alive: 300 MB more per naive sweep of ``lease_takeover`` (1,984 open
    connections after two), and every later fork of that process copied it all. Each VFS is
    marked ended first, so closing reads and writes nothing: no byte of the world's disk
    changes after its run (the oracles may read it still), as no byte changes after a kill."""
    names = {vfs.name for vfs in _registered}
    for vfs in _registered:
        vfs.ended = True
    for conn in apsw.connections():
        if conn.open_vfs in names:
            conn.close(force=True)
    while _registered:
        _registered[-1].close()


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


# -- the harness's own reads of SQLite's files -------------------------------------------------
#
# What a storage fault did to a SQLite store is read back through SQLite itself, on a copy of
# the disk (``sim.world.storage_faults.aimed_sqlite_fault``): SQLite keeps no checksum of its
# pages, so only its own reader knows whether a damaged byte is a row's text, a page the log
# holds a newer copy of, or a page whose loss makes the database malformed.

_ACQUIRE = (
    ("setup", "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", False),
    ("lease", "SELECT owner_id, epoch, expires_at_s FROM leases WHERE conversation_id = ?", True),
    (
        "last",
        "SELECT sequence, record FROM events WHERE conversation_id = ? "
        "ORDER BY sequence DESC LIMIT 1",
        True,
    ),
    (
        "checkpoints",
        "SELECT through_sequence, body FROM checkpoints WHERE conversation_id = ? "
        "ORDER BY through_sequence DESC",
        True,
    ),
)
_FROM = (
    "SELECT sequence, record FROM events WHERE conversation_id = ? AND sequence > ? "
    "ORDER BY sequence"
)
_TABLES = (
    "SELECT 'events', conversation_id, sequence, record FROM events",
    "SELECT 'checkpoints', conversation_id, through_sequence, body FROM checkpoints",
    "SELECT 'leases', conversation_id, epoch, owner_id || ' ' || expires_at_s FROM leases",
)


def read_database(fs: SimFS, database: str, conversation: str) -> DatabaseView:
    """What a fresh connection reads of the database at ``database`` on ``fs`` -- a copy of a
    world's disk, which the connection may write, as creating a missing log does -- for
    ``conversation``: an acquisition's reads in ``SQLiteStore``'s order, then every row
    (``DatabaseView``). SQLite's errors are read as text: they are what is being looked at."""
    steps: list[tuple[str, Rows | str]] = []
    usable = 0
    vfs = SimSQLiteVFS(fs)
    try:
        conn = apsw.Connection(database, vfs=vfs.name)
        try:
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            for name, sql, bound in _ACQUIRE:
                steps.append((name, _ask(conn, sql, (conversation,) if bound else ())))
                if isinstance(steps[-1][1], str):
                    break
            else:
                usable = _newest_usable(steps[-1][1], conversation)
                steps.append(("from", _ask(conn, _FROM, (conversation, max(usable - 1, 0)))))
            parts = [_ask(conn, sql, ()) for sql in _TABLES]
        finally:
            conn.close()
    except apsw.Error as exc:  # the connection's own setup
        failed = f"{type(exc).__name__}: {exc}"
        return DatabaseView((("setup", failed),), failed, 0)
    finally:
        vfs.close()
    errors = [part for part in parts if isinstance(part, str)]
    rows = sorted(row for part in parts if not isinstance(part, str) for row in part)
    return DatabaseView(tuple(steps), errors[0] if errors else tuple(rows), usable)


def _ask(conn: apsw.Connection, sql: str, params: tuple[Any, ...]) -> Rows | str:
    try:
        return tuple(tuple(row) for row in conn.execute(sql, params).fetchall())
    except apsw.Error as exc:
        return f"{type(exc).__name__}: {exc}"


def _newest_usable(rows: Rows | str, conversation: str) -> int:
    """The newest checkpoint recovery may start from (0: none), of rows newest first."""
    for through, body in () if isinstance(rows, str) else rows:
        try:
            checkpoint = Checkpoint.model_validate(parse_json(body))
        except ValueError:
            continue
        if checkpoint.through_sequence == through and checkpoint_usable(checkpoint, conversation):
            return int(through)
    return 0


_WAL_MAGIC = 0x377F0682  # its low bit: checksums in big-endian words
_WAL_HEADER = 32
_FRAME_HEADER = 24


def wal_frames(data: bytes) -> WalFrames | None:
    """The frames of a write-ahead log's bytes that SQLite's recovery accepts, up to its last
    commit frame: salts equal to the header's and cumulative checksums that verify, stopping
    at the first that does not (sqlite.org/fileformat2.html, "WAL File Format"). None: no
    valid header (SQLite ignores the whole log)."""
    if len(data) < _WAL_HEADER:
        return None
    magic, _, page_size, _, salt1, salt2, sum1, sum2 = struct.unpack(">8I", data[:_WAL_HEADER])
    order = ">" if magic & 1 else "<"
    if magic & ~1 != _WAL_MAGIC or _checksum(order, data[:24], (0, 0)) != (sum1, sum2):
        return None
    starts: list[int] = []
    pages: list[int] = []
    transactions: list[tuple[int, int]] = []
    running, offset, first = (sum1, sum2), _WAL_HEADER, 0
    while offset + _FRAME_HEADER + page_size <= len(data):
        page, commit, s1, s2, c1, c2 = struct.unpack(">6I", data[offset : offset + 24])
        running = _checksum(order, data[offset : offset + 8], running)
        running = _checksum(order, data[offset + 24 : offset + 24 + page_size], running)
        if (s1, s2) != (salt1, salt2) or running != (c1, c2):
            break
        starts.append(offset)
        pages.append(page)
        if commit:
            transactions.append((first, len(starts) - 1))
            first = len(starts)
        offset += _FRAME_HEADER + page_size
    done = transactions[-1][1] + 1 if transactions else 0
    return WalFrames(page_size, tuple(starts[:done]), tuple(pages[:done]), tuple(transactions))


def _checksum(order: str, data: bytes, start: tuple[int, int]) -> tuple[int, int]:
    """SQLite's log checksum (``walChecksumBytes``) over ``data``, continued from ``start``."""
    s0, s1 = start
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


register_sqlite_readers(read_database, wal_frames)
