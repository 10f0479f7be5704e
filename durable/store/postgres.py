"""``PostgresStore``: the store contract on a PostgreSQL server (psycopg 3, an optional extra).

Events, checkpoints and the lease live in three tables of one schema (the *namespace*), created
idempotently on first use. Every operation is one plain function that runs one whole transaction
and is handed to the ``Blocking`` port, exactly as ``SQLiteStore`` does: inline under the
simulator, on trio's worker threads in production. No transaction ever spans two blocking calls,
so a process that dies between calls leaves nothing open, and one that dies inside a call leaves a
transaction the server rolls back when the socket closes. What runs inside the transactions is
written once for both database stores (``durable.store.sql``); this module keeps the connection's
life and PostgreSQL's dialect.

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

from durable.ports import Blocking
from durable.store.base import (
    CorruptStore,
    Lease,
    SQLCursor,
    SQLValue,
    check_conversation_id,
    refused_renewal,
)
from durable.store.sql import TABLES, SqlStore

T = TypeVar("T")

#: What ``pip`` needs for this store; named in the error when the driver is missing.
EXTRA = "durable-sim[postgres]"

_NAMESPACE = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: The schema's statements; ``{ns}`` is the namespace, the rest is ``SqlStore._sql``'s.
_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS {ns}",
    """CREATE TABLE IF NOT EXISTS {events} (
        conversation_id TEXT NOT NULL,
        sequence BIGINT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (conversation_id, sequence)
    )""",
    """CREATE TABLE IF NOT EXISTS {checkpoints} (
        conversation_id TEXT NOT NULL,
        through_sequence BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (conversation_id, through_sequence)
    )""",
    """CREATE TABLE IF NOT EXISTS {leases} (
        conversation_id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at_s DOUBLE PRECISION NOT NULL
    )""",
)

# A renewal extends only the exact lease it is handed: same owner *and* same epoch.
_RENEW = (
    "UPDATE {leases} SET expires_at_s = %s "
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
        # the postgres extra: durable imports without psycopg
        import psycopg
    except ImportError as exc:
        raise ImportError(
            f"PostgresStore needs the psycopg 3 driver: pip install '{EXTRA}' ({exc})"
        ) from exc
    return psycopg


def psycopg_errors() -> PgErrors:
    """``psycopg.errors``, once ``import_psycopg`` has found the driver (which imports it)."""
    # the postgres extra: durable imports without psycopg
    import psycopg.errors

    return psycopg.errors


def check_namespace(namespace: str) -> str:
    """A schema name that needs no quoting (it is spliced into SQL, so it must be plain)."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"invalid namespace {namespace!r}: must match [a-z_][a-z0-9_]{{0,62}}")
    return namespace


class PostgresStore(SqlStore[PgConnection]):
    """A store in one schema of a PostgreSQL database.

    ``conninfo`` is a libpq connection string or URI; ``namespace`` is the schema holding the
    tables, so several stores (or tests) can share one database without seeing each other. The
    connection is opened lazily inside the first blocking call, so constructing a store does no
    I/O, and reopened after a failure. Calls are serialised by a trio lock: one connection runs
    one transaction at a time.

    Everything inside a transaction is ``SqlStore``'s; this class keeps the connection's life and
    PostgreSQL's dialect: ``%s`` placeholders, tables qualified by the namespace, the lease row
    locked ``FOR UPDATE`` by every fence (the module's docstring says why), a first lease row
    inserted (never upserted: a racing first acquirer's insert fails on the primary key and is
    retried), a checkpoint upserted, and a renewal and a release that are one conditional
    ``UPDATE`` each.
    """

    _KIND = "postgres"
    _PLACEHOLDER = "%s"
    _LOCK_CLAUSE = " FOR UPDATE"
    _PUT_CHECKPOINT = (
        "INSERT INTO {checkpoints} (conversation_id, through_sequence, body) "
        "VALUES (%s, %s, %s) ON CONFLICT (conversation_id, through_sequence) "
        "DO UPDATE SET body = EXCLUDED.body"
    )
    _NOT_A_LEASE = "{place}: leases row ({conversation_id}) is not a lease: {first}"

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
        self._key_violation = (self._pg_errors.UniqueViolation,)
        self._conninfo = conninfo
        self._ns = check_namespace(namespace)
        super().__init__(blocking=blocking, prefix=f"{self._ns}.")
        self._connect_timeout_s = connect_timeout_s

    @property
    def namespace(self) -> str:
        return self._ns

    def describe(self) -> str:
        return (
            f"postgres store (schema {self._ns}: acknowledged commits survive a worker crash, and "
            "the server's crash and power loss as far as its commit is durable: fsync=on, "
            "synchronous_commit=on)"
        )

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
                schema = [self._sql(statement.replace("{ns}", self._ns)) for statement in _SCHEMA]
                self._create_schema(conn, "BEGIN", schema)
        except Exception:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _lock_schema(self, conn: PgConnection) -> None:
        """CREATE ... IF NOT EXISTS races with itself across sessions (a unique violation in the
        catalogue): a transaction-scoped advisory lock keyed by the schema name makes concurrent
        first opens take turns."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._ns,))

    def _stored_tables(self, conn: PgConnection) -> set[str]:
        rows = conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = %s", (self._ns,)
        ).fetchall()
        return {row[0] for row in rows} & set(TABLES)

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
                        f"{self._place()}: the server reports damage: {exc}"
                    ) from exc
                raise

        return run

    def _place(self) -> str:
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

    # -- the dialect ---------------------------------------------------------------------------

    def _put_lease(self, conn: PgConnection, lease: Lease, *, previous: Lease | None) -> None:
        """A first lease row inserted, a stored one updated (it is locked by this transaction's
        fence or acquisition, and never deleted: exactly one row is updated)."""
        values = (lease.owner_id, lease.epoch, lease.expires_at_s, lease.conversation_id)
        if previous is None:
            # A plain INSERT: a concurrent first acquirer makes it fail on the primary key (the
            # caller retries), where an upsert would hand out epoch 1 twice.
            conn.execute(
                self._sql(
                    "INSERT INTO {leases} (owner_id, epoch, expires_at_s, conversation_id) "
                    "VALUES (%s, %s, %s, %s)"
                ),
                values,
            )
            return
        updated = conn.execute(
            self._sql(
                "UPDATE {leases} SET owner_id = %s, epoch = %s, expires_at_s = %s "
                "WHERE conversation_id = %s"
            ),
            values,
        ).rowcount
        assert updated == 1, f"lease update of {lease.conversation_id} touched {updated} rows"

    def _executemany(
        self, conn: PgConnection, sql: str, rows: Iterable[Sequence[SQLValue]]
    ) -> None:
        with conn.cursor() as cursor:
            cursor.executemany(sql, rows)

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        """Extend exactly this lease (same owner and epoch); anything else is ``StaleLease``.
        One conditional ``UPDATE``: it takes the row's lock itself, so no fence read goes
        first."""
        conversation_id = check_conversation_id(lease.conversation_id)

        def body(conn: PgConnection) -> Lease:
            row = conn.execute(
                self._sql(_RENEW), (now_s + ttl_s, conversation_id, lease.owner_id, lease.epoch)
            ).fetchone()
            if row is not None:
                return self._as_lease(conversation_id, row)
            raise refused_renewal(lease, self._lease_row(conn, conversation_id, lock=False))

        return await self._run(self._label("lease"), body, write=True)

    async def release_lease(self, lease: Lease) -> None:
        """Expire the lease now, keeping its epoch so the next acquirer gets epoch + 1. A stale
        release changes nothing (the update matches no row)."""
        conversation_id = check_conversation_id(lease.conversation_id)

        def body(conn: PgConnection) -> None:
            conn.execute(
                self._sql(
                    "UPDATE {leases} SET expires_at_s = -1.0 "
                    "WHERE conversation_id = %s AND owner_id = %s AND epoch = %s"
                ),
                (conversation_id, lease.owner_id, lease.epoch),
            )

        await self._run(self._label("lease"), body, write=True)
