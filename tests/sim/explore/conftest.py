"""The mutant tests' server: a test parametrized with a postgres mutant (its store is a server,
``fence-outside-transaction-postgres``) runs on the session's PostgreSQL server (the
``pg_conninfo`` fixture: a throw-away cluster, or ``DURABLE_SIM_PG_CONNINFO``), and is skipped
with that fixture's reason where none can be started."""

from __future__ import annotations

import pytest

from sim.explore.mutants import Mutant
from sim.world.pgserver import CONNINFO_ENV
from sim.world.stores import StoreKind


@pytest.fixture(autouse=True)
def _server_of_a_postgres_mutant(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    params = callspec.params if callspec is not None else {}
    mutant = params.get("mutant", params.get("m"))
    if isinstance(mutant, Mutant) and mutant.store == StoreKind.POSTGRES:
        conninfo = request.getfixturevalue("pg_conninfo")
        request.getfixturevalue("monkeypatch").setenv(CONNINFO_ENV, conninfo)
