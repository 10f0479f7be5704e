"""The ``postgres`` store kind under the simulator: ``PostgresStore`` on a real server, a schema of
its own per world run, swept for worker-process kills (the server is the durable service and is
never power-crashed or damaged here).

Every test but the usage-error one needs a server: it takes ``pg_conninfo`` (a throw-away cluster,
or ``DURABLE_SIM_PG_CONNINFO``) and is skipped, with the fixture's reason, where none can be
started. The whole file takes 26 s of wall time on an existing server, 46 s with the cluster's
start and stop, on a loaded 2-core machine (two depth-1 sweeps, 138 schedules, are most of it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from testkit import REPO, needs

from durable.events import remember_written
from durable.ports import InlineBlocking
from durable.store.base import Lease
from durable.store.postgres import PostgresStore
from sim.explore.mutants.fleet import sql_renew_ignoring_epoch
from sim.explore.plan import SweepPlan
from sim.explore.sweep import sweep
from sim.run.runner import run_scenario
from sim.world import pgserver
from sim.world.faults import CrashKind, ScheduleError, parse_schedule
from sim.world.pgserver import CONNINFO_ENV
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

pytestmark = [
    needs("psycopg", reason="needs the postgres extra: pip install -e '.[postgres]'"),
]


@pytest.fixture
def pg_server(pg_conninfo: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test server, named by the variable the ``postgres`` kind reads, for one test."""
    monkeypatch.setenv(CONNINFO_ENV, pg_conninfo)
    yield pg_conninfo


def _schemas(conninfo: str) -> set[str]:
    """The simulator's run schemas on the server (``sim_<pid>_<n>``)."""
    import psycopg  # the extra's own: not imported at collection (testkit.needs)

    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"sim_{os.getpid()}_%",)
        ).fetchall()
    return {row[0] for row in rows}


def test_the_kind_is_swept_for_process_kills_and_pauses_only() -> None:
    kind = StoreKind.POSTGRES
    assert kind.can_inject("process") and kind.can_inject("pause")  # a worker's, not the server's
    assert not kind.can_inject("power") and not kind.can_inject("storage")
    assert not kind.forks and StoreKind.FILE.forks and StoreKind.SQLITE.forks


@pytest.mark.slow  # the store's own tests and the single schedules below stay in the fast tier
@pytest.mark.parametrize("name", ["idempotent_payment", "read_edit_answer"])
def test_a_depth1_process_sweep_passes(pg_server: str, name: str) -> None:
    """Every process kill at every boundary, each schedule from scratch in its own schema; power
    is asked for and skipped (said so in the results); no schema is left on the server."""
    result = sweep(
        SweepPlan(
            scenario=load_scenario(name),
            store=StoreKind.POSTGRES,
            crash_kinds=(CrashKind.PROCESS, CrashKind.POWER),
        )
    )
    assert (
        result.schedules == 2 * result.reference.boundaries + 1
    )  # before/after each, and the reference
    assert result.verdicts["pass"] == result.schedules, result.failures[:1]
    assert result.expansion.skipped_power and result.crash_kinds == ["process", "power"]
    assert any(label.startswith("postgres.commit") for label in result.reference.labels)
    assert _schemas(pg_server) == set()


def test_the_same_schedule_gives_the_same_fingerprint(pg_server: str) -> None:
    """Two runs of one schedule (a takeover, and a kill after a commit) on two different schemas
    print the same fingerprint, and it covers the server's content: the trace ends with its
    digest (records, checkpoints and lease, read through a fresh reader)."""
    scenario = load_scenario("lease_takeover")
    schedule = parse_schedule("20:after:process")
    first = run_scenario(scenario, seed=0, store="postgres", schedule=schedule)
    second = run_scenario(scenario, seed=0, store="postgres", schedule=schedule)
    assert first.trace.crashes and first.trace.settled
    assert first.trace.fingerprint == second.trace.fingerprint
    other = run_scenario(
        scenario, seed=0, store="postgres", schedule=parse_schedule("9:after:process")
    )
    assert other.trace.fingerprint != first.trace.fingerprint


def test_a_postgres_world_refuses_power_and_storage_faults() -> None:
    """Checked before the server is needed: a power loss would roll SimFS back and leave the
    server's store as it was, a machine no real failure produces."""
    scenario = load_scenario("idempotent_payment")
    for text in ("5:after:power", "5:after:storage"):
        with pytest.raises(ScheduleError, match="not simulated for the postgres store"):
            run_scenario(scenario, seed=0, store="postgres", schedule=parse_schedule(text))


def test_a_postgres_world_cannot_be_forked(pg_server: str) -> None:
    class Fork:  # never consulted: the run refuses first
        in_child = False

    with pytest.raises(ValueError, match="cannot be forked"):
        scenario = load_scenario("idempotent_payment")
        fork = Fork()  # a stand-in: the run refuses before it reads one
        run_scenario(scenario, seed=0, store="postgres", fork=fork)  # type: ignore[arg-type]  # ^


def test_abandon_rolls_back_and_releases_the_lease_row(pg_conninfo: str, pg_namespace: str) -> None:
    """A killed process's connection (``abandon``: the socket shut down, no COMMIT) inside an open
    transaction that holds the lease row's lock and an uncommitted row: the server rolls it back
    and a successor takes the lease at once instead of waiting out the lock."""
    dead = PostgresStore(pg_conninfo, blocking=InlineBlocking(), namespace=pg_namespace)
    heir = PostgresStore(pg_conninfo, blocking=InlineBlocking(), namespace=pg_namespace)
    first = trio.run(lambda: dead.acquire_lease("c", "dead", ttl_s=1.0, now_s=0.0))
    conn = dead._connection()
    conn.execute("BEGIN")
    conn.execute(f"SELECT 1 FROM {pg_namespace}.leases WHERE conversation_id = 'c' FOR UPDATE")
    conn.execute(
        f"INSERT INTO {pg_namespace}.events (conversation_id, sequence, record) "
        "VALUES ('c', 1, 'uncommitted')"
    )
    dead.abandon()
    try:
        lease: Lease = trio.run(lambda: heir.acquire_lease("c", "heir", ttl_s=1.0, now_s=5.0))
        assert lease.epoch == first.epoch + 1
        assert trio.run(lambda: heir.read_records("c")) == []
    finally:
        conn.close()  # if abandon left it open, the schema's teardown would wait on its locks
        heir.abandon()


# -- mutants ----------------------------------------------------------------------------------


def _renew_ignores_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The renewal writes the caller's lease back without comparing the stored one (the fleet
    mode's mutant of the same name)."""
    monkeypatch.setattr(PostgresStore, "renew_lease", sql_renew_ignoring_epoch)


def _row_per_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """An append that commits its batch one row per transaction (each fenced): a kill between
    two of them leaves a batch half written."""

    async def append(
        self: PostgresStore,
        conversation_id: str,
        records: list[Any],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        for n, record in enumerate(records):

            def body(conn: Any, n: int = n, record: Any = record) -> None:
                self._fence(conn, conversation_id, owner_id, epoch)
                self._insert_batch(conn, conversation_id, [record], expected_sequence + n)

            await self._run("postgres.commit", body, write=True)
            remember_written(record.to_line())

    monkeypatch.setattr(PostgresStore, "append", append)


def test_renewal_ignoring_the_epoch_is_killed_by_the_takeover_sweep(
    pg_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paused worker wakes after the takeover and renews its old lease over the new owner's:
    I8 already in the fault-free run of ``lease_takeover``, so the sweep stops there."""
    _renew_ignores_epoch(monkeypatch)
    result = sweep(
        SweepPlan(
            scenario=load_scenario("lease_takeover"),
            store=StoreKind.POSTGRES,
            crash_kinds=(CrashKind.PROCESS,),
        )
    )
    assert result.reference.failed
    assert [(f.schedule, f.invariant) for f in result.failures] == [("none", "I8")]


def test_a_batch_split_over_transactions_is_killed_by_a_process_kill(
    pg_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault-free, the split append passes; a kill between its transactions leaves a batch cut
    in two, which a fresh reader refuses (I2). The first killing schedule of the
    ``lease_takeover`` sweep is ``5:after:process``, at the batch's first row commit."""
    _row_per_transaction(monkeypatch)
    scenario = load_scenario("lease_takeover")
    result = sweep(
        SweepPlan(
            scenario=scenario,
            store=StoreKind.POSTGRES,
            crash_kinds=(CrashKind.PROCESS,),
            stop_at_first_failure=True,
        )
    )
    assert not result.reference.failed
    first = result.failures[0]
    assert (first.schedule, first.invariant, first.crash_labels) == (
        "5:after:process",
        "I2",
        ["postgres.commit"],
    )


# -- the command line -------------------------------------------------------------------------


def test_without_a_server_the_command_line_says_so_in_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != CONNINFO_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "sim", "sweep", "idempotent_payment", "--store", "postgres"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and CONNINFO_ENV in lines[0], done.stderr


def test_an_unreachable_server_is_refused_before_any_run(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv(CONNINFO_ENV, "host=/nonexistent-socket-dir port=5432 user=postgres")
    with pytest.raises(pgserver.ServerUnavailable, match=CONNINFO_ENV):
        pgserver.server_conninfo()
