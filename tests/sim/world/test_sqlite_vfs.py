"""SQLite on the simulated disk (``sim.world.sqlite_vfs``): what survives a power loss is what
SQLite synced, under every outcome the disk model draws."""

from __future__ import annotations

import copy
import random

import apsw
import pytest

from sim.run.runner import run_scenario
from sim.world.faults import parse_schedule
from sim.world.fs import SimFS
from sim.world.scenario import load_scenario
from sim.world.sqlite_vfs import SimSQLiteVFS, seed_sqlite_randomness

DB = "/store/store.sqlite"
SEEDS = range(24)


def _connect(vfs: SimSQLiteVFS, synchronous: str) -> apsw.Connection:
    conn = apsw.Connection(DB, vfs=vfs.name)
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    assert conn.execute("PRAGMA locking_mode=EXCLUSIVE").fetchall() == [("exclusive",)]
    assert conn.execute("PRAGMA journal_mode=WAL").fetchall() == [("wal",)]
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def _world(synchronous: str, commits: int, *, kept: bool = False) -> SimFS:
    """A database with ``commits`` one-row transactions, each on a fresh connection (as the store
    runs when another process may have written in between), or all on one ``kept`` connection
    (as the store runs while no other connection changes the files)."""
    fs = SimFS()
    fs.makedirs("/store")
    seed_sqlite_randomness(7)
    vfs = SimSQLiteVFS(fs)
    try:
        conn = _connect(vfs, "FULL")  # the schema is durable; the commits use ``synchronous``
        conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
        conn.close()
        fs.fsync_dir("/store")  # the database file's own entry: its creator's job, not SQLite's
        conn = _connect(vfs, synchronous)
        for n in range(1, commits + 1):
            if not kept:
                conn.close()
                conn = _connect(vfs, synchronous)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?)", (n,))
            conn.execute("COMMIT")
        conn.close()
    finally:
        vfs.close()
    return fs


def _after_power_loss(fs: SimFS, seed: int) -> tuple[list[int], str]:
    lost = copy.deepcopy(fs)
    lost.power_loss(random.Random(seed))
    vfs = SimSQLiteVFS(lost)
    try:
        conn = apsw.Connection(DB, vfs=vfs.name)
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        rows = [n for (n,) in conn.execute("SELECT n FROM t ORDER BY n")]
        row = conn.execute("PRAGMA integrity_check").fetchone()
        assert row is not None
        (check,) = row
        conn.close()
    finally:
        vfs.close()
    return rows, check


@pytest.mark.parametrize("kept", [False, True])
def test_full_keeps_every_commit_through_every_power_loss(kept: bool) -> None:
    fs = _world("FULL", commits=6, kept=kept)
    for seed in SEEDS:
        assert _after_power_loss(fs, seed) == ([1, 2, 3, 4, 5, 6], "ok"), seed


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("synchronous", ["NORMAL", "OFF"])
def test_without_a_sync_per_commit_power_loss_takes_a_suffix_only(
    synchronous: str, kept: bool
) -> None:
    """NORMAL (and OFF) do not sync the log at each commit: a power loss may lose the latest
    commits, never one in the middle, and the database stays well-formed. Some seed must lose
    something, or the disk model would not be cutting anything."""
    fs = _world(synchronous, commits=6, kept=kept)
    kept_counts = set()
    for seed in SEEDS:
        rows, check = _after_power_loss(fs, seed)
        assert check == "ok", seed
        assert rows == list(range(1, len(rows) + 1)), (seed, rows)
        kept_counts.add(len(rows))
    assert min(kept_counts) < 6


def test_a_refused_write_fails_the_transaction_and_leaves_the_last_commit() -> None:
    """A dead process's port refuses every call: SQLite's transaction fails, and the next
    connection sees the database as of the last commit."""
    fs = _world("FULL", commits=2)

    class Dead(Exception):
        pass

    class Refusing:
        def __getattr__(self, name: str) -> object:
            method = getattr(fs, name)
            if name in ("write_at", "truncate", "fsync", "fsync_dir", "unlink"):

                def refuse(*args: object) -> None:
                    raise Dead(name)

                return refuse
            return method

    vfs = SimSQLiteVFS(Refusing())  # type: ignore[arg-type]  # a SimFS by __getattr__
    try:
        conn = _connect(vfs, "FULL")
        with pytest.raises(Dead):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (3)")
            conn.execute("COMMIT")
    finally:
        vfs.close()
    assert _after_power_loss(fs, 0) == ([1, 2], "ok")


def test_the_same_seed_writes_the_same_bytes() -> None:
    one, two = _world("FULL", commits=3), _world("FULL", commits=3)
    assert one.snapshot() == two.snapshot()


def test_a_world_leaves_no_connection_open_and_no_byte_changed() -> None:
    """A crashed process never closes its connections; the end of its world must (they hold
    the whole world in a cycle the collector cannot break: ``sim.world.sqlite_vfs.end_worlds``),
    and closing them must not write to the disk the oracles read. Only the connections these
    runs opened count: another test may hold its own."""
    scenario = load_scenario("lease_takeover")
    before = {id(c) for c in apsw.connections()}
    schedule = parse_schedule("30:after:process")
    crashed = run_scenario(scenario, seed=0, store="sqlite", schedule=schedule)
    again = run_scenario(scenario, seed=0, store="sqlite", schedule=schedule)
    left = [c for c in apsw.connections() if id(c) not in before]
    assert not left, f"{len(left)} connections of ended worlds are still open"
    assert crashed.trace.crashes, "the schedule crashed a process holding a connection"
    assert crashed.trace.fingerprint == again.trace.fingerprint
    assert crashed.durable.records == again.durable.records
