"""What only ``PostgresStore`` needs showing: concurrency through real connections, and damage.

The conformance suite (``test_store_conformance.py``) already runs the whole store contract on
Postgres. Here:

- real worker processes race to acquire one lease: every acquisition gets its own epoch; with the
  lease row read without ``FOR UPDATE`` (a mutant) the same race hands one epoch to two workers;
- two store objects on two connections, with the interleaving forced (a pause between an append's
  fence and its write, during which the other object takes the lease over): the real store makes
  the takeover wait for the append's commit, so no append is accepted under a superseded lease; the
  check-then-write mutant (the fence in a transaction of its own) accepts a stale append every time;
- an append that starts while a takeover is in flight waits for it and is refused inside its own
  transaction;
- a renewal that does not compare the epoch (a mutant) is caught;
- damaged or missing rows raise ``CorruptStore`` as ``SQLiteStore``'s do, and change nothing;

Every test here needs a server: it takes ``pg_conninfo`` (a throw-away cluster,
``tests/pgcluster.py``) and is skipped, with the reason, where none can run; without psycopg the
whole module is skipped, saying so. ``test_store_postgres_driver.py`` checks that ``durable``
itself needs no psycopg.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
from test_store_conformance import CONV, append, sequences
from testkit import input_batch, lease_batch, run_lease_race

from durable.events import EventRecord
from durable.ports import InlineBlocking, ThreadBlocking
from durable.state import new_state, reduce
from durable.store import CorruptStore, Lease, PostgresStore, StaleLease, make_checkpoint
from durable.store import postgres as pg_module
from durable.store.base import StoreError
from durable.store.postgres import PgConnection

if TYPE_CHECKING:
    import psycopg
else:
    psycopg = pytest.importorskip(
        "psycopg", reason="psycopg is not installed (pip install 'durable-sim[postgres]')"
    )

RACE_CONV = "conv-race"
WORKERS = 4
ROUNDS = 50
WIDEN_S = 0.0005  # a pause after reading the lease row, so an unlocked race is hit every time
JOIN_TIMEOUT_S = 120.0
RACE_ROUNDS = 10


def _store(conninfo: str, namespace: str) -> PostgresStore:
    return PostgresStore(conninfo, blocking=InlineBlocking(), namespace=namespace)


# -- real processes racing for one lease ---------------------------------------------------------


def _race(conninfo: str, namespace: str, owner: str, out: str, start: Any, unlocked: bool) -> None:
    """One worker (a forked child): acquire the lease ROUNDS times, recording each epoch won."""
    store = _store(conninfo, namespace)
    read = store._lease_row

    def slow_read(conn: PgConnection, conversation_id: str, *, lock: bool) -> Lease | None:
        # The mutant reads the row without FOR UPDATE: nothing holds it until the write.
        lease = read(conn, conversation_id, lock=lock and not unlocked)
        time.sleep(WIDEN_S)
        return lease

    store._lease_row = slow_read  # type: ignore[method-assign]  # the test's patch
    won: list[int] = []
    errors: list[str] = []

    async def rounds() -> None:
        for _ in range(ROUNDS):
            try:  # ttl 0: every lease is expired at once, so any worker may take the next epoch
                lease = await store.acquire_lease(RACE_CONV, owner, ttl_s=0.0, now_s=0.0)
                won.append(lease.epoch)
            except (StoreError, psycopg.Error) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    start.wait()
    trio.run(rounds)
    store.abandon()
    Path(out).write_text(json.dumps({"won": won, "errors": errors}), encoding="utf-8")


def _run_race(
    tmp_path: Path, conninfo: str, namespace: str, *, unlocked: bool
) -> tuple[list[int], list[str]]:
    return run_lease_race(
        tmp_path,
        _race,
        lambda owner, out, start: (conninfo, namespace, owner, out, start, unlocked),
        workers=WORKERS,
        join_timeout_s=JOIN_TIMEOUT_S,
    )


def test_racing_processes_never_share_an_epoch(
    tmp_path: Path, pg_conninfo: str, pg_namespace: str
) -> None:
    """Four processes, fifty acquisitions each, from a conversation with no lease row yet (so
    the first-insert race is run too): every acquisition gets its own epoch."""
    won, errors = _run_race(tmp_path, pg_conninfo, pg_namespace, unlocked=False)
    assert errors == []
    assert sorted(won) == list(range(1, WORKERS * ROUNDS + 1))


def test_without_the_row_lock_the_race_is_caught(
    tmp_path: Path, pg_conninfo: str, pg_namespace: str
) -> None:
    """The check above can fail: read the lease row without ``FOR UPDATE`` and two workers
    both read epoch n and both write n + 1."""
    won, errors = _run_race(tmp_path, pg_conninfo, pg_namespace, unlocked=True)
    shared = len(won) - len(set(won))
    print(f"unlocked race: {len(won)} acquisitions, {shared} epochs handed out twice")
    assert shared > 0 or errors, "the unlocked race went unnoticed"


# -- two connections, a forced interleaving ------------------------------------------------------


class Side(threading.Thread):
    """One store call on a thread of its own (its own ``trio.run``), as another process's
    worker would run it; the outcome is kept for the test to inspect."""

    def __init__(self, call: Callable[[], Awaitable[Any]]) -> None:
        super().__init__(daemon=True)
        self._call = call
        self.result: Any = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.result = trio.run(self._call)
        except Exception as exc:  # handed to the test, which asserts on it
            self.error = exc


def _done_or_blocked(watch: psycopg.Connection[Any], side: Side, timeout_s: float = 10.0) -> bool:
    """Wait until ``side`` has finished (True) or waits for a row lock (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not side.is_alive():
            return True
        row = watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
        if row is not None and row[0] > 0:
            return False
        time.sleep(0.002)
    raise AssertionError(f"the other connection neither finished nor waited in {timeout_s} s")


def check_then_write(store: PostgresStore) -> None:
    """Mutant (a): the fence runs in a transaction of its own, the write in the next one."""

    async def mutant_append(
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        await store._run(
            "mutant.fence",
            lambda conn: store._fence(conn, conversation_id, owner_id, epoch),
            write=True,
        )
        await store._run(
            "mutant.commit",
            lambda conn: store._insert_batch(conn, conversation_id, records, expected_sequence),
            write=True,
        )

    store.append = mutant_append  # type: ignore[method-assign]  # the test's patch


@dataclass(frozen=True)
class Round:
    """One forced interleaving: ``stale`` are the sequences owner a committed that b's recovery
    did not see (accepted under a superseded lease: must be none); ``b_waited``: b's takeover
    had to wait for a's transaction; ``accepted``: a's append was acknowledged."""

    stale: list[int]
    b_waited: bool
    accepted: bool


def _stale_append_round(conninfo: str, namespace: str, conv: str, *, mutant: bool) -> Round:
    """Owner a appends; between its fence and its write, owner b takes the (expired) lease over
    and reads the log as a recovering owner does."""
    a, b = _store(conninfo, namespace), _store(conninfo, namespace)
    if mutant:
        check_then_write(a)
    lease_a = trio.run(partial(a.acquire_lease, conv, "owner-a", ttl_s=1.0, now_s=0.0))
    trio.run(append, a, lease_batch(1, lease_a), lease_a)

    async def take_over() -> tuple[Lease, int]:
        lease = await b.acquire_lease(conv, "owner-b", ttl_s=30.0, now_s=10.0)
        log = await b.read_records(conv, repair=True)
        return lease, log[-1].sequence

    taker = Side(take_over)
    insert = a._insert_batch
    waited: list[bool] = []
    with psycopg.connect(conninfo, autocommit=True) as watch:

        def paused_insert(
            conn: PgConnection,
            conversation_id: str,
            records: list[EventRecord],
            expected_sequence: int,
        ) -> None:
            taker.start()
            waited.append(not _done_or_blocked(watch, taker))
            insert(conn, conversation_id, records, expected_sequence)

        a._insert_batch = paused_insert  # type: ignore[method-assign]  # the test's patch
        try:
            trio.run(append, a, input_batch(2, 2, lease=lease_a, conversation_id=conv), lease_a)
            accepted = True
        except StaleLease:
            accepted = False  # refused: the takeover came first
        taker.join(JOIN_TIMEOUT_S)
    assert taker.error is None, taker.error
    lease_b, seen = taker.result
    log = trio.run(b.read_records, conv)
    a.abandon()
    b.abandon()
    stale = [r.sequence for r in log if r.epoch < lease_b.epoch and r.sequence > seen]
    return Round(stale=stale, b_waited=waited == [True], accepted=accepted)


def test_no_append_is_accepted_under_a_superseded_lease(
    pg_conninfo: str, pg_namespace: str
) -> None:
    """The takeover waits for the append's transaction every time (the interleaving really is
    forced), the append is acknowledged, and the new owner's recovery sees all of it."""
    rounds = [
        _stale_append_round(pg_conninfo, pg_namespace, f"conv-{i}", mutant=False)
        for i in range(RACE_ROUNDS)
    ]
    assert rounds == [Round(stale=[], b_waited=True, accepted=True)] * RACE_ROUNDS


def test_check_then_write_mutant_is_caught(pg_conninfo: str, pg_namespace: str) -> None:
    """The check above can fail: with the fence outside the append's transaction, the takeover
    slips in between, and the old owner's records land after the new owner's recovery."""
    rounds = [
        _stale_append_round(pg_conninfo, pg_namespace, f"conv-{i}", mutant=True)
        for i in range(RACE_ROUNDS)
    ]
    caught = sum(1 for r in rounds if r.stale)
    print(f"check-then-write: stale appends accepted in {caught} of {RACE_ROUNDS} rounds")
    assert caught > 0, "a stale append under the check-then-write mutant went unnoticed"


def test_append_during_a_takeover_waits_and_is_refused(pg_conninfo: str, pg_namespace: str) -> None:
    """The stale epoch is refused inside the append's transaction: an append that starts while
    a takeover holds the lease row waits for its commit, re-reads the row, and is fenced."""
    a, b = _store(pg_conninfo, pg_namespace), _store(pg_conninfo, pg_namespace)
    lease_a = trio.run(partial(a.acquire_lease, CONV, "owner-a", ttl_s=1.0, now_s=0.0))
    trio.run(append, a, lease_batch(1, lease_a), lease_a)
    appender = Side(partial(append, a, input_batch(2, 1, lease=lease_a), lease_a))
    waited: list[bool] = []
    acquire_body = b._acquire_body
    with psycopg.connect(pg_conninfo, autocommit=True) as watch:

        def paused_acquire(*args: Any, **kwargs: Any) -> Lease:
            lease = acquire_body(*args, **kwargs)  # the row is updated, locked, uncommitted
            appender.start()
            waited.append(not _done_or_blocked(watch, appender))
            return lease

        b._acquire_body = paused_acquire  # type: ignore[method-assign]  # the test's patch
        lease_b = trio.run(partial(b.acquire_lease, CONV, "owner-b", ttl_s=30.0, now_s=10.0))
        appender.join(JOIN_TIMEOUT_S)
    assert waited == [True], "the append did not wait for the takeover's lock"
    assert isinstance(appender.error, StaleLease), appender.error
    assert lease_b.epoch == lease_a.epoch + 1
    assert sequences(trio.run(b.read_records, CONV)) == [1]
    a.abandon()
    b.abandon()


# -- renewal -------------------------------------------------------------------------------------


async def _old_epoch_renewal_refused(store: PostgresStore) -> bool:
    """A restarted owner (same owner id, new epoch) must fence its old self out of renewing."""
    old = await store.acquire_lease(CONV, "owner-a", ttl_s=10.0, now_s=0.0)
    new = await store.acquire_lease(CONV, "owner-a", ttl_s=10.0, now_s=1.0)
    try:
        await store.renew_lease(old, ttl_s=10.0, now_s=2.0)
    except StaleLease:
        assert await store.current_lease(CONV) == new  # and nothing changed
        return True
    return False


async def test_renewal_compares_the_epoch(pg_conninfo: str, pg_namespace: str) -> None:
    assert await _old_epoch_renewal_refused(_store(pg_conninfo, pg_namespace))


async def test_renewal_without_the_epoch_mutant_is_caught(
    pg_conninfo: str, pg_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutant (b): the renewal matches the owner only, so the old process renews (and is handed)
    the new epoch. The check above sees it."""
    mutant = pg_module._RENEW.replace("AND epoch = %s", "AND epoch = epoch + 0 * %s")
    assert mutant != pg_module._RENEW
    monkeypatch.setattr(pg_module, "_RENEW", mutant)
    assert not await _old_epoch_renewal_refused(_store(pg_conninfo, pg_namespace))


# -- damage: the same errors as SQLiteStore, and nothing changed ---------------------------------


async def _written(store: PostgresStore) -> Lease:
    """Seven records in three batches, and a checkpoint through 4."""
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    await append(store, lease_batch(1, lease), lease)
    await append(store, input_batch(2, 3, lease=lease), lease)
    await append(store, input_batch(5, 3, lease=lease), lease)
    log = await store.read_records(CONV)
    cp = make_checkpoint(reduce(new_state(CONV), log[:4]), saved_at_s=0.0)
    await store.save_checkpoint(cp, owner_id=lease.owner_id, epoch=lease.epoch)
    return lease


def _dump(conn: psycopg.Connection[Any], ns: str) -> list[Any]:
    return [
        conn.execute(f"SELECT * FROM {ns}.{table} ORDER BY 1, 2").fetchall()
        for table in ("events", "checkpoints", "leases")
    ]


DAMAGE = {
    "record fails its checksum": (
        "UPDATE {ns}.events SET record = replace(record, 'hello', 'HELLO') WHERE sequence = 3",
        "read",
        "checksum mismatch",
    ),
    "record does not parse": (
        "UPDATE {ns}.events SET record = '{{not json' WHERE sequence = 3",
        "read",
        "does not parse",
    ),
    "a middle row missing": ("DELETE FROM {ns}.events WHERE sequence = 3", "read", "gap"),
    "log cut, a checkpoint beyond it": (
        "DELETE FROM {ns}.events WHERE sequence > 1",
        "repair",
        "are lost",
    ),
    "lease row missing, commits left": ("DELETE FROM {ns}.leases", "acquire", "is missing"),
    "checkpoint does not parse": (
        "UPDATE {ns}.checkpoints SET body = 'garbage'",
        "checkpoints",
        "does not parse",
    ),
}


@pytest.fixture
def damaged_store(pg_conninfo: str, pg_namespace: str) -> Iterator[PostgresStore]:
    store = _store(pg_conninfo, pg_namespace)
    yield store
    store.abandon()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
async def test_damage_is_corrupt_store_and_changes_nothing(
    damage: str, damaged_store: PostgresStore, pg_conninfo: str
) -> None:
    statement, operation, phrase = DAMAGE[damage]
    store, ns = damaged_store, damaged_store.namespace
    await _written(store)
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(statement.format(ns=ns))
        before = _dump(conn, ns)
        reopened = _store(pg_conninfo, ns)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "read": partial(reopened.read_records, CONV),
            "repair": partial(reopened.read_records, CONV, repair=True),
            "acquire": partial(reopened.acquire_lease, CONV, "owner-b", ttl_s=1.0, now_s=99.0),
            "checkpoints": partial(reopened.load_checkpoints, CONV),
        }
        with pytest.raises(CorruptStore, match=phrase):
            await calls[operation]()
        reopened.abandon()
        assert _dump(conn, ns) == before


@pytest.mark.parametrize("table", ["events", "checkpoints", "leases"])
async def test_a_dropped_table_is_refused_and_not_created_again(
    table: str, damaged_store: PostgresStore, pg_conninfo: str
) -> None:
    """A schema missing one of the store's tables: every operation of a new store object is
    ``CorruptStore`` naming the schema and the table, and the table stays missing (the old
    behaviour: the schema's setup created it empty, then the operation went on or refused)."""
    store, ns = damaged_store, damaged_store.namespace
    await _written(store)
    tables = "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1"
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {ns}.{table}")
        before = conn.execute(tables, (ns,)).fetchall()
        for attempt in range(2):
            reopened = _store(pg_conninfo, ns)
            with pytest.raises(CorruptStore, match=f"{ns}: the store's table.s. {table} missing"):
                if attempt == 0:
                    await reopened.acquire_lease(CONV, "owner-b", ttl_s=1.0, now_s=99.0)
                else:
                    await reopened.read_records(CONV)
            reopened.abandon()
            assert conn.execute(tables, (ns,)).fetchall() == before


async def test_checkpoint_failing_its_checksum_is_returned_unverified(
    damaged_store: PostgresStore, pg_conninfo: str
) -> None:
    """As in the other stores: the caller verifies, skips it, and recovers from the log."""
    await _written(damaged_store)
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {damaged_store.namespace}.checkpoints "
            "SET body = replace(body, '\"saved_at_s\":0.0', '\"saved_at_s\":1.0')"
        )
    reopened = _store(pg_conninfo, damaged_store.namespace)
    (loaded,) = await reopened.load_checkpoints(CONV)
    assert not loaded.verify()
    reopened.abandon()


# -- production's blocking port ------------------------------------------------------------------


async def test_through_worker_threads(pg_conninfo: str, pg_namespace: str) -> None:
    """Production runs the store's calls on trio's worker threads (``ThreadBlocking``); one
    connection then serves transactions from several threads, one at a time."""
    store = PostgresStore(pg_conninfo, blocking=ThreadBlocking(), namespace=pg_namespace)
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    await append(store, lease_batch(1, lease), lease)
    async with trio.open_nursery() as nursery:  # concurrent readers wait their turn
        for _ in range(4):
            nursery.start_soon(store.read_records, CONV)
    await append(store, input_batch(2, 2, lease=lease), lease)
    assert sequences(await store.read_records(CONV)) == [1, 2, 3]
    await store.close()
