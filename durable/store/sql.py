"""``SqlStore``: the store contract on a SQL database, written once for ``SQLiteStore`` and
``PostgresStore``.

Both database stores keep the same three tables and run every operation as one whole transaction
handed to the ``Blocking`` port; what they do inside a transaction -- the fence, the sequence
check, the recovery checks before a lease is granted, the reads and their verification -- is one
rule, so it is written here once, and a bug (or a planted mutant) in it is one bug, not a pair.

What each store keeps is what really differs between the two databases:

- its connection's life: opening, setting up and closing it, entering and leaving a
  transaction (``_transaction``), translating the driver's errors (busy, damaged, lost), what a
  killed process leaves behind (``abandon``), and its schema (``_SCHEMA``, ``_stored_tables``);
- its dialect: the placeholder (``%s`` in the statements below, ``?`` for SQLite), where its
  tables live (``_prefix``: a PostgreSQL schema), the row lock a fence takes (``_LOCK_CLAUSE``:
  ``FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already locks the whole database),
  how a lease and a checkpoint row are written (``_put_lease``, ``_PUT_CHECKPOINT``), how a batch
  of rows is inserted (``_executemany``), and the error of a taken primary key
  (``_key_violation``: PostgreSQL's first acquirers can race to insert the lease row).

Every refusal names the database (``_place``), so an operator with several stores knows which to
look at; the texts are the ones each store has always used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar

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
    renewed_lease,
    verified_rows,
)

T = TypeVar("T")

#: The store's tables, in the order each store's schema creates them.
TABLES = ("events", "checkpoints", "leases")


class Executor(Protocol):
    """What the shared bodies use of a connection: one statement at a time, and its close.
    apsw's, the standard library's ``sqlite3`` (``durable.inspect``) and psycopg's all have it."""

    def execute(self, sql: str, params: Sequence[SQLValue] = ..., /) -> SQLCursor: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=Executor)


class SqlStore(Generic[C]):
    """The store contract on three tables of a SQL database; a subclass supplies the connection
    (``_connection``, ``_transaction``, ``abandon``) and the dialect (the class attributes and
    hooks named in the module's docstring).

    Calls are serialised by a trio lock: one connection must not run two transactions at once
    from two worker threads. Every blocking call is labelled ``KIND.OPERATION`` (``sqlite.commit``,
    ``postgres.lease``): the simulator's crash points and the fleet's pauses are named by it.
    """

    #: The labels' first part: ``sqlite`` or ``postgres``.
    _KIND: ClassVar[str]
    #: The driver's placeholder for a parameter, put where a statement below says ``%s``.
    _PLACEHOLDER: ClassVar[str]
    #: What a fence's read of the lease row appends, so the row stays the stored lease until the
    #: transaction's write commits ("" where the transaction already excludes other writers).
    _LOCK_CLAUSE: ClassVar[str]
    #: The statement that stores a checkpoint row, replacing one of the same key.
    _PUT_CHECKPOINT: ClassVar[str]
    #: The refusal of a lease row that is not a lease: ``place``, ``conversation_id``, ``first``
    #: (the validation error's first line).
    _NOT_A_LEASE: ClassVar[str]
    #: The driver's errors that mean a primary key was taken (none where nothing can race).
    _key_violation: tuple[type[Exception], ...] = ()

    def __init__(self, *, blocking: Blocking, prefix: str = "") -> None:
        self._blocking = blocking
        self._prefix = prefix  # before each table's name: "" or a schema and a dot
        self._statements: dict[str, str] = {}
        self._schema_ready = False
        self._conn: C | None = None
        self._lock = trio.Lock()

    # -- what a store supplies -----------------------------------------------------------------

    def _place(self) -> str:
        """The database, as every refusal names it."""
        raise NotImplementedError

    def _connection(self) -> C:
        """The open connection, opened (and its schema created) first if need be. Runs inside a
        blocking call."""
        raise NotImplementedError

    def _transaction(self, body: Callable[[C], T], *, write: bool) -> Callable[[], T]:
        """Wrap ``body`` into one whole transaction, rolled back if anything in it raises."""
        raise NotImplementedError

    def _stored_tables(self, conn: C) -> set[str]:
        """Which of ``TABLES`` the database holds (a read, before the schema is created)."""
        raise NotImplementedError

    def _put_lease(self, conn: C, lease: Lease, *, previous: Lease | None) -> None:
        """Store ``lease`` over ``previous``, the row read (and locked) in this transaction."""
        raise NotImplementedError

    def _executemany(self, conn: C, sql: str, rows: Iterable[Sequence[SQLValue]]) -> None:
        """Run ``sql`` once per row: a connection of apsw's (or ``sqlite3``'s) does it itself,
        psycopg's only through a cursor."""
        raise NotImplementedError

    # -- statements and transactions -----------------------------------------------------------

    def _sql(self, template: str) -> str:
        """``template`` in this database's dialect: ``{events}``, ``{checkpoints}`` and
        ``{leases}`` become the tables' names, ``%s`` the driver's placeholder. Kept, so a
        statement is built once per store."""
        sql = self._statements.get(template)
        if sql is None:
            names = {table: f"{self._prefix}{table}" for table in TABLES}
            sql = template.format(**names).replace("%s", self._PLACEHOLDER)
            self._statements[template] = sql
        return sql

    def _label(self, operation: str) -> str:
        return f"{self._KIND}.{operation}"

    async def _run(self, label: str, body: Callable[[C], T], *, write: bool) -> T:
        async with self._lock:
            return await self._blocking.run(label, self._transaction(body, write=write))

    def _lock_schema(self, conn: C) -> None:
        """Inside the schema's transaction, before the tables are checked: whatever keeps two
        first opens from creating the schema at once, beyond what ``begin`` already takes."""

    def _create_schema(self, conn: C, begin: str, statements: Sequence[str]) -> None:
        """Check the tables (``_check_tables``) and create the missing ones in one transaction,
        entered by ``begin``: all three or none, and a refusal writes nothing."""
        conn.execute(begin)
        try:
            self._lock_schema(conn)
            self._check_tables(conn)
            for statement in statements:
                conn.execute(statement)
        except Exception:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self._schema_ready = True

    def _check_tables(self, conn: C) -> None:
        """Before the schema is created: refuse a database that holds some of the store's
        tables but not all. A new database holds none (the schema is created), a store's all
        three (creating them again changes nothing); the three are created in one transaction,
        so a crash never leaves only some. A table missing beside the others was dropped --
        by an operator, a tool, damage -- and creating an empty one would write before the
        refusal that follows (a missing events table under a checkpoint reads as lost
        commits) and leave every later attempt to refuse over a database that no longer
        looks as found. A read inside the schema's transaction: nothing is written."""
        present = self._stored_tables(conn)
        missing = [name for name in TABLES if name not in present]
        if present and missing:
            raise CorruptStore(
                f"{self._place()}: the store's table(s) {', '.join(missing)} missing, though "
                f"{', '.join(sorted(present))} remain: dropped or damaged (nothing was written)"
            )

    async def close(self) -> None:
        """Normal shutdown: close the connection."""
        conn, self._conn = self._conn, None
        if conn is None:
            return

        def run() -> None:
            conn.close()

        async with self._lock:
            await self._blocking.run(self._label("close"), run)

    # -- leases --------------------------------------------------------------------------------

    def _lease_row(self, conn: C, conversation_id: str, *, lock: bool) -> Lease | None:
        """The stored lease (None: no row); with ``lock`` the row stays locked until the
        transaction ends (``_LOCK_CLAUSE``)."""
        read = "SELECT owner_id, epoch, expires_at_s FROM {leases} WHERE conversation_id = %s"
        row = conn.execute(
            self._sql(read + self._LOCK_CLAUSE if lock else read), (conversation_id,)
        ).fetchone()
        return None if row is None else self._as_lease(conversation_id, row)

    def _as_lease(self, conversation_id: str, row: Row) -> Lease:
        """A lease row as a ``Lease``; a row that is not one is ``CorruptStore`` naming the
        database."""
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
                self._NOT_A_LEASE.format(
                    place=self._place(), conversation_id=conversation_id, first=first
                )
            ) from exc

    def _fence(self, conn: C, conversation_id: str, owner_id: str, epoch: int) -> None:
        """``check_fence`` on the lease row, inside the write transaction, the row locked so it
        stays the stored lease until this transaction's write commits."""
        lease = self._lease_row(conn, conversation_id, lock=True)
        check_fence(lease, conversation_id, owner_id=owner_id, epoch=epoch)

    async def current_lease(self, conversation_id: str) -> Lease | None:
        check_conversation_id(conversation_id)
        return await self._run(
            self._label("read"),
            lambda conn: self._lease_row(conn, conversation_id, lock=False),
            write=False,
        )

    def _acquire_body(
        self, conn: C, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        """One acquisition attempt, inside a write transaction: refuse what the new owner's
        recovery would refuse before anything is written (``_check_recoverable``)."""
        previous = self._lease_row(conn, conversation_id, lock=True)
        self._check_recoverable(conn, conversation_id, previous)
        lease = granted_lease(previous, conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)
        self._put_lease(conn, lease, previous=previous)
        return lease

    async def acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        """Take the lease unless another owner holds it unexpired; the epoch always increases."""
        check_conversation_id(conversation_id)

        def body(conn: C) -> Lease:
            return self._acquire_body(conn, conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)

        try:
            return await self._run(self._label("lease"), body, write=True)
        except self._key_violation:
            # Lost the race to create the row: the winner committed it, so this attempt now finds
            # and locks it (a second violation cannot happen: the row is never deleted).
            return await self._run(self._label("lease"), body, write=True)

    def _check_recoverable(self, conn: C, conversation_id: str, previous: Lease | None) -> None:
        """Before an acquisition writes the lease: refuse what the new owner's recovery would
        refuse (``check_recoverable_rows``), so a refusal leaves the database as it was."""
        last_row = conn.execute(
            self._sql(
                "SELECT sequence, record FROM {events} WHERE conversation_id = %s "
                "ORDER BY sequence DESC LIMIT 1"
            ),
            (conversation_id,),
        ).fetchone()
        check_recoverable_rows(
            self._place(),
            conversation_id,
            stored=previous,
            last_row=None if last_row is None else (last_row[0], last_row[1]),
            checkpoint_rows=self._checkpoint_rows(conn, conversation_id),
            rows_after=lambda start: self._event_rows(conn, conversation_id, start),
        )

    def _event_rows(self, conn: C, conversation_id: str, start: int) -> list[tuple[int, str]]:
        return self._pairs(
            conn,
            "SELECT sequence, record FROM {events} WHERE conversation_id = %s "
            "AND sequence > %s ORDER BY sequence",
            (conversation_id, start),
        )

    def _checkpoint_rows(self, conn: C, conversation_id: str) -> list[tuple[int, str]]:
        return self._pairs(
            conn,
            "SELECT through_sequence, body FROM {checkpoints} WHERE conversation_id = %s "
            "ORDER BY through_sequence DESC",
            (conversation_id,),
        )

    def _pairs(self, conn: C, template: str, params: Sequence[SQLValue]) -> list[tuple[int, str]]:
        """A query's rows of (sequence, text): event rows, checkpoint rows."""
        return [(row[0], row[1]) for row in conn.execute(self._sql(template), params).fetchall()]

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        """Extend exactly this lease (same owner and epoch); anything else is ``StaleLease``."""
        check_conversation_id(lease.conversation_id)

        def body(conn: C) -> Lease:
            stored = self._lease_row(conn, lease.conversation_id, lock=True)
            renewed = renewed_lease(stored, lease, ttl_s=ttl_s, now_s=now_s)
            self._put_lease(conn, renewed, previous=stored)
            return renewed

        return await self._run(self._label("lease"), body, write=True)

    async def release_lease(self, lease: Lease) -> None:
        """Expire the lease now, keeping its epoch so the next acquirer gets epoch + 1. A stale
        release changes nothing."""
        check_conversation_id(lease.conversation_id)

        def body(conn: C) -> None:
            stored = self._lease_row(conn, lease.conversation_id, lock=True)
            if stored is None or (stored.owner_id, stored.epoch) != (lease.owner_id, lease.epoch):
                return
            expired = stored.model_copy(update={"expires_at_s": -1.0})
            self._put_lease(conn, expired, previous=stored)

        await self._run(self._label("lease"), body, write=True)

    # -- the event log -------------------------------------------------------------------------

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, *, repair: bool = False
    ) -> list[EventRecord]:
        """The records after ``after_sequence``, each verified, contiguous and batch-complete.

        The database commits whole transactions, so there is no torn tail and any bad row is
        corruption of committed data. ``repair`` (the lease holder recovering) also checks that
        no checkpoint lies beyond the log: a checkpoint is saved only after the commits it
        covers, so one beyond the last row proves those rows were lost (``CorruptStore``).
        """
        check_conversation_id(conversation_id)
        start = max(after_sequence, 0)

        def body(conn: C) -> tuple[list[tuple[int, str]], int, int]:
            """The rows and (when repairing) the newest checkpoint and the log's last sequence,
            in one read transaction (one snapshot)."""
            rows = self._event_rows(conn, conversation_id, start)
            if not repair:
                return rows, 0, 0
            newest = conn.execute(
                self._sql(
                    "SELECT MAX(through_sequence) FROM {checkpoints} WHERE conversation_id = %s"
                ),
                (conversation_id,),
            ).fetchone()
            last = conn.execute(
                self._sql("SELECT MAX(sequence) FROM {events} WHERE conversation_id = %s"),
                (conversation_id,),
            ).fetchone()
            assert newest is not None and last is not None  # aggregates without GROUP BY
            return rows, int(newest[0] or 0), int(last[0] or 0)

        rows, through, last = await self._run(self._label("read"), body, write=False)
        if repair:
            lost_commits(self._place(), conversation_id, through=through, last_sequence=last)
        return verified_rows(self._place(), conversation_id, start, rows)

    def _insert_batch(
        self, conn: C, conversation_id: str, records: list[EventRecord], expected_sequence: int
    ) -> None:
        """Check the sequence against the log and insert the batch (inside the caller's
        transaction, after its fence, which keeps other writers out)."""
        row = conn.execute(
            self._sql("SELECT COALESCE(MAX(sequence), 0) FROM {events} WHERE conversation_id = %s"),
            (conversation_id,),
        ).fetchone()
        assert row is not None  # an aggregate without GROUP BY returns one row
        (last,) = row
        check_sequences(records, expected_sequence, last)
        self._executemany(
            conn,
            self._sql(
                "INSERT INTO {events} (conversation_id, sequence, record) VALUES (%s, %s, %s)"
            ),
            [(conversation_id, record.sequence, record.to_line()) for record in records],
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

        def body(conn: C) -> None:
            self._fence(conn, conversation_id, owner_id, epoch)
            self._insert_batch(conn, conversation_id, records, expected_sequence)

        try:
            await self._run(self._label("commit"), body, write=True)
        except self._key_violation as exc:
            # Cannot happen while every writer fences first; the primary key is the backstop
            # that turns a duplicate sequence into the contract's error, not a crash.
            raise SequenceConflict(f"{conversation_id}: sequence already taken: {exc}") from exc
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

        def body(conn: C) -> None:
            self._fence(conn, conversation_id, owner_id, epoch)
            conn.execute(self._sql(self._PUT_CHECKPOINT), (conversation_id, through, text))
            conn.execute(
                self._sql(
                    "DELETE FROM {checkpoints} WHERE conversation_id = %s AND through_sequence > %s"
                ),
                (conversation_id, through),
            )
            conn.execute(
                self._sql(
                    "DELETE FROM {checkpoints} WHERE conversation_id = %s AND through_sequence < ("
                    "SELECT MAX(through_sequence) FROM {checkpoints} "
                    "WHERE conversation_id = %s AND through_sequence < %s)"
                ),
                (conversation_id, conversation_id, through),
            )

        await self._run(self._label("checkpoint"), body, write=True)

    async def load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        """Every stored checkpoint, newest first; the caller verifies checksums. A row that does
        not parse is ``CorruptStore`` (a transaction writes it whole: only damage explains it)."""
        check_conversation_id(conversation_id)

        rows = await self._run(
            self._label("read"),
            lambda conn: self._checkpoint_rows(conn, conversation_id),
            write=False,
        )
        return parsed_checkpoints(self._place(), conversation_id, rows)

    # -- listing -------------------------------------------------------------------------------

    async def list_conversations(self) -> list[str]:
        def body(conn: C) -> list[str]:
            rows = conn.execute(
                self._sql(
                    "SELECT conversation_id FROM {events} "
                    "UNION SELECT conversation_id FROM {leases}"
                )
            ).fetchall()
            return sorted(row[0] for row in rows)

        return await self._run(self._label("read"), body, write=False)
