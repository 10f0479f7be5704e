"""``PostgresStore``: the store contract on a PostgreSQL server (psycopg 3, an optional extra).

Events, checkpoints and the lease live in three tables of one schema (the *namespace*), created
idempotently on first use. Every operation is one plain function that runs one whole transaction
and is handed to the ``Blocking`` port, exactly as ``SQLiteStore`` does: inline under the
simulator, on trio's worker threads in production. No transaction ever spans two blocking calls,
so a process that dies between calls leaves nothing open, and one that dies inside a call leaves a
transaction the server rolls back when the socket closes.

**How fencing is made race-free: ``SELECT ... FOR UPDATE`` on the lease row, not SERIALIZABLE.**
Every mutation of a conversation (acquire, renew, release, append, checkpoint) first locks that
conversation's one lease row and holds the lock to its commit, so the lease it checks is the lease
that is current when its write commits: an append that passed its fence cannot be overtaken by a
takeover, and a takeover in flight makes a concurrent append wait and then see the new epoch
(READ COMMITTED re-reads a row it waited for). The lease row is a per-conversation mutex the
database keeps for us. SERIALIZABLE would also be correct, but it detects conflicts by aborting
one side (SQLSTATE 40001), so every caller would need a retry loop and would see spurious failures
under contention; a row lock makes the loser wait a few milliseconds instead. The one case a row
lock cannot cover is a conversation with no lease row yet: two first acquirers both see nothing and
both ``INSERT``; the primary key lets one win and the other's transaction is retried once (it then
finds the row and locks it). Reads run in READ ONLY REPEATABLE READ transactions, so a read that
takes two statements (records and the newest checkpoint) sees one snapshot, as SQLite's does.

Durability is the server's: an acknowledged commit survives what the server's commit survives
(process crash of the worker always; the server's own crash and power loss when it runs with
``fsync=on`` and ``synchronous_commit=on``, its defaults). The simulator does not power-crash the
database server: it is the durable service here, and only worker processes are killed.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

import trio

from durable.events import EventRecord
from durable.ports import Blocking
from durable.store.base import (
    Append,
    Checkpoint,
    CorruptStore,
    Lease,
    Row,
    SequenceConflict,
    SQLCursor,
    SQLValue,
    check_conversation_id,
    check_fence,
    check_recoverable_rows,
    check_sequences,
    granted_lease,
    lost_commits,
    parsed_checkpoints,
    refused_renewal,
    verified_rows,
)

T = TypeVar("T")

#: What ``pip`` needs for this store; named in the error when the driver is missing.
EXTRA = "durable-sim[postgres]"

_NAMESPACE = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS {ns}",
    """CREATE TABLE IF NOT EXISTS {ns}.events (
        conversation_id TEXT NOT NULL,
        sequence BIGINT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (conversation_id, sequence)
    )""",
    """CREATE TABLE IF NOT EXISTS {ns}.checkpoints (
        conversation_id TEXT NOT NULL,
        through_sequence BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (conversation_id, through_sequence)
    )""",
    """CREATE TABLE IF NOT EXISTS {ns}.leases (
        conversation_id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at_s DOUBLE PRECISION NOT NULL
    )""",
)

#: The store's tables, in ``_SCHEMA``'s order.
_TABLES = ("events", "checkpoints", "leases")

# The lease row, locked to the end of the transaction: the whole store's concurrency control.
_LOCK_LEASE = (
    "SELECT owner_id, epoch, expires_at_s FROM {ns}.leases WHERE conversation_id = %s FOR UPDATE"
)
_READ_LEASE = "SELECT owner_id, epoch, expires_at_s FROM {ns}.leases WHERE conversation_id = %s"
# A renewal extends only the exact lease it is handed: same owner *and* same epoch.
_RENEW = (
    "UPDATE {ns}.leases SET expires_at_s = %s "
    "WHERE conversation_id = %s AND owner_id = %s AND epoch = %s "
    "RETURNING owner_id, epoch, expires_at_s"
)

#: SQLSTATEs that mean the server found its own data damaged (class XX: data/index corrupted).
_CORRUPT_SQLSTATES = ("XX001", "XX002")

#: How long a transaction waits for another's lease-row lock before failing (milliseconds). A
#: holder keeps it for one transaction; a longer wait means the holder is stopped, and the caller
#: gets an error rather than a hang (``FileStore``'s lock waits as long).
LOCK_TIMEOUT_MS = 5000


class PgCursor(SQLCursor, Protocol):
    """A psycopg cursor: the rows, how many rows a statement changed, and a batch's inserts."""

    @property
    def rowcount(self) -> int: ...

    def executemany(self, query: str, params: Iterable[Sequence[SQLValue]], /) -> None: ...


class PgConnection(Protocol):
    """What the store uses of a psycopg connection (``psycopg.Connection`` has it)."""

    def execute(self, query: str, params: Sequence[SQLValue] = ..., /) -> PgCursor: ...

    def cursor(self) -> AbstractContextManager[PgCursor]: ...

    @property
    def closed(self) -> bool: ...

    @property
    def broken(self) -> bool: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class PgDriver(Protocol):
    """What the store uses of the ``psycopg`` module. mypy checks the module against it where
    ``import_psycopg`` returns it, so the store's annotations need no import of the driver (an
    optional extra), and a driver that lacks something the store uses fails the type check."""

    @property
    def Error(self) -> type[Exception]: ...

    def connect(
        self, conninfo: str, /, *, autocommit: bool, connect_timeout: int
    ) -> PgConnection: ...


class PgErrors(Protocol):
    """What the store uses of ``psycopg.errors``: the one SQLSTATE class it handles by name. A
    protocol of its own: mypy does not count a submodule as an attribute of its package."""

    @property
    def UniqueViolation(self) -> type[Exception]: ...


def import_psycopg() -> PgDriver:
    """The driver, imported on first use so ``durable`` imports without it."""
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(
            f"PostgresStore needs the psycopg 3 driver: pip install '{EXTRA}' ({exc})"
        ) from exc
    return psycopg


def psycopg_errors() -> PgErrors:
    """``psycopg.errors``, once ``import_psycopg`` has found the driver (which imports it)."""
    import psycopg.errors

    return psycopg.errors


def check_namespace(namespace: str) -> str:
    """A schema name that needs no quoting (it is spliced into SQL, so it must be plain)."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"invalid namespace {namespace!r}: must match [a-z_][a-z0-9_]{{0,62}}")
    return namespace


class PostgresStore:
    """A store in one schema of a PostgreSQL database.

    ``conninfo`` is a libpq connection string or URI; ``namespace`` is the schema holding the
    tables, so several stores (or tests) can share one database without seeing each other. The
    connection is opened lazily inside the first blocking call, so constructing a store does no
    I/O, and reopened after a failure. Calls are serialised by a trio lock: one connection runs
    one transaction at a time.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        blocking: Blocking,
        namespace: str = "durable",
        connect_timeout_s: int = 10,
    ) -> None:
        self._pg = import_psycopg()
        self._pg_errors = psycopg_errors()
        self._conninfo = conninfo
        self._ns = check_namespace(namespace)
        self._blocking = blocking
        self._connect_timeout_s = connect_timeout_s
        self._schema_ready = False
        self._conn: PgConnection | None = None
        self._lock = trio.Lock()

    @property
    def namespace(self) -> str:
        return self._ns

    def describe(self) -> str:
        return (
            f"postgres store (schema {self._ns}: acknowledged commits survive a worker crash, and "
            "the server's crash and power loss as far as its commit is durable: fsync=on, "
            "synchronous_commit=on)"
        )

    def _sql(self, template: str) -> str:
        return template.format(ns=self._ns)

    # -- connection and transactions ------------------------------------------------------------

    def _connection(self) -> PgConnection:
        """Open (once) and set up the schema. Runs inside a blocking call."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = self._pg.connect(
            self._conninfo, autocommit=True, connect_timeout=self._connect_timeout_s
        )
        try:
            conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
            if not self._schema_ready:
                # CREATE ... IF NOT EXISTS races with itself across sessions (a unique violation
                # in the catalogue): a transaction-scoped advisory lock keyed by the schema name
                # makes concurrent first opens take turns.
                conn.execute("BEGIN")
                try:
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._ns,))
                    self._check_tables(conn)
                    for statement in _SCHEMA:
                        conn.execute(self._sql(statement))
                except Exception:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                self._schema_ready = True
        except Exception:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _check_tables(self, conn: PgConnection) -> None:
        """Before the schema is created: refuse a schema that holds some of the store's tables
        but not all (``SQLiteStore._check_tables``, the same rule): they are created in one
        transaction, so one missing beside the others was dropped, and creating it empty would
        write before the refusal that follows. A read: nothing is written."""
        rows = conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = %s", (self._ns,)
        ).fetchall()
        present = {row[0] for row in rows} & set(_TABLES)
        missing = [name for name in _TABLES if name not in present]
        if present and missing:
            raise CorruptStore(
                f"{self._where()}: the store's table(s) {', '.join(missing)} missing, though "
                f"{', '.join(sorted(present))} remain: dropped or damaged (nothing was written)"
            )

    def _transaction(self, body: Callable[[PgConnection], T], *, write: bool) -> Callable[[], T]:
        """Wrap ``body`` into one whole transaction, rolled back if anything in it raises."""

        def run() -> T:
            conn = self._connection()
            try:
                conn.execute(
                    "BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                )
                try:
                    result = body(conn)
                except Exception:
                    if not conn.closed and not conn.broken:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result
            except self._pg.Error as exc:
                if conn.broken:  # the next call reconnects; this one's error propagates
                    self._conn = None
                if getattr(exc, "sqlstate", None) in _CORRUPT_SQLSTATES:
                    raise CorruptStore(
                        f"{self._where()}: the server reports damage: {exc}"
                    ) from exc
                raise

        return run

    async def _run(self, label: str, body: Callable[[PgConnection], T], *, write: bool) -> T:
        async with self._lock:
            return await self._blocking.run(label, self._transaction(body, write=write))

    def _where(self) -> str:
        return f"postgres schema {self._ns}"

    def abandon(self) -> None:
        """Drop the connection as a killed process's kernel does: the socket is shut down with
        no COMMIT and no goodbye (libpq's Terminate message) sent first, so the server sees the
        connection end and rolls back any transaction it had open -- releasing its row locks,
        which a successor would otherwise wait on. Then the descriptor is freed. No rollback is
        issued: a dead process issues nothing (a simulator's kill lands here)."""
        conn, self._conn = self._conn, None
        if conn is None or conn.closed:
            return
        try:
            # A duplicate of the descriptor, shut down: shutdown acts on the socket itself, so
            # the server sees end-of-file at once; libpq's own descriptor stays valid to close.
            with socket.socket(fileno=os.dup(conn.fileno())) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already gone (the server or the network closed it): nothing left to end
        conn.close()  # frees the descriptor; its Terminate finds the socket shut, and is lost

    async def close(self) -> None:
        """Normal shutdown: close the connection."""
        conn, self._conn = self._conn, None
        if conn is None:
            return

        def run() -> None:
            conn.close()

        async with self._lock:
            await self._blocking.run("postgres.close", run)

    # -- leases --------------------------------------------------------------------------------

    def _lease_row(self, conn: PgConnection, conversation_id: str, *, lock: bool) -> Lease | None:
        """The stored lease; with ``lock`` the row stays locked until the transaction ends."""
        row = conn.execute(
            self._sql(_LOCK_LEASE if lock else _READ_LEASE), (conversation_id,)
        ).fetchone()
        return None if row is None else self._as_lease(conversation_id, row)

    def _as_lease(self, conversation_id: str, row: Row) -> Lease:
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
                f"{self._where()}: leases row ({conversation_id}) is not a lease: {first}"
            ) from exc

    def _fence(self, conn: PgConnection, conversation_id: str, owner_id: str, epoch: int) -> None:
        """``check_fence`` on the lease row, locked ``FOR UPDATE`` so it stays the stored lease
        until this transaction's write commits."""
        lease = self._lease_row(conn, conversation_id, lock=True)
        check_fence(lease, conversation_id, owner_id=owner_id, epoch=epoch)

    async def current_lease(self, conversation_id: str) -> Lease | None:
        check_conversation_id(conversation_id)
        return await self._run(
            "postgres.read",
            lambda conn: self._lease_row(conn, conversation_id, lock=False),
            write=False,
        )

    def _acquire_body(
        self,
        conn: PgConnection,
        conversation_id: str,
        owner_id: str,
        *,
        ttl_s: float,
        now_s: float,
    ) -> Lease:
        """One acquisition attempt, inside a write transaction: refuse what the new owner's
        recovery would refuse before anything is written (``_check_recoverable``)."""
        previous = self._lease_row(conn, conversation_id, lock=True)
        self._check_recoverable(conn, conversation_id, previous)
        lease = granted_lease(previous, conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)
        values = (lease.owner_id, lease.epoch, lease.expires_at_s, conversation_id)
        if previous is None:
            # A plain INSERT: a concurrent first acquirer makes it fail on the primary key (the
            # caller retries), where an upsert would hand out epoch 1 twice.
            conn.execute(
                self._sql(
                    "INSERT INTO {ns}.leases (owner_id, epoch, expires_at_s, conversation_id) "
                    "VALUES (%s, %s, %s, %s)"
                ),
                values,
            )
        else:
            updated = conn.execute(
                self._sql(
                    "UPDATE {ns}.leases SET owner_id = %s, epoch = %s, expires_at_s = %s "
                    "WHERE conversation_id = %s"
                ),
                values,
            ).rowcount
            # The row is locked by this transaction and never deleted: exactly one is updated.
            assert updated == 1, f"lease update of {conversation_id} touched {updated} rows"
        return lease

    def _check_recoverable(
        self, conn: PgConnection, conversation_id: str, previous: Lease | None
    ) -> None:
        """``check_recoverable_rows`` on this conversation's rows, before a lease is written."""
        last_row = conn.execute(
            self._sql(
                "SELECT sequence, record FROM {ns}.events WHERE conversation_id = %s "
                "ORDER BY sequence DESC LIMIT 1"
            ),
            (conversation_id,),
        ).fetchone()
        check_recoverable_rows(
            self._where(),
            conversation_id,
            stored=previous,
            last_row=None if last_row is None else (int(last_row[0]), last_row[1]),
            checkpoint_rows=self._checkpoint_rows(conn, conversation_id),
            rows_after=lambda start: self._event_rows(conn, conversation_id, start),
        )

    def _event_rows(
        self, conn: PgConnection, conversation_id: str, start: int
    ) -> list[tuple[int, str]]:
        return [
            (int(row[0]), row[1])
            for row in conn.execute(
                self._sql(
                    "SELECT sequence, record FROM {ns}.events "
                    "WHERE conversation_id = %s AND sequence > %s ORDER BY sequence"
                ),
                (conversation_id, start),
            ).fetchall()
        ]

    def _checkpoint_rows(self, conn: PgConnection, conversation_id: str) -> list[tuple[int, str]]:
        return [
            (int(row[0]), row[1])
            for row in conn.execute(
                self._sql(
                    "SELECT through_sequence, body FROM {ns}.checkpoints "
                    "WHERE conversation_id = %s ORDER BY through_sequence DESC"
                ),
                (conversation_id,),
            ).fetchall()
        ]

    async def acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        """Take the lease unless another owner holds it unexpired; the epoch always increases."""
        check_conversation_id(conversation_id)

        def body(conn: PgConnection) -> Lease:
            return self._acquire_body(conn, conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)

        try:
            return await self._run("postgres.lease", body, write=True)
        except self._pg_errors.UniqueViolation:
            # Lost the race to create the row: the winner committed it, so this attempt now finds
            # and locks it (a second unique violation cannot happen: the row is never deleted).
            return await self._run("postgres.lease", body, write=True)

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        """Extend exactly this lease (same owner and epoch); anything else is ``StaleLease``."""
        conversation_id = check_conversation_id(lease.conversation_id)

        def body(conn: PgConnection) -> Lease:
            row = conn.execute(
                self._sql(_RENEW), (now_s + ttl_s, conversation_id, lease.owner_id, lease.epoch)
            ).fetchone()
            if row is not None:
                return self._as_lease(conversation_id, row)
            raise refused_renewal(lease, self._lease_row(conn, conversation_id, lock=False))

        return await self._run("postgres.lease", body, write=True)

    async def release_lease(self, lease: Lease) -> None:
        """Expire the lease now, keeping its epoch so the next acquirer gets epoch + 1. A stale
        release changes nothing (the update matches no row)."""
        conversation_id = check_conversation_id(lease.conversation_id)

        def body(conn: PgConnection) -> None:
            conn.execute(
                self._sql(
                    "UPDATE {ns}.leases SET expires_at_s = -1.0 "
                    "WHERE conversation_id = %s AND owner_id = %s AND epoch = %s"
                ),
                (conversation_id, lease.owner_id, lease.epoch),
            )

        await self._run("postgres.lease", body, write=True)

    # -- the event log -------------------------------------------------------------------------

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, *, repair: bool = False
    ) -> list[EventRecord]:
        """The records after ``after_sequence``, each verified, contiguous and batch-complete.

        The server commits whole transactions, so there is no torn tail and any bad row is
        corruption of committed data. ``repair`` (the lease holder recovering) also checks that
        no checkpoint lies beyond the log: a checkpoint is saved only after the commits it
        covers, so one beyond the last row proves those rows were lost (``CorruptStore``).
        """
        check_conversation_id(conversation_id)
        start = max(after_sequence, 0)

        def body(conn: PgConnection) -> tuple[list[tuple[int, str]], int, int]:
            """The rows and (when repairing) the newest checkpoint and the log's last sequence,
            in one snapshot."""
            rows = self._event_rows(conn, conversation_id, start)
            if not repair:
                return rows, 0, 0
            newest = conn.execute(
                self._sql(
                    "SELECT MAX(through_sequence) FROM {ns}.checkpoints WHERE conversation_id = %s"
                ),
                (conversation_id,),
            ).fetchone()
            last = conn.execute(
                self._sql("SELECT MAX(sequence) FROM {ns}.events WHERE conversation_id = %s"),
                (conversation_id,),
            ).fetchone()
            return (
                rows,
                int(newest[0] or 0) if newest else 0,
                int(last[0] or 0) if last else 0,
            )

        rows, through, last = await self._run("postgres.read", body, write=False)
        if repair:
            lost_commits(self._where(), conversation_id, through=through, last_sequence=last)
        return self._verified(conversation_id, start, rows)

    def _verified(
        self, conversation_id: str, start: int, rows: list[tuple[int, str]]
    ) -> list[EventRecord]:
        """Parse and verify rows as ``SQLiteStore`` does: any bad row is ``CorruptStore``."""
        return verified_rows(self._where(), conversation_id, start, rows)

    def _insert_batch(
        self,
        conn: PgConnection,
        conversation_id: str,
        records: list[EventRecord],
        expected_sequence: int,
    ) -> None:
        """Check the sequence against the log and insert the batch (inside the caller's
        transaction, after its fence: the locked lease row keeps other writers out)."""
        (last,) = conn.execute(
            self._sql(
                "SELECT COALESCE(MAX(sequence), 0) FROM {ns}.events WHERE conversation_id = %s"
            ),
            (conversation_id,),
        ).fetchone() or (0,)
        check_sequences(records, expected_sequence, int(last))
        with conn.cursor() as cursor:
            cursor.executemany(
                self._sql(
                    "INSERT INTO {ns}.events (conversation_id, sequence, record) "
                    "VALUES (%s, %s, %s)"
                ),
                [(conversation_id, r.sequence, r.to_line()) for r in records],
            )

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

        def body(conn: PgConnection) -> None:
            self._fence(conn, conversation_id, owner_id, epoch)
            self._insert_batch(conn, conversation_id, records, expected_sequence)

        try:
            await self._run("postgres.commit", body, write=True)
        except self._pg_errors.UniqueViolation as exc:
            # Cannot happen while every writer locks the lease row first; the primary key is the
            # backstop that turns a duplicate sequence into the contract's error, not a crash.
            raise SequenceConflict(f"{conversation_id}: sequence already taken: {exc}") from exc
        batch.stored()  # the text a reader will get back from the row

    # -- checkpoints ---------------------------------------------------------------------------

    async def save_checkpoint(self, checkpoint: Checkpoint, *, owner_id: str, epoch: int) -> None:
        """Fence, store, and keep only this checkpoint and the newest older one (one transaction).

        Checkpoints newer than this one are removed as well, as the other stores do: the
        writer's log ends here, so a newer one cannot describe it.
        """
        conversation_id = check_conversation_id(checkpoint.conversation_id)
        through = checkpoint.through_sequence
        text = checkpoint.to_text()

        def body(conn: PgConnection) -> None:
            self._fence(conn, conversation_id, owner_id, epoch)
            conn.execute(
                self._sql(
                    "INSERT INTO {ns}.checkpoints (conversation_id, through_sequence, body) "
                    "VALUES (%s, %s, %s) ON CONFLICT (conversation_id, through_sequence) "
                    "DO UPDATE SET body = EXCLUDED.body"
                ),
                (conversation_id, through, text),
            )
            conn.execute(
                self._sql(
                    "DELETE FROM {ns}.checkpoints WHERE conversation_id = %s AND ("
                    "through_sequence > %s OR through_sequence < ("
                    "SELECT MAX(through_sequence) FROM {ns}.checkpoints "
                    "WHERE conversation_id = %s AND through_sequence < %s))"
                ),
                (conversation_id, through, conversation_id, through),
            )

        await self._run("postgres.checkpoint", body, write=True)

    async def load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        """Every stored checkpoint, newest first; the caller verifies checksums. A row that does
        not parse is ``CorruptStore`` (a transaction writes it whole: only damage explains it)."""
        check_conversation_id(conversation_id)

        rows = await self._run(
            "postgres.read", lambda conn: self._checkpoint_rows(conn, conversation_id), write=False
        )
        return parsed_checkpoints(self._where(), conversation_id, rows)

    # -- listing -------------------------------------------------------------------------------

    async def list_conversations(self) -> list[str]:
        def body(conn: PgConnection) -> list[str]:
            rows = conn.execute(
                self._sql(
                    "SELECT conversation_id FROM {ns}.events "
                    "UNION SELECT conversation_id FROM {ns}.leases"
                )
            ).fetchall()
            return sorted(row[0] for row in rows)

        return await self._run("postgres.read", body, write=False)
