"""Storage faults on SQLite's files (sim.world.storage_faults.aimed_sqlite_fault, with the
readers sim.world.sqlite_vfs registers): the log's frames as SQLite's recovery accepts them, a
fault made only in synced bytes and only where its effect on the store's rows has a record of
the damage table, the same fault for the same seed, and what a power loss left of a file-store
log under a checkpoint recorded for the repair it needs."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from typing import Literal

import trio
from testkit import input_batch

from durable.ports import InlineBlocking
from durable.store.base import Lease
from durable.store.sqlite import SQLiteStore
from sim.world.fs import SimFS
from sim.world.sqlite_vfs import SimSQLiteVFS, read_database, wal_frames
from sim.world.storage_faults import (
    TORN_WAL,
    DatabaseView,
    TableRow,
    aimed_sqlite_fault,
    power_rows,
)

DB = "/store/store.sqlite"
WAL = f"{DB}-wal"
CONV = "c1"


def sqlite_disk(*, commits: int, synchronous: Literal["FULL", "NORMAL"] = "FULL") -> SimFS:
    """A SQLite store on a simulated disk as the runtime leaves it: a lease, then ``commits``
    single-record commits, each a transaction of its own (the log is never checkpointed)."""
    fs = SimFS()
    fs.makedirs("/store")
    vfs = SimSQLiteVFS(fs)
    store = SQLiteStore(
        DB, blocking=InlineBlocking(), synchronous=synchronous, vfs=vfs.name, shared_memory=False
    )

    async def write() -> None:
        lease = await store.acquire_lease(CONV, "w", ttl_s=9.0, now_s=0.0)
        for n in range(1, commits + 1):
            records = input_batch(n, 1, lease=lease, conversation_id=CONV, batch=f"b{n}")
            await store.append(CONV, records, expected_sequence=n, owner_id="w", epoch=1)

    trio.run(write)
    store.abandon()  # the process dies: nothing more is written
    vfs.close()
    return fs


def _events(view: DatabaseView) -> list[int]:
    assert not isinstance(view.tables, str)
    return [int(r[2]) for r in view.tables if r[0] == "events"]


def test_the_log_frames_are_the_ones_sqlites_recovery_accepts() -> None:
    """One transaction per commit (after the schema's and the lease's); a byte flipped in a
    frame ends the accepted log before that frame's transaction, as SQLite's own reader sees."""
    fs = sqlite_disk(commits=3)
    frames = wal_frames(fs.read(WAL))
    assert frames is not None and len(frames.transactions) == 5
    assert _events(read_database(fs.clone(deep=True), DB, CONV)) == [1, 2, 3]
    first, _ = frames.transactions[3]  # commit #2's
    fs.damage_log(WAL, flip=(frames.starts[first] + 100, 0))
    damaged = wal_frames(fs.read(WAL))
    assert damaged is not None and len(damaged.transactions) == 3
    assert _events(read_database(fs.clone(deep=True), DB, CONV)) == [1]


def test_a_fault_on_the_log_drops_its_last_transaction_only() -> None:
    """Every seed makes a fault; each is in the last transaction's synced frames (or cuts the
    log inside it, or loses the log when that is all it holds), and the record is the torn
    transaction's, from the last commit's sequence on."""
    for seed in range(12):
        fs = sqlite_disk(commits=3)
        frames = wal_frames(fs.read(WAL))
        assert frames is not None
        last = frames.starts[frames.transactions[-1][0]]
        outcome, rows = aimed_sqlite_fault(fs, random.Random(seed), database=DB, conversation=CONV)
        ((path, what),) = outcome.items()
        assert path == WAL, what  # the database file holds no row yet: all in the log
        offset = int(what.split(":")[1].split(".")[0])
        assert offset >= last and rows == {WAL: TableRow(TORN_WAL, 3, CONV)}, what
        assert _events(read_database(fs.clone(deep=True), DB, CONV)) == [1, 2]


def test_the_same_seed_makes_the_same_fault() -> None:
    made = set()
    for _ in range(2):
        fs = sqlite_disk(commits=2)
        made.add(repr(aimed_sqlite_fault(fs, random.Random(7), database=DB, conversation=CONV)))
    assert len(made) == 1


def test_unsynced_frames_are_never_damaged() -> None:
    """With ``synchronous=NORMAL`` no commit syncs the log: only its header was synced when it
    was created, and a fault there would drop every commit since (no record: not made)."""
    fs = sqlite_disk(commits=2, synchronous="NORMAL")
    data, synced = fs.synced_prefix(WAL) or (b"", 0)
    assert synced < len(data)
    for seed in range(8):
        scratch = fs.clone(deep=True)
        outcome, _ = aimed_sqlite_fault(
            scratch, random.Random(seed), database=DB, conversation=CONV
        )
        assert outcome == {} and scratch.snapshot() == fs.snapshot()


def test_a_lost_lease_write_is_no_record() -> None:
    """The log's last transaction a lease acquisition: lost, its epoch would be granted again,
    which no record of the table describes -- the fault is not made."""
    from sim.world.storage_faults import _rolled_back

    rows = (("events", CONV, 1, "x"),)
    before = DatabaseView((), (*rows, ("leases", CONV, 2, "w 9.0")), 0)
    after = DatabaseView((), (*rows, ("leases", CONV, 1, "w 9.0")), 0)
    assert _rolled_back(before, after, CONV) is None


LOG = "/store/c1/events.jsonl"


def test_a_power_loss_under_a_checkpoint_records_the_tail_to_copy() -> None:
    """A log whose unsynced commits a power loss took while a checkpoint's name beyond them
    survived: the tail left (here a torn record) held acknowledged commits, to be copied
    before it is cut; without the checkpoint it is a torn tail, and no record."""
    lease = Lease(conversation_id=CONV, owner_id="w", epoch=1, expires_at_s=9.0)
    batch = input_batch(1, 2, lease=lease, conversation_id=CONV)
    line = b"".join((r.to_line() + "\n").encode() for r in batch)
    for checkpoint in (True, False):
        fs = SimFS()
        fs.makedirs("/store/c1")
        fs.append(LOG, line + line[:40])  # two records, then a torn third
        fs.fsync(LOG)
        if checkpoint:
            fs.write("/store/c1/checkpoint-000000000003.json", b"{}\n")
        rows = power_rows(fs, {LOG: "torn:512"})
        expected = TableRow(
            "damaged-last-commit-under-checkpoint",
            3,
            CONV,
            offset=len(line),
            beyond=("checkpoint-000000000003.json",),
        )
        assert rows == ({LOG: expected} if checkpoint else {})


def test_sqlite_faults_do_not_depend_on_the_hash_seed() -> None:
    """One SQLite storage schedule, run under two hash seeds: the same fault, the same run."""
    code = (
        "from sim.run.runner import run_scenario; from sim.world.faults import parse_schedule;"
        "from sim.world.scenario import load_scenario;"
        "r = run_scenario(load_scenario('idempotent_payment'), seed=0, store='sqlite',"
        " schedule=parse_schedule('33:after:storage,53:after:storage'));"
        "print(r.trace.fingerprint, [sorted(c.fs_outcome.items()) for c in r.trace.crashes])"
    )
    seen = set()
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen.add(done.stdout.strip())
    assert len(seen) == 1 and "store.sqlite" in seen.pop()
