"""Shared fixtures of the runtime tests, and the test tiers.

Tiers: a test marked ``slow`` (``pytest.mark.slow``, or a slow parameter's
``pytest.param(..., marks=pytest.mark.slow)``) is skipped unless ``--run-slow`` is given. ``make
test`` runs the fast tier (every invariant, store, mutant registry, target and the CLI, each at
least once); ``make check`` runs everything. See CONTRIBUTING.md, "Tests".
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pgcluster
import pytest
from hypothesis import settings
from testkit import STORE_KINDS, Stores

# This repository's CI runs Hypothesis derandomized, without an example database and without
# deadlines (a loaded runner is slow, not wrong). Set here, for this repository's tests only:
# the pytest plugin every install of durable-sim loads must not change other projects' settings.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (make check does; make test does not)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the slow tier unless asked for: skipped, not deselected, so the summary's count says
    how much of the suite the fast tier left out."""
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (make check)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


@pytest.fixture(params=STORE_KINDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Both stores, each on a fresh directory (one test per store kind)."""
    made = Stores(request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture(scope="session")
def pg_conninfo() -> Iterator[str]:
    """A PostgreSQL server for the session: a throw-away cluster (``tests/pgcluster.py``),
    started on first use only, or the server named by ``DURABLE_SIM_PG_CONNINFO``. Skips, with
    the reason, where neither is possible, so a missing server never passes silently."""
    reason = pgcluster.unavailable()
    if reason is not None:
        pytest.skip(reason)
    external = os.environ.get(pgcluster.CONNINFO_ENV)
    if external:
        yield external
        return
    cluster = pgcluster.start()
    try:
        yield cluster.conninfo
    finally:
        cluster.stop()


_SCHEMAS = itertools.count(1)


@pytest.fixture
def pg_namespace(pg_conninfo: str) -> Iterator[str]:
    """A fresh schema name per test (isolation on a shared server), dropped afterwards."""
    import psycopg

    namespace = f"test_{os.getpid()}_{next(_SCHEMAS)}"
    yield namespace
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {namespace} CASCADE")
