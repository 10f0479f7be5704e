"""``SQLiteStore``: the store contract on one SQLite database (apsw, WAL mode).

Every operation is one plain function that runs one whole transaction (``BEGIN IMMEDIATE`` for
writes, so the fence and the sequence check see the same snapshot the write commits on) and is
handed to the ``Blocking`` port: inline under the simulator, so time stays deterministic, and on
trio's worker threads in production. What runs inside the transactions is written once for this
store and ``PostgresStore`` (``durable.store.sql``); this module keeps the connection's life.
No transaction ever spans two blocking calls, so a process that dies between calls leaves no
open transaction behind (see ``abandon``).

The binding is apsw rather than the standard library's ``sqlite3`` because apsw exposes SQLite's
VFS interface: a host can run the very same store on a file system of its own (the simulator's
simulated disk, where a power loss shows what SQLite did not sync). ``aiosqlite`` is deliberately
not used: it is asyncio-only and runs its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, TypeVar, cast

import apsw

from durable.ports import Blocking
from durable.store.base import CorruptStore, Lease, SQLCursor, SQLValue, StoreBusy
from durable.store.sql import TABLES, SqlStore

T = TypeVar("T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        conversation_id TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (conversation_id, sequence)
    )""",
    """CREATE TABLE IF NOT EXISTS checkpoints (
        conversation_id TEXT NOT NULL,
        through_sequence INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (conversation_id, through_sequence)
    )""",
    """CREATE TABLE IF NOT EXISTS leases (
        conversation_id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at_s REAL NOT NULL
    )""",
)

# Errors that mean the file itself is bad, as opposed to a busy or full database.
_CORRUPT_ERRORS = (apsw.NotADBError, apsw.CorruptError)

#: SQLite's default auto-checkpoint threshold (pages in the log), kept without shared memory.
DEFAULT_WAL_AUTOCHECKPOINT_PAGES = 1000

#: How long a transaction waits for another process's lock before SQLite reports it busy.
BUSY_TIMEOUT_MS = 5000


class SQLConnection(Protocol):
    """What a transaction uses of a connection. apsw's, which ``SQLiteStore`` opens, and the
    standard library's, through which ``durable.inspect`` reads a store without writing, both
    have it, so every body runs on either. Setting a connection up (pragmas, the WAL hook) and
    checkpointing its log are apsw's own and stay in ``SQLiteStore``."""

    def execute(self, sql: str, params: Sequence[SQLValue] = ..., /) -> SQLCursor: ...

    def executemany(self, sql: str, params: Iterable[Sequence[SQLValue]], /) -> SQLCursor: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


class SQLiteStore(SqlStore[SQLConnection]):
    """A store in one SQLite database file, with two durability modes.

    ``synchronous="FULL"`` (the default): every acknowledged commit survives a process crash and
    power loss (WAL is fsynced at each commit). ``synchronous="NORMAL"``: acknowledged commits
    survive a process crash, but power loss may lose the most recent ones (WAL order, so always a
    suffix, and a checkpoint never outlives the events it summarises).

    The connection is opened lazily, inside the first blocking call, so constructing a store does
    no I/O. Calls are serialised by a trio lock: one connection must not run two transactions at
    once from two worker threads.

    ``vfs`` names a registered apsw VFS to open the database through (default: the operating
    system's). ``shared_memory=False`` is for a VFS without SQLite's shared-memory methods (any VFS
    written in Python): write-ahead logging then runs in exclusive locking mode, where the log's
    index lives in the connection, so a connection sees no other process's commits. The store
    then opens a connection per transaction -- each open reads the log afresh -- unless the host
    passes ``files_version``: a function whose value changes whenever any connection, in any
    process, changes the database's files (this store's own writes included). The store then
    keeps its connection while the value after its last transaction still holds, and reopens
    it when it has moved (see ``_connection``). The durability promise is the same either way:
    it is SQLite's, for the chosen ``synchronous``. On a normal ``close`` SQLite checkpoints the
    log into the database file (the last connection's close).

    ``wal_autocheckpoint`` is the log size, in pages, at which a commit copies the log into the
    database file (SQLite's default: 1000; without shared memory the store runs that checkpoint
    itself and truncates the log: ``_checkpoint_if_due``). A host that wants the checkpoint path
    exercised by short workloads -- the simulator, whose scenarios write a few dozen pages --
    sets it low; the promise does not depend on it.

    Everything inside a transaction is ``SqlStore``'s; this class keeps the connection's life and
    SQLite's dialect: ``?`` placeholders, no row lock (``BEGIN IMMEDIATE`` takes the database's
    write lock for the whole write transaction, so the fence's read stays the stored lease), the
    lease and checkpoint rows upserted, and no key violation to translate (nothing can race an
    insert under that lock).
    """

    _KIND = "sqlite"
    _PLACEHOLDER = "?"
    _LOCK_CLAUSE = ""
    _PUT_CHECKPOINT = (
        "INSERT OR REPLACE INTO {checkpoints} (conversation_id, through_sequence, body) "
        "VALUES (%s, %s, %s)"
    )
    _NOT_A_LEASE = "{place}: leases row ({conversation_id}): not a lease: {first}"

    def __init__(
        self,
        path: str,
        *,
        blocking: Blocking,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        vfs: str | None = None,
        shared_memory: bool = True,
        wal_autocheckpoint: int | None = None,
        files_version: Callable[[], object] | None = None,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        if wal_autocheckpoint is not None and wal_autocheckpoint < 1:
            raise ValueError(f"wal_autocheckpoint must be positive, not {wal_autocheckpoint!r}")
        super().__init__(blocking=blocking)
        self._path = path
        self._synchronous = synchronous
        self._vfs = vfs
        self._shared_memory = shared_memory
        self._wal_autocheckpoint = wal_autocheckpoint
        self._files_version = None if shared_memory else files_version
        self._version_seen: object = None  # files_version() after this connection's last commit
        self._log_pages = 0  # pages in the log after the last commit (without shared memory)
        # Connections of a process that died inside a transaction: kept referenced, never closed
        # (closing would run SQLite code against files the dead process may no longer touch).
        self._abandoned: list[SQLConnection] = []

    def describe(self) -> str:
        if self._synchronous == "FULL":
            return (
                "sqlite store (synchronous=FULL: acknowledged commits survive process crash "
                "and power loss)"
            )
        return (
            "sqlite store (synchronous=NORMAL: acknowledged commits survive a process crash; "
            "power loss may lose the most recent commits)"
        )

    # -- connection and transactions ------------------------------------------------------------

    def _connection(self) -> SQLConnection:
        """Open (once, or without shared memory whenever the files may have changed under the
        connection) and set up the database. Runs inside a blocking call.

        Without shared memory a kept connection is used again only while ``files_version``
        shows the value read after its own last transaction. Why that is enough: in exclusive
        locking mode the connection's log index and page cache describe the files exactly as
        it left them, and they go stale only if something else writes those files -- another
        process's connection (a standby, a new owner, a resumed zombie), or a reader's. Every
        such write moves the version, so the next transaction here reopens and reads the log
        afresh: it sees the other process's commits, its lease and epoch among them, and the
        fence holds as with a connection per transaction. A crash of the machine takes every
        process's connection with it (``abandon``), so no kept connection outlives a power
        loss. Dropping a stale connection writes nothing: no transaction is open, and with
        ``SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`` its close neither checkpoints nor removes the
        log."""
        if self._conn is not None:
            if self._files_version is None or self._files_version() == self._version_seen:
                return self._conn
            self._drop_connection()
        if self._vfs is None:
            conn = apsw.Connection(self._path)
        else:
            conn = apsw.Connection(self._path, vfs=self._vfs)
        try:
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            if not self._shared_memory:
                # The log's index in the connection's heap; no checkpoint when it closes after
                # each transaction (SQLite still checkpoints as the log grows).
                conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
                conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise CorruptStore(f"{self._path}: could not switch to WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            if self._shared_memory:
                if self._wal_autocheckpoint is not None:
                    conn.execute(f"PRAGMA wal_autocheckpoint={int(self._wal_autocheckpoint)}")
            else:  # replaces SQLite's auto-checkpoint: see _checkpoint_if_due
                conn.set_wal_hook(self._note_log_size)
            if not self._schema_ready:
                self._create_schema(conn, "BEGIN IMMEDIATE", _SCHEMA)
        except Exception:
            # Nothing of this store was written on this connection, so its close has nothing
            # to copy out of the log: a refusal leaves the log and the database file as found.
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            conn.close()
            raise
        self._conn = conn
        return conn

    def _stored_tables(self, conn: SQLConnection) -> set[str]:
        names = ", ".join(f"'{name}'" for name in TABLES)
        return {
            row[0]
            for row in conn.execute(
                f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({names})"
            ).fetchall()
        }

    def _note_log_size(self, conn: apsw.Connection, name: str, pages: int) -> int:
        """SQLite's hook after every commit in WAL mode: remember how many pages the log holds."""
        self._log_pages = pages
        return apsw.SQLITE_OK

    def _checkpoint_if_due(self, conn: SQLConnection) -> None:
        """Without shared memory, after a write transaction: copy the log into the database and
        truncate it once it holds ``wal_autocheckpoint`` pages.

        SQLite's own auto-checkpoint cannot do this here. How much of the log is already in the
        database lives in the log's index, which without shared memory dies with the connection;
        the next connection rebuilds the index from the log file, so it counts every frame as
        not yet copied and never restarts the log: the log would grow forever, and every commit
        past the threshold would copy all of it again. A ``TRUNCATE`` checkpoint empties the log
        file itself, which the next connection does see. Its syncs are SQLite's (the log before
        the copy, the database after it; none with ``synchronous=OFF``). A busy checkpoint is
        left to the next commit: the commit itself has succeeded."""
        threshold = self._wal_autocheckpoint or DEFAULT_WAL_AUTOCHECKPOINT_PAGES
        if self._log_pages < threshold:
            return
        self._log_pages = 0
        # apsw's: only a store without shared memory gets here, and only ``SQLiteStore`` itself
        # runs without it (``durable.inspect``'s read-only store has it, and never writes).
        own = cast(apsw.Connection, conn)
        try:
            own.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
        except apsw.BusyError:
            pass

    def _done_with_connection(self, *, completed: bool = False) -> None:
        """After a whole transaction. With shared memory the connection stays open for the next
        call. Without it, a ``completed`` one stays too if the host tells file versions apart:
        the version it leaves the files at is noted, and the next call keeps the connection
        only if nothing moved it since (``_connection``). Otherwise -- no ``files_version``, or
        a transaction that failed and was rolled back -- the connection goes: the next one
        reads the log afresh."""
        if self._shared_memory:
            return
        if completed and self._files_version is not None and self._conn is not None:
            self._version_seen = self._files_version()
            return
        self._drop_connection()

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _corrupt(self, exc: apsw.Error) -> CorruptStore | None:
        if isinstance(exc, _CORRUPT_ERRORS):
            return CorruptStore(f"{self._path}: not a usable SQLite database: {exc}")
        return None

    def _transaction(self, body: Callable[[SQLConnection], T], *, write: bool) -> Callable[[], T]:
        """Wrap ``body`` into one whole transaction, rolled back if anything in it raises."""

        def run() -> T:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = body(conn)
                    conn.execute("COMMIT")
                    if write and not self._shared_memory:
                        self._checkpoint_if_due(conn)
                except Exception:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    self._done_with_connection()
                    raise
                self._done_with_connection(completed=True)
                return result
            except apsw.BusyError as exc:
                raise StoreBusy(
                    f"{self._path}: locked by another process for over {BUSY_TIMEOUT_MS} ms "
                    "(nothing was written)"
                ) from exc
            except apsw.Error as exc:
                corrupt = self._corrupt(exc)
                if corrupt is not None:
                    raise corrupt from exc
                raise

        return run

    def abandon(self) -> None:
        """Forget the connection of a killed process without closing it: the kill already
        ended whatever it was doing, and closing would run SQLite (a rollback, a checkpoint)
        against files a dead process must not touch. It stays referenced, so it is never
        finalised while the store object lives."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._abandoned.append(conn)

    # -- the dialect ---------------------------------------------------------------------------

    def _place(self) -> str:
        return self._path

    def _put_lease(self, conn: SQLConnection, lease: Lease, *, previous: Lease | None) -> None:
        """One upsert whatever ``previous`` was: ``BEGIN IMMEDIATE`` holds the database's write
        lock from the lease's read to this write, so no other acquirer can insert the row."""
        conn.execute(
            "INSERT INTO leases (conversation_id, owner_id, epoch, expires_at_s) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
            "owner_id = excluded.owner_id, epoch = excluded.epoch, "
            "expires_at_s = excluded.expires_at_s",
            (lease.conversation_id, lease.owner_id, lease.epoch, lease.expires_at_s),
        )

    def _executemany(
        self, conn: SQLConnection, sql: str, rows: Iterable[Sequence[SQLValue]]
    ) -> None:
        conn.executemany(sql, rows)
