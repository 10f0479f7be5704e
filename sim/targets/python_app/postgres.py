"""PostgreSQL commits as boundaries in a ``python`` target child: psycopg 3, sync and async, and
what is built on it -- SQLAlchemy's ``postgresql+psycopg`` dialect commits through psycopg's
``commit()``, so it needs no patch of its own and each of its commits crosses one boundary.

What crosses ``pg.commit#n`` (each commit exactly one):

- ``Connection.commit()`` and ``AsyncConnection.commit()``, so also the commit at the exit of
  ``with conn:`` / ``async with conn:`` and SQLAlchemy's ``Session.commit()``, ``engine.begin()``
  and ``Connection.commit()``: psycopg's ``BaseConnection._commit_gen``, the generator the sync
  and the async connection both drive, is wrapped once for both;
- the exit of the outermost ``conn.transaction()`` block (``BaseTransaction._commit_gen`` of a
  block that began the transaction; an inner block only releases a savepoint);
- in autocommit mode, outside a transaction block, a statement that changes rows: its first
  keyword is ``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``, ``TRUNCATE`` or ``CALL`` (a procedure
  may commit), or it is a ``WITH`` that holds one of the first four. It commits as it returns, so
  the statement is the boundary (an ``executemany`` batch is one). DDL in autocommit mode (``CREATE
  TABLE IF NOT EXISTS`` at start-up) is no boundary: a program does not record its progress there.

A commit with nothing to commit is no boundary, as for ``sqlite3``. The server decides: right
before the ``COMMIT``, one query in the same transaction asks whether it has a transaction id
(PostgreSQL assigns one at the first write, DDL included). A transaction that only read, or that
failed (its ``COMMIT`` rolls back), crosses none. In pipeline mode nothing can be asked first:
such a commit is always a boundary. What was committed, in the trace row's details, is the
transaction's statements that write (their first words; ``SHOWN`` of them and a count), noted
as the cursors run them: the server's per-transaction row counts cannot say it, as they carry
counts of earlier transactions until the backend reports them.

Why an import hook: the child must not import psycopg (or SQLAlchemy) for a program that does
not use it -- importing psycopg alone took 0.1-0.5 s per process on the 2-core test machine, paid
by every process of every point, and could fail on an unrelated install. ``install`` puts a
finder first on ``sys.meta_path`` that only compares a name on each import; when the program (or
SQLAlchemy, at ``create_engine``) imports ``psycopg``, the finder has the real loader patch the
package right after it ran, then steps aside. Nothing is patched where psycopg is not installed.

Not seen: a ``COMMIT`` executed as SQL, two-phase commit (``tpc_commit``), ``COPY`` in
autocommit mode, autocommit statements in pipeline mode, server-side (named) cursors, a query
given as a template string, other drivers (psycopg2, asyncpg).
"""

from __future__ import annotations

import importlib
import importlib.abc
import inspect
import re
import sys
import weakref
from collections.abc import Callable, Generator, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Protocol

from sim.targets.boundaries import Boundaries
from sim.targets.kit.landing import DETAIL_CHARS

#: The boundary kind of every commit: ``pg.commit#n``.
KIND = "pg.commit"
#: The package whose import is patched.
PACKAGE = "psycopg"
#: libpq's ``PQTransactionStatus`` values the wrappers test (``psycopg.pq.TransactionStatus``).
_IDLE, _INTRANS = 0, 2
_LEADING = r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*"
_CHANGES_ROWS = re.compile(
    _LEADING + r"(?:(?:INSERT|UPDATE|DELETE|MERGE|TRUNCATE|CALL)\b"
    r"|WITH\b.*\b(?:INSERT|UPDATE|DELETE|MERGE)\b)",
    re.IGNORECASE | re.DOTALL,
)
_DDL = re.compile(_LEADING + r"(?:CREATE|ALTER|DROP|COMMENT|GRANT|REVOKE)\b", re.IGNORECASE)
#: Whether the transaction wrote anything, asked of the server before its commit: whether it
#: has a transaction id. ``{xid}`` is the server's function for it.
_PROBE = "SELECT {xid}() IS NOT NULL"
#: How many of a transaction's writing statements a commit's details show.
SHOWN = 3
#: The details of a commit that wrote through no statement the cursors saw (a function's writes).
_UNSEEN = "writes made by no statement seen (a function, a COPY...)"
#: Characters of a statement a commit's details keep.
_HEAD_CHARS = 120


class _Writes:
    """The writing statements of a connection's open transaction, as the details show them."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.count = 0

    def add(self, head: str) -> None:
        self.count += 1
        if len(self.heads) < SHOWN:
            self.heads.append(head[:_HEAD_CHARS])

    def text(self) -> str:
        more = self.count - len(self.heads)
        return "; ".join(self.heads) + (f" (+{more} more)" if more else "")


class _PgConn(Protocol):
    """The libpq connection under a psycopg connection: what the wrappers ask of it."""

    @property
    def transaction_status(self) -> int: ...
    @property
    def server_version(self) -> int: ...


class _Result(Protocol):
    """A psycopg ``PGresult``: the probe's one value."""

    @property
    def ntuples(self) -> int: ...
    def get_value(self, row: int, column: int) -> bytes | None: ...


class _Connection(Protocol):
    """The parts of psycopg's ``BaseConnection`` (private ones too: this module patches its
    internals, for psycopg 3) the wrappers read. Its generators yield psycopg's waits and are
    sent its readiness, which the wrappers only pass along."""

    pgconn: _PgConn
    autocommit: bool
    _pipeline: object
    _num_transactions: int

    def _exec_command(self, command: bytes) -> Generator[object, object, _Result | None]: ...


class _Transaction(Protocol):
    """psycopg's ``BaseTransaction``: its connection and whether it is the outer block."""

    _conn: _Connection
    _outer_transaction: bool


class _Cursor(Protocol):
    """A psycopg cursor: the connection it runs its statements on."""

    _conn: _Connection


#: A psycopg generator as the wrappers see it: what it yields and is sent is psycopg's, passed on.
_Gen = Generator[object, object, object]


class _Committing(Protocol):
    """A psycopg class whose commit is a generator method (a connection's, a transaction's)."""

    _commit_gen: Callable[..., _Gen]


class _Entering(Protocol):
    """psycopg's ``BaseTransaction`` class: the generator its block's entry runs."""

    _enter_gen: Callable[..., _Gen]


# Each connection's open transaction's writing statements (a connection that goes away, goes).
_WRITES: weakref.WeakKeyDictionary[_Connection, _Writes] = weakref.WeakKeyDictionary()


def install(boundaries: Boundaries) -> None:
    """From now on, in this child: psycopg's commits are boundaries, once the program imports
    it (at once if it is already imported)."""
    module = sys.modules.get(PACKAGE)
    if module is not None:
        patch(module, boundaries)
        return
    sys.meta_path.insert(0, _AfterImport(PACKAGE, lambda loaded: patch(loaded, boundaries)))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the finders after it for ``name``'s spec and makes its loader
    call ``then(module)`` once the module has run (see the module docstring)."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self._name, self._then = name, then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self._name:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        loader = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            self._then(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this loader instance only
        return spec


def patch(psycopg: ModuleType, boundaries: Boundaries) -> None:
    """Wrap psycopg's commit generators and its cursors' ``execute`` (see the module
    docstring). Once per process."""
    if getattr(psycopg, "_durable_sim_commits", False):
        return
    psycopg._durable_sim_commits = True  # type: ignore[attr-defined]  # a mark on the module
    transaction = importlib.import_module(f"{PACKAGE}.transaction")
    _wrap_connection_commit(psycopg.BaseConnection, boundaries)
    _wrap_transaction_commit(transaction.BaseTransaction, boundaries)
    _wrap_transaction_enter(transaction.BaseTransaction)
    for cursor in (psycopg.Cursor, psycopg.AsyncCursor):
        for name in ("execute", "executemany"):
            _wrap_statement(cursor, name, boundaries)


def _wrap_connection_commit(owner: _Committing, boundaries: Boundaries) -> None:
    original = owner._commit_gen

    def _commit_gen(self: _Connection) -> _Gen:
        refused = self._num_transactions or getattr(self, "_tpc", None)
        if refused or self.pgconn.transaction_status != _INTRANS:
            return (yield from original(self))  # psycopg's own refusal, or nothing to commit
        return (yield from _crossing(self, boundaries, lambda: original(self)))

    owner._commit_gen = _commit_gen


def _wrap_transaction_commit(owner: _Committing, boundaries: Boundaries) -> None:
    original = owner._commit_gen

    def _commit_gen(self: _Transaction) -> _Gen:
        conn = self._conn
        in_order = (
            conn._num_transactions == getattr(self, "_stack_index", conn._num_transactions - 1) + 1
        )
        outermost = self._outer_transaction and in_order
        if not outermost or conn.pgconn.transaction_status != _INTRANS:
            return (yield from original(self))  # a savepoint's release, or psycopg's refusal
        return (yield from _crossing(conn, boundaries, lambda: original(self)))

    owner._commit_gen = _commit_gen


def _wrap_transaction_enter(owner: _Entering) -> None:
    """A block that begins a transaction starts its list of writes afresh (its ``BEGIN`` is no
    cursor's statement; one that began at a cursor's does, ``_seen``)."""
    original = owner._enter_gen

    def _enter_gen(self: _Transaction) -> _Gen:
        if self._conn.pgconn.transaction_status == _IDLE:
            _WRITES.pop(self._conn, None)
        return (yield from original(self))

    owner._enter_gen = _enter_gen


def _crossing(
    conn: _Connection,
    boundaries: Boundaries,
    commit: Callable[[], _Gen],
) -> _Gen:
    """``commit()``'s generator between the ``before`` and ``after`` instants of the next
    ``pg.commit#n`` -- when the transaction wrote something (``_written``)."""
    wrote = yield from _written(conn)
    writes = _WRITES.pop(conn, None)
    if not wrote:
        return (yield from commit())
    label = boundaries.numbered(KIND)
    what = _UNSEEN if writes is None else writes.text()
    boundaries.before(label, what=what[:DETAIL_CHARS])
    value = yield from commit()
    boundaries.after(label)
    return value


def _written(conn: _Connection) -> Generator[object, object, bool]:
    """Whether the connection's transaction wrote anything (``_PROBE``), asked with psycopg's
    own command generator, so an async connection waits for the answer asynchronously."""
    version = conn.pgconn.server_version
    if conn._pipeline is not None or version < 90600:
        return True  # nothing can be asked first: a boundary, as the commit may write
    xid = "pg_current_xact_id_if_assigned" if version >= 130000 else "txid_current_if_assigned"
    result = yield from conn._exec_command(_PROBE.format(xid=xid).encode())
    if result is None or result.ntuples != 1:
        return True
    return bool(result.get_value(0, 0) == b"t")


def _wrap_statement(owner: type, name: str, boundaries: Boundaries) -> None:
    """``owner.name`` (a cursor's ``execute`` or ``executemany``, sync or async) crosses
    ``pg.commit#n`` when it is a statement that commits a change by itself, and notes the
    statements that write for the commit's details (``_seen``)."""
    original = getattr(owner, name)
    wrapped: Callable[..., object]
    if inspect.iscoroutinefunction(original):

        async def wrapped(self: _Cursor, query: object, *args: object, **kwargs: object) -> object:
            what = _seen(self, query)
            if what is None:
                return await original(self, query, *args, **kwargs)
            label = boundaries.numbered(KIND)
            boundaries.before(label, what=what)
            value = await original(self, query, *args, **kwargs)
            boundaries.after(label)
            return value
    else:

        def wrapped(self: _Cursor, query: object, *args: object, **kwargs: object) -> object:
            what = _seen(self, query)
            if what is None:
                return original(self, query, *args, **kwargs)
            label = boundaries.numbered(KIND)
            return boundaries.crossing(
                label, lambda: original(self, query, *args, **kwargs), what=what
            )

    wrapped.__name__, wrapped.__qualname__ = original.__name__, original.__qualname__
    wrapped.__doc__ = original.__doc__
    setattr(owner, name, wrapped)


def _seen(cursor: _Cursor, query: object) -> str | None:
    """The statement's text, shortened, if it commits a change by itself (autocommit mode,
    outside any transaction, not pipelined, and it changes rows: ``_CHANGES_ROWS``); else None,
    after noting it in its transaction's writes if it writes. A statement run outside any
    transaction begins one: the writes noted so far are an ended transaction's."""
    conn = cursor._conn
    idle = conn.pgconn.transaction_status == _IDLE
    if idle:
        _WRITES.pop(conn, None)
    text = _text(query, conn)
    changes_rows = _CHANGES_ROWS.match(text) is not None
    head = " ".join(text[: 2 * DETAIL_CHARS].split())
    if idle and conn.autocommit and conn._pipeline is None:
        return head[:DETAIL_CHARS] if changes_rows else None
    if changes_rows or _DDL.match(text):
        _WRITES.setdefault(conn, _Writes()).add(head)
    return None


def _text(query: object, conn: _Connection) -> str:
    """A query's SQL as text: a string, bytes, or psycopg's ``sql`` composition ("" for
    anything else, which is then no boundary)."""
    if isinstance(query, str):
        return query
    if isinstance(query, bytes | bytearray | memoryview):
        return bytes(query).decode("utf-8", "replace")
    as_string = getattr(query, "as_string", None)
    if as_string is None:
        return ""
    try:
        return str(as_string(conn))
    except Exception:  # a composition psycopg itself will refuse when it runs
        return ""
