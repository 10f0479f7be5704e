"""``SQLiteStore``: the store contract on one SQLite database (apsw, WAL mode).

Every operation is one plain function that runs one whole transaction (``BEGIN IMMEDIATE`` for
writes, so the fence and the sequence check see the same snapshot the write commits on) and is
handed to the ``Blocking`` port: inline under the simulator, so time stays deterministic, and on
trio's worker threads in production. No transaction ever spans two blocking calls, so a process
that dies between calls leaves no open transaction behind (see ``abandon``).

The binding is apsw rather than the standard library's ``sqlite3`` because apsw exposes SQLite's
VFS interface: a host can run the very same store on a file system of its own (the simulator's
simulated disk, where a power loss shows what SQLite did not sync). ``aiosqlite`` is deliberately
not used: it is asyncio-only and runs its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, TypeVar, cast

import apsw
import trio

from durable.events import EventRecord
from durable.ports import Blocking
from durable.store.base import (
    Append,
    Checkpoint,
    CorruptStore,
    Lease,
    SQLCursor,
    SQLValue,
    StoreBusy,
    check_conversation_id,
    check_fence,
    check_recoverable_rows,
    check_sequences,
    granted_lease,
    lost_commits,
    parsed_checkpoints,
    renewed_lease,
    verified_rows,
)

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

#: The store's tables, in ``_SCHEMA``'s order.
_TABLES = ("events", "checkpoints", "leases")

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


class SQLiteStore:
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
    it is SQLite's, for the chosen ``synchronous``.

    ``wal_autocheckpoint`` is the log size, in pages, at which a commit copies the log into the
    database file (SQLite's default: 1000; without shared memory the store runs that checkpoint
    itself and truncates the log: ``_checkpoint_if_due``). A host that wants the checkpoint path
    exercised by short workloads -- the simulator, whose scenarios write a few dozen pages --
    sets it low; the promise does not depend on it.
    """

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
        self._path = path
        self._blocking = blocking
        self._synchronous = synchronous
        self._vfs = vfs
        self._shared_memory = shared_memory
        self._wal_autocheckpoint = wal_autocheckpoint
        self._files_version = None if shared_memory else files_version
        self._version_seen: object = None  # files_version() after this connection's last commit
        self._log_pages = 0  # pages in the log after the last commit (without shared memory)
        self._schema_ready = False
        self._conn: SQLConnection | None = None
        # Connections of a process that died inside a transaction: kept referenced, never closed
        # (closing would run SQLite code against files the dead process may no longer touch).
        self._abandoned: list[SQLConnection] = []
        self._lock = trio.Lock()

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
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._check_tables(conn)
                    for statement in _SCHEMA:
                        conn.execute(statement)
                except Exception:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                self._schema_ready = True
        except Exception:
            # Nothing of this store was written on this connection, so its close has nothing
            # to copy out of the log: a refusal leaves the log and the database file as found.
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
            conn.close()
            raise
        self._conn = conn
        return conn

    def _check_tables(self, conn: SQLConnection) -> None:
        """Before the schema is created: refuse a database that holds some of the store's
        tables but not all. A new database holds none (the schema is created), a store's all
        three (creating them again changes nothing); the three are created in one transaction,
        so a crash never leaves only some. A table missing beside the others was dropped --
        by an operator, a tool, damage -- and creating an empty one would write before the
        refusal that follows (a missing events table under a checkpoint reads as lost
        commits) and leave every later attempt to refuse over a database that no longer
        looks as found. A read inside the schema's transaction: nothing is written."""
        names = ", ".join(f"'{name}'" for name in _TABLES)
        present = {
            row[0]
            for row in conn.execute(
                f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({names})"
            ).fetchall()
        }
        missing = [name for name in _TABLES if name not in present]
        if present and missing:
            raise CorruptStore(
                f"{self._path}: the store's table(s) {', '.join(missing)} missing, though "
                f"{', '.join(sorted(present))} remain: dropped or damaged (nothing was written)"
            )

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

    async def _run(self, label: str, body: Callable[[SQLConnection], T], *, write: bool) -> T:
        async with self._lock:
            return await self._blocking.run(label, self._transaction(body, write=write))

    def abandon(self) -> None:
        """Forget the connection of a killed process without closing it: the kill already
        ended whatever it was doing, and closing would run SQLite (a rollback, a checkpoint)
        against files a dead process must not touch. It stays referenced, so it is never
        finalised while the store object lives."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._abandoned.append(conn)

    async def close(self) -> None:
        """Normal shutdown: close the connection (SQLite checkpoints the WAL on last close)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return

        def run() -> None:
            conn.close()

        async with self._lock:
            await self._blocking.run("sqlite.close", run)

    # -- leases --------------------------------------------------------------------------------

    def _lease_row(self, conn: SQLConnection, conversation_id: str) -> Lease | None:
        """The stored lease (None: no row); a row that is not a lease is ``CorruptStore``
        naming the database file, as every refusal of this store does: an operator with
        several stores must know which one to look at."""
        row = conn.execute(
            "SELECT owner_id, epoch, expires_at_s FROM leases WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            return None
        try:
            return Lease(
                conversation_id=conversation_id,
                owner_id=row[0],
                epoch=row[1],
                expires_at_s=row[2],
            )
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise CorruptStore(
                f"{self._path}: leases row ({conversation_id}): not a lease: {first}"
            ) from exc

    @staticmethod
    def _put_lease(conn: SQLConnection, lease: Lease) -> None:
        conn.execute(
            "INSERT INTO leases (conversation_id, owner_id, epoch, expires_at_s) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
            "owner_id = excluded.owner_id, epoch = excluded.epoch, "
            "expires_at_s = excluded.expires_at_s",
            (lease.conversation_id, lease.owner_id, lease.epoch, lease.expires_at_s),
        )

    def _fence(self, conn: SQLConnection, conversation_id: str, owner_id: str, epoch: int) -> None:
        """``check_fence`` on the lease row, inside the write transaction (``BEGIN IMMEDIATE``)."""
        check_fence(
            self._lease_row(conn, conversation_id), conversation_id, owner_id=owner_id, epoch=epoch
        )

    async def current_lease(self, conversation_id: str) -> Lease | None:
        check_conversation_id(conversation_id)
        return await self._run(
            "sqlite.read", lambda conn: self._lease_row(conn, conversation_id), write=False
        )

    async def acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        """Take the lease unless another owner holds it unexpired; the epoch always increases."""
        check_conversation_id(conversation_id)

        def body(conn: SQLConnection) -> Lease:
            previous = self._lease_row(conn, conversation_id)
            self._check_recoverable(conn, conversation_id, previous)
            lease = granted_lease(previous, conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)
            self._put_lease(conn, lease)
            return lease

        return await self._run("sqlite.lease", body, write=True)

    def _check_recoverable(
        self, conn: SQLConnection, conversation_id: str, previous: Lease | None
    ) -> None:
        """Before an acquisition writes the lease: refuse what the new owner's recovery would
        refuse (``check_recoverable_rows``), so a refusal leaves the database as it was."""
        last_row = conn.execute(
            "SELECT sequence, record FROM events WHERE conversation_id = ? "
            "ORDER BY sequence DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
        check_recoverable_rows(
            self._path,
            conversation_id,
            stored=previous,
            last_row=None if last_row is None else (last_row[0], last_row[1]),
            checkpoint_rows=self._checkpoint_rows(conn, conversation_id),
            rows_after=lambda start: self._event_rows(conn, conversation_id, start),
        )

    @staticmethod
    def _event_rows(conn: SQLConnection, conversation_id: str, start: int) -> list[tuple[int, str]]:
        return [
            (row[0], row[1])
            for row in conn.execute(
                "SELECT sequence, record FROM events WHERE conversation_id = ? AND sequence > ? "
                "ORDER BY sequence",
                (conversation_id, start),
            ).fetchall()
        ]

    @staticmethod
    def _checkpoint_rows(conn: SQLConnection, conversation_id: str) -> list[tuple[int, str]]:
        return [
            (row[0], row[1])
            for row in conn.execute(
                "SELECT through_sequence, body FROM checkpoints WHERE conversation_id = ? "
                "ORDER BY through_sequence DESC",
                (conversation_id,),
            ).fetchall()
        ]

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        check_conversation_id(lease.conversation_id)

        def body(conn: SQLConnection) -> Lease:
            stored = self._lease_row(conn, lease.conversation_id)
            renewed = renewed_lease(stored, lease, ttl_s=ttl_s, now_s=now_s)
            self._put_lease(conn, renewed)
            return renewed

        return await self._run("sqlite.lease", body, write=True)

    async def release_lease(self, lease: Lease) -> None:
        """Expire the lease now, keeping its epoch so the next acquirer gets epoch + 1."""
        check_conversation_id(lease.conversation_id)

        def body(conn: SQLConnection) -> None:
            stored = self._lease_row(conn, lease.conversation_id)
            if stored is None or (stored.owner_id, stored.epoch) != (lease.owner_id, lease.epoch):
                return
            self._put_lease(conn, stored.model_copy(update={"expires_at_s": -1.0}))

        await self._run("sqlite.lease", body, write=True)

    # -- the event log -------------------------------------------------------------------------

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, *, repair: bool = False
    ) -> list[EventRecord]:
        """The records after ``after_sequence``, each verified, contiguous and batch-complete.

        SQLite commits whole transactions, so there is no torn tail and any bad row is
        corruption of committed data. ``repair`` (the lease holder recovering) also checks that
        no checkpoint lies beyond the log: a checkpoint is saved only after the commits it
        covers, so one beyond the last row proves those rows were lost (``CorruptStore``).
        """
        check_conversation_id(conversation_id)
        start = max(after_sequence, 0)

        def body(conn: SQLConnection) -> tuple[list[tuple[int, str]], int, int]:
            """The rows and (when repairing) the newest checkpoint and the log's last sequence,
            in one read transaction."""
            rows = self._event_rows(conn, conversation_id, start)
            if not repair:
                return rows, 0, 0
            newest = conn.execute(
                "SELECT MAX(through_sequence) FROM checkpoints WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            last = conn.execute(
                "SELECT MAX(sequence) FROM events WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()
            assert newest is not None and last is not None  # aggregates without GROUP BY
            return rows, int(newest[0] or 0), int(last[0] or 0)

        rows, through, last = await self._run("sqlite.read", body, write=False)
        if repair:
            lost_commits(self._path, conversation_id, through=through, last_sequence=last)
        return verified_rows(self._path, conversation_id, start, rows)

    async def append(
        self,
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        """Fence, check the sequence and insert the batch in one transaction (all or nothing)."""
        batch = Append.checked(conversation_id, records, owner_id=owner_id, epoch=epoch)
        lines = zip(records, batch.lines, strict=True)
        rows = [(conversation_id, record.sequence, line) for record, line in lines]

        def body(conn: SQLConnection) -> None:
            self._fence(conn, conversation_id, owner_id, epoch)
            row = conn.execute(
                "SELECT COALESCE(MAX(sequence), 0) FROM events WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            assert row is not None  # an aggregate without GROUP BY returns one row
            (last,) = row
            check_sequences(records, expected_sequence, last)
            conn.executemany(
                "INSERT INTO events (conversation_id, sequence, record) VALUES (?, ?, ?)", rows
            )

        await self._run("sqlite.commit", body, write=True)
        batch.stored()  # the text a reader will get back from the row

    # -- checkpoints ---------------------------------------------------------------------------

    async def save_checkpoint(self, checkpoint: Checkpoint, *, owner_id: str, epoch: int) -> None:
        """Fence, store, and keep only this checkpoint and the newest older one (one transaction).

        Checkpoints newer than this one are removed as well, as ``FileStore`` does: the writer's
        log ends here, so a newer one cannot describe it.
        """
        conversation_id = check_conversation_id(checkpoint.conversation_id)
        through = checkpoint.through_sequence
        text = checkpoint.to_text()

        def body(conn: SQLConnection) -> None:
            self._fence(conn, conversation_id, owner_id, epoch)
            conn.execute(
                "INSERT OR REPLACE INTO checkpoints (conversation_id, through_sequence, body) "
                "VALUES (?, ?, ?)",
                (conversation_id, through, text),
            )
            conn.execute(
                "DELETE FROM checkpoints WHERE conversation_id = ? AND through_sequence > ?",
                (conversation_id, through),
            )
            conn.execute(
                "DELETE FROM checkpoints WHERE conversation_id = ? AND through_sequence < ("
                "SELECT MAX(through_sequence) FROM checkpoints "
                "WHERE conversation_id = ? AND through_sequence < ?)",
                (conversation_id, conversation_id, through),
            )

        await self._run("sqlite.checkpoint", body, write=True)

    async def load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        """Every stored checkpoint, newest first; the caller verifies checksums. A row that does
        not parse is ``CorruptStore`` (a transaction writes it whole: only damage explains it)."""
        check_conversation_id(conversation_id)

        rows = await self._run(
            "sqlite.read", lambda conn: self._checkpoint_rows(conn, conversation_id), write=False
        )
        return parsed_checkpoints(self._path, conversation_id, rows)

    # -- listing -------------------------------------------------------------------------------

    async def list_conversations(self) -> list[str]:
        def body(conn: SQLConnection) -> list[str]:
            rows = conn.execute(
                "SELECT conversation_id FROM events UNION SELECT conversation_id FROM leases"
            ).fetchall()
            return sorted(row[0] for row in rows)

        return await self._run("sqlite.read", body, write=False)
