"""The PostgreSQL server under the ``postgres`` store kind: which server, and one empty schema per
world run.

The database server is the world's *durable service*, like the payment service: the simulator
kills worker processes, never the server, and injects no power loss or storage fault under it
(``StoreKind.can_inject``). What it must guarantee instead is that every world starts from the
same state, or a schedule's verdict and fingerprint would depend on the runs before it. So each
run gets a schema of its own (``sim_<pid>_<n>``: the sweep process's id and a counter of its
runs, so parallel sweep workers never share one), created empty before the run and dropped after
it. The name never reaches the world's trace: two runs of a schedule differ in it and must still
print the same fingerprint.

The server is named by ``DURABLE_SIM_PG_CONNINFO`` (a libpq string or URI: the variable the
tests and ``durable-sim workers`` use). ``server_conninfo`` checks it eagerly -- driver
importable, server reachable -- so a command fails with one line before any run, not in the
middle of a sweep.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from durable.codec import canonical_json
from durable.ports import Blocking
from durable.store.postgres import PostgresStore, import_psycopg
from sim.errors import UserError

#: The variable naming the server (the tests' and ``durable-sim workers``' too).
CONNINFO_ENV = "DURABLE_SIM_PG_CONNINFO"
#: Seconds to wait for the server when checking it or opening a connection.
CONNECT_TIMEOUT_S = 10

# Servers already found reachable by this process (a sweep checks once, not per run).
_REACHABLE: set[str] = set()
# This process's runs: the second half of a run's schema name.
_RUNS = itertools.count(1)


class ServerUnavailable(UserError, RuntimeError):
    """No server to run the ``postgres`` store kind on: the variable is unset, the driver is
    missing or the server does not answer. One line, naming ``DURABLE_SIM_PG_CONNINFO``."""


def server_conninfo() -> str:
    """The server's connection string, checked once per process: ``ServerUnavailable`` (one
    line) unless the variable is set, psycopg imports and the server answers a query."""
    conninfo = os.environ.get(CONNINFO_ENV, "").strip()
    if not conninfo:
        raise ServerUnavailable(
            f"the postgres store needs a PostgreSQL server: set {CONNINFO_ENV} to its libpq "
            "connection string (e.g. 'host=/tmp/pg port=5432 user=postgres dbname=postgres')"
        )
    if conninfo in _REACHABLE:
        return conninfo
    try:
        psycopg = import_psycopg()
    except ImportError as exc:
        raise ServerUnavailable(f"the postgres store: {exc}") from None
    try:
        with contextlib.closing(
            psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        ) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ServerUnavailable(
            f"the postgres store: cannot reach the server named by {CONNINFO_ENV}: {first}"
        ) from None
    _REACHABLE.add(conninfo)
    return conninfo


@dataclass
class RunDatabase:
    """One run's schema on the server, and every store opened on it during the run (so the run's
    end can close their connections before the schema is dropped)."""

    conninfo: str
    namespace: str
    opened: list[PostgresStore] = field(default_factory=list)

    def store(self, blocking: Blocking) -> PostgresStore:
        """A store on this run's schema; its connection opens inside its first blocking call."""
        store = PostgresStore(
            self.conninfo,
            blocking=blocking,
            namespace=self.namespace,
            connect_timeout_s=CONNECT_TIMEOUT_S,
        )
        self.opened.append(store)
        return store


def _drop_schema(conninfo: str, namespace: str) -> None:
    """Drop the schema and everything in it (harness bookkeeping on the server, outside any
    world: no boundary, nothing recorded)."""
    psycopg = import_psycopg()
    # Autocommit: closing is all a connection's own exit would do.
    with contextlib.closing(
        psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    ) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {namespace} CASCADE")


@contextmanager
def run_database() -> Iterator[RunDatabase]:
    """An empty schema for one world run, dropped when the run ends. A schema of the same name
    left by an earlier process with this pid (a sweep killed mid-run) is dropped first, so the
    run starts from nothing whatever came before."""
    conninfo = server_conninfo()
    database = RunDatabase(conninfo, f"sim_{os.getpid()}_{next(_RUNS)}")
    _drop_schema(conninfo, database.namespace)
    try:
        yield database
    finally:
        for store in database.opened:
            store.abandon()  # a connection left open (a process still alive at the world's end)
        _drop_schema(conninfo, database.namespace)


async def content_digest(reader: PostgresStore) -> str:
    """A digest of everything the schema holds, read through ``reader``: every conversation's
    records, checkpoints and lease. The world's fingerprint includes it, because the store's
    state lives on the server, where ``SimFS`` (whose content the trace reflects through every
    write) never sees it."""
    parts: list[Any] = []
    for conversation_id in await reader.list_conversations():
        records = await reader.read_records(conversation_id, 0)
        checkpoints = await reader.load_checkpoints(conversation_id)
        lease = await reader.current_lease(conversation_id)
        parts.append(
            [
                conversation_id,
                [r.to_line() for r in records],
                [c.to_text() for c in checkpoints],
                None if lease is None else lease.model_dump(mode="json"),
            ]
        )
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()[:32]
