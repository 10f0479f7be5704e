"""The ``python`` target's ``--postgres``: one throw-away PostgreSQL cluster for a sweep
(``sim.world.pgcluster``) and an empty database for each point, made in the parent.

Why this shape: a point's program must start from nothing, as it starts in an empty ``app``
directory, and the processes after the kill must find what the first one committed. A cluster
costs seconds to start (``initdb``, then the server), a database a fraction of one: so one
cluster per sweep, one database per point (``CREATE DATABASE point_<n>``, numbered by the
sweep). The server is the durable service: a crash point kills the program, never the server.

What the point's children find in their environment (``point_env``):

- ``DATABASE_URL``, a libpq URI (``postgresql://postgres@/point_3?host=/tmp/durable-pg-.../
  sockets&port=5432``): ``psycopg.connect(os.environ["DATABASE_URL"])``;
- ``SQLALCHEMY_URL``, the same for SQLAlchemy on psycopg 3 (``postgresql+psycopg://...``):
  SQLAlchemy reads a bare ``postgresql://`` as psycopg2's, so an app that builds its engine from
  ``DATABASE_URL`` replaces the scheme, as apps on hosted databases do;
- ``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGDATABASE``: libpq's own defaults, so an app that
  connects with ``psycopg.connect("")`` or reads them finds the point's database too.

Nesting: the sweep enters ``serving`` once around all of its points, and ``host.run_point``
enters it again around each point. An inner entry reuses the running cluster and, when its block
ends normally, drops the databases made in it (``WITH (FORCE)``: the backend of a killed process
may not have noticed yet), so a long sweep holds one point's database at a time, not one per
point. Interrupted (Ctrl-C, or SIGTERM, which the command line turns into one), nothing is
dropped: the outer block's ``finally`` stops the cluster (``pg_ctl stop -m immediate``) and
removes its directory, socket and data alike, which holds them all.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from durable.store.postgres import EXTRA
from sim.targets.protocol import TargetError
from sim.world import pgcluster

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import TupleRow

#: Seconds the parent waits for the server: to connect, and for one statement.
CONNECT_TIMEOUT_S = 10
STATEMENT_TIMEOUT_S = 60
#: The driver the parent connects with (and the program, as a rule): the module looked up.
PSYCOPG = "psycopg"
#: What a point's database is called: ``point_1``, ``point_2``, ... in the sweep's order.
PREFIX = "point_"


@dataclass
class _Running:
    """The sweep's cluster, the parent's connection to it, and the databases made so far."""

    cluster: pgcluster.Cluster
    admin: Connection[TupleRow]  # in autocommit mode
    numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    made: list[str] = field(default_factory=list)


# The running cluster of this process (at most one: nested entries reuse it).
_RUNNING: list[_Running] = []


def missing() -> str | None:
    """Why ``--postgres`` cannot run here (one line: what to install), or None."""
    if importlib.util.find_spec(PSYCOPG) is None:
        return f"python: --postgres needs psycopg, which is not installed: pip install '{EXTRA}'"
    why = pgcluster.cannot_start()
    if why is not None:
        return f"python: --postgres starts a throw-away PostgreSQL cluster, and cannot: {why}"
    return None


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """A cluster for the block (see the module docstring); reused by a nested block."""
    if _RUNNING:
        running = _RUNNING[-1]
        mark = len(running.made)
        yield
        _drop(running, running.made[mark:])  # only on a normal end: see the module docstring
        del running.made[mark:]
        return
    why = missing()
    if why is not None:
        raise TargetError(why)
    try:
        cluster = pgcluster.start()
    except pgcluster.ClusterUnavailable as exc:
        raise TargetError(f"python: --postgres: the cluster did not start: {_first(exc)}") from None
    try:
        _RUNNING.append(_Running(cluster, _connect(cluster)))
        try:
            yield
        finally:
            _RUNNING.pop().admin.close()
    finally:
        cluster.stop()


def _connect(cluster: pgcluster.Cluster) -> Connection[TupleRow]:
    """The parent's own connection, for the points' databases (every statement bounded)."""
    # the postgres extra: needed with --postgres only
    import psycopg

    try:
        return psycopg.connect(
            cluster.conninfo,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_S * 1000}",
        )
    except psycopg.Error as exc:
        raise TargetError(
            f"python: --postgres: cannot connect to the cluster: {_first(exc)}"
        ) from None


def _first(exc: BaseException) -> str:
    """An error's first line (a server's message may run on with DETAIL and HINT lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def point_env() -> dict[str, str]:
    """A fresh database for one point, and the environment that names it (see the module
    docstring); made inside ``serving``."""
    # the postgres extra: needed with --postgres only
    import psycopg

    if not _RUNNING:
        raise TargetError("python: --postgres: no cluster is running (enter the service first)")
    running = _RUNNING[-1]
    name = f"{PREFIX}{next(running.numbers)}"
    try:
        running.admin.execute(f"CREATE DATABASE {name}")
    except psycopg.Error as exc:
        raise TargetError(f"python: --postgres: CREATE DATABASE {name}: {_first(exc)}") from None
    running.made.append(name)
    uri = running.cluster.uri(name)
    return {
        "DATABASE_URL": uri,
        "SQLALCHEMY_URL": uri.replace("postgresql://", "postgresql+psycopg://", 1),
        "PGHOST": str(running.cluster.sockets),
        "PGPORT": str(pgcluster.PORT),
        "PGUSER": "postgres",
        "PGDATABASE": name,
    }


def _drop(running: _Running, names: list[str]) -> None:
    """Drop the points' databases; one that cannot be dropped stays until the cluster goes."""
    # the postgres extra: needed with --postgres only
    import psycopg

    force = " WITH (FORCE)" if running.admin.info.server_version >= 130000 else ""
    for name in names:
        with contextlib.suppress(psycopg.Error):
            running.admin.execute(f"DROP DATABASE IF EXISTS {name}{force}")
