"""One contract, every store: the same tests run on FileStore (fsync on and off), SQLiteStore and
PostgresStore (a fresh schema per test on the session's throw-away cluster; skipped, with the
reason, where no cluster can run).

A ``reopen`` factory builds a fresh store object on the same path, which is how a restart looks to
a store: nothing in memory survives, only what it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from testkit import input_batch, lease_batch

from durable.events import EventRecord
from durable.ports import InlineBlocking, OsFileSystem
from durable.state import new_state, reduce
from durable.store import (
    Checkpoint,
    FileStore,
    Lease,
    LeaseHeld,
    PostgresStore,
    SequenceConflict,
    SQLiteStore,
    StaleLease,
    Store,
    make_checkpoint,
)

CONV = "conv-1"
TTL = 30.0

Reopen = Callable[[], Store]


@pytest.fixture(params=["file-fsync", "file-nofsync", "sqlite", "sqlite-no-shm", "postgres"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Reopen]:
    """A factory of fresh store objects on one path (each call is a process restart).
    ``sqlite-no-shm`` is how the simulator runs SQLite (a connection per transaction, the log's
    index in its heap), checkpointing -- and truncating the log -- every 4 pages."""
    opened: list[SQLiteStore | PostgresStore] = []
    # Only the postgres case asks for a server (and is skipped, saying why, without one).
    pg = (
        (request.getfixturevalue("pg_conninfo"), request.getfixturevalue("pg_namespace"))
        if request.param == "postgres"
        else None
    )

    def factory() -> Store:
        if request.param == "file-fsync":
            return FileStore(str(tmp_path / "store"), fs=OsFileSystem(), fsync=True)
        if request.param == "file-nofsync":
            return FileStore(str(tmp_path / "store"), fs=OsFileSystem(), fsync=False)
        store: SQLiteStore | PostgresStore
        if pg is not None:
            store = PostgresStore(pg[0], blocking=InlineBlocking(), namespace=pg[1])
        elif request.param == "sqlite-no-shm":
            store = SQLiteStore(
                str(tmp_path / "store.db"),
                blocking=InlineBlocking(),
                shared_memory=False,
                wal_autocheckpoint=4,
            )
        else:
            store = SQLiteStore(str(tmp_path / "store.db"), blocking=InlineBlocking())
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.abandon()


async def append(store: Store, batch: list[EventRecord], lease: Lease) -> None:
    await store.append(
        batch[0].conversation_id,
        batch,
        expected_sequence=batch[0].sequence,
        owner_id=lease.owner_id,
        epoch=lease.epoch,
    )


def sequences(recs: list[EventRecord]) -> list[int]:
    return [r.sequence for r in recs]


# -- the log -------------------------------------------------------------------------------------


async def test_empty_conversation(reopen: Reopen) -> None:
    store = reopen()
    assert await store.read_records(CONV) == []
    assert await store.read_records(CONV, repair=True) == []
    assert await store.load_checkpoints(CONV) == []
    assert await store.current_lease(CONV) is None
    assert await store.list_conversations() == []


async def test_append_and_read_back(reopen: Reopen) -> None:
    store = reopen()
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    first = lease_batch(1, lease)
    await append(store, first, lease)
    second = input_batch(2, 3, lease=lease)
    await append(store, second, lease)
    third = input_batch(5, 1, lease=lease)
    await append(store, third, lease)
    expected = first + second + third
    assert await store.read_records(CONV) == expected
    assert await reopen().read_records(CONV) == expected
    assert await reopen().read_records(CONV, repair=True) == expected
    assert all(r.verify() for r in await reopen().read_records(CONV))
    # The log reduces to a state (the records are real events, not opaque blobs).
    state = reduce(new_state(CONV), expected)
    assert state.last_sequence == 5
    assert state.epoch == lease.epoch


async def test_read_after_sequence(reopen: Reopen) -> None:
    store = reopen()
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    await append(store, input_batch(1, 4, lease=lease), lease)
    await append(store, input_batch(5, 3, lease=lease), lease)
    for s in (reopen(), store):  # without and with this process's cache
        assert sequences(await s.read_records(CONV, after_sequence=0)) == list(range(1, 8))
        assert sequences(await s.read_records(CONV, after_sequence=2)) == [3, 4, 5, 6, 7]
        assert sequences(await s.read_records(CONV, after_sequence=4)) == [5, 6, 7]
        assert sequences(await s.read_records(CONV, after_sequence=6)) == [7]
        assert await s.read_records(CONV, after_sequence=7) == []
        assert await s.read_records(CONV, after_sequence=100) == []


async def test_sequence_conflict_writes_nothing(reopen: Reopen) -> None:
    store = reopen()
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    good = input_batch(1, 2, lease=lease)
    await append(store, good, lease)

    again = input_batch(1, 2, lease=lease, batch="again")  # sequence already taken
    with pytest.raises(SequenceConflict):
        await append(store, again, lease)
    gap = input_batch(4, 1, lease=lease)  # skips 3
    with pytest.raises(SequenceConflict):
        await append(store, gap, lease)
    with pytest.raises(SequenceConflict):  # expected_sequence disagrees with the log
        await store.append(
            CONV, input_batch(3, 1, lease=lease), expected_sequence=4, owner_id="owner-a", epoch=1
        )
    with pytest.raises(SequenceConflict):  # records do not start at expected_sequence
        await store.append(
            CONV, input_batch(4, 1, lease=lease), expected_sequence=3, owner_id="owner-a", epoch=1
        )
    holes = input_batch(3, 3, lease=lease)
    holes = [holes[0], holes[2]]  # 3 then 5: not contiguous
    with pytest.raises(SequenceConflict):
        await store.append(CONV, holes, expected_sequence=3, owner_id="owner-a", epoch=1)

    for s in (store, reopen()):
        assert await s.read_records(CONV) == good
    nxt = input_batch(3, 1, lease=lease)
    await append(store, nxt, lease)
    assert await reopen().read_records(CONV) == good + nxt


async def test_malformed_batches_are_rejected(reopen: Reopen) -> None:
    store = reopen()
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    unsealed = [input_batch(1, 1, lease=lease)[0].model_copy(update={"checksum": ""})]
    with pytest.raises(ValueError):
        await append(store, unsealed, lease)
    with pytest.raises(ValueError):
        await store.append(CONV, [], expected_sequence=1, owner_id="owner-a", epoch=1)
    other_conv = input_batch(1, 1, lease=lease, conversation_id="other")
    with pytest.raises(ValueError):
        await store.append(CONV, other_conv, expected_sequence=1, owner_id="owner-a", epoch=1)
    with pytest.raises(ValueError):  # records written under another owner than the append's
        await store.append(
            CONV, input_batch(1, 1, lease=lease), expected_sequence=1, owner_id="owner-b", epoch=1
        )
    half = input_batch(1, 2, lease=lease)[:1]  # last record of the batch missing
    with pytest.raises(ValueError):
        await append(store, half, lease)
    assert await reopen().read_records(CONV) == []


async def test_invalid_conversation_ids(reopen: Reopen) -> None:
    store = reopen()
    for bad in ("", "..", "a/b", "x" * 129, "sp ace"):
        with pytest.raises(ValueError):
            await store.acquire_lease(bad, "owner-a", ttl_s=TTL, now_s=0.0)
        with pytest.raises(ValueError):
            await store.read_records(bad)


async def test_reopen_after_every_commit(reopen: Reopen) -> None:
    lease = await reopen().acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    expected: list[EventRecord] = []
    for i in range(20):
        store = reopen()
        last = (await store.read_records(CONV, repair=i % 2 == 0))[-1:] or None
        start = last[0].sequence + 1 if last else 1
        batch = input_batch(start, 1 + i % 3, lease=lease)
        await append(store, batch, lease)
        expected += batch
    got = await reopen().read_records(CONV)
    assert got == expected
    assert sequences(got) == list(range(1, len(expected) + 1))


async def test_two_store_objects_interleave(reopen: Reopen) -> None:
    """Another process appending must not confuse this one's cached view of the log."""
    one, two = reopen(), reopen()
    lease = await one.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    await append(one, input_batch(1, 2, lease=lease), lease)
    await append(two, input_batch(3, 1, lease=lease), lease)
    with pytest.raises(SequenceConflict):
        await append(one, input_batch(3, 1, lease=lease, batch="dup"), lease)
    await append(one, input_batch(4, 2, lease=lease), lease)
    assert sequences(await two.read_records(CONV)) == [1, 2, 3, 4, 5]
    assert sequences(await one.read_records(CONV, after_sequence=3)) == [4, 5]


# -- fencing and leases --------------------------------------------------------------------------


async def test_stale_owner_or_epoch_writes_nothing(reopen: Reopen) -> None:
    store = reopen()
    with pytest.raises(StaleLease):  # no lease at all
        await store.append(
            CONV,
            input_batch(
                1, 1, lease=Lease(conversation_id=CONV, owner_id="x", epoch=1, expires_at_s=9)
            ),
            expected_sequence=1,
            owner_id="x",
            epoch=1,
        )
    a1 = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    base = lease_batch(1, a1)
    await append(store, base, a1)
    # Owner b takes over after a's lease expired: a is now a zombie.
    b2 = await store.acquire_lease(CONV, "owner-b", ttl_s=TTL, now_s=100.0)
    assert b2.epoch == a1.epoch + 1
    with pytest.raises(StaleLease):
        await append(store, input_batch(2, 1, lease=a1), a1)
    wrong_owner = Lease(conversation_id=CONV, owner_id="owner-c", epoch=b2.epoch, expires_at_s=1e9)
    with pytest.raises(StaleLease):
        await append(store, input_batch(2, 1, lease=wrong_owner), wrong_owner)
    future = Lease(conversation_id=CONV, owner_id="owner-b", epoch=b2.epoch + 1, expires_at_s=1e9)
    with pytest.raises(StaleLease):
        await append(store, input_batch(2, 1, lease=future), future)
    for s in (store, reopen()):
        assert await s.read_records(CONV) == base
    mine = lease_batch(2, b2)
    await append(store, mine, b2)
    got = await reopen().read_records(CONV)
    assert got == base + mine
    assert reduce(new_state(CONV), got).owner_id == "owner-b"


async def test_lease_lifecycle(reopen: Reopen) -> None:
    store = reopen()
    a = await store.acquire_lease(CONV, "owner-a", ttl_s=10.0, now_s=100.0)
    assert (a.owner_id, a.epoch, a.expires_at_s) == ("owner-a", 1, 110.0)
    assert await reopen().current_lease(CONV) == a

    with pytest.raises(LeaseHeld) as held:
        await store.acquire_lease(CONV, "owner-b", ttl_s=10.0, now_s=105.0)
    assert held.value.expires_at_s == 110.0

    a = await reopen().renew_lease(a, ttl_s=10.0, now_s=108.0)
    assert (a.epoch, a.expires_at_s) == (1, 118.0)
    with pytest.raises(LeaseHeld):
        await store.acquire_lease(CONV, "owner-b", ttl_s=10.0, now_s=115.0)

    # The same owner re-acquiring still moves the epoch: a restarted process is a new writer.
    a2 = await store.acquire_lease(CONV, "owner-a", ttl_s=10.0, now_s=116.0)
    assert a2.epoch == 2
    with pytest.raises(StaleLease):
        await store.renew_lease(a, ttl_s=10.0, now_s=116.0)

    # Expired: another owner takes over with epoch + 1, and the old owner is fenced.
    b = await store.acquire_lease(CONV, "owner-b", ttl_s=10.0, now_s=126.0)
    assert (b.owner_id, b.epoch) == ("owner-b", 3)
    with pytest.raises(StaleLease):
        await store.renew_lease(a2, ttl_s=10.0, now_s=127.0)
    await store.release_lease(a2)  # stale release: no effect
    assert await reopen().current_lease(CONV) == b

    # Release expires the lease but keeps the epoch, so the next owner still gets epoch + 1.
    await store.release_lease(b)
    released = await reopen().current_lease(CONV)
    assert released is not None
    assert (released.owner_id, released.epoch, released.expires_at_s) == ("owner-b", 3, -1.0)
    c = await store.acquire_lease(CONV, "owner-c", ttl_s=10.0, now_s=127.0)
    assert (c.owner_id, c.epoch) == ("owner-c", 4)
    with pytest.raises(StaleLease):
        await store.renew_lease(b, ttl_s=10.0, now_s=127.0)


async def test_leases_are_per_conversation(reopen: Reopen) -> None:
    store = reopen()
    a = await store.acquire_lease("one", "owner-a", ttl_s=10.0, now_s=0.0)
    b = await store.acquire_lease("two", "owner-b", ttl_s=10.0, now_s=0.0)
    assert (a.epoch, b.epoch) == (1, 1)
    with pytest.raises(StaleLease):  # a's lease on "one" does not let it write "two"
        await store.append(
            "two",
            input_batch(1, 1, lease=a, conversation_id="two"),
            expected_sequence=1,
            owner_id="owner-a",
            epoch=1,
        )


# -- checkpoints ---------------------------------------------------------------------------------


async def _checkpoint_at(
    store: Store, lease: Lease, through: int, saved_at_s: float = 0.0
) -> Checkpoint:
    log = [r for r in await store.read_records(CONV) if r.sequence <= through]
    cp = make_checkpoint(reduce(new_state(CONV), log), saved_at_s=saved_at_s)
    assert cp.through_sequence == through
    await store.save_checkpoint(cp, owner_id=lease.owner_id, epoch=lease.epoch)
    return cp


async def test_checkpoints_keep_newest_two(reopen: Reopen) -> None:
    store = reopen()
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    await append(store, lease_batch(1, lease), lease)
    for start in range(2, 12, 2):
        await append(store, input_batch(start, 2, lease=lease), lease)
    cp3 = await _checkpoint_at(store, lease, 3)
    assert await reopen().load_checkpoints(CONV) == [cp3]
    cp5 = await _checkpoint_at(store, lease, 5)
    cp9 = await _checkpoint_at(store, lease, 9)
    loaded = await reopen().load_checkpoints(CONV)
    assert loaded == [cp9, cp5]
    assert all(cp.verify() for cp in loaded)
    assert loaded[0].to_state() == reduce(new_state(CONV), (await store.read_records(CONV))[:9])
    cp11 = await _checkpoint_at(store, lease, 11)
    assert await reopen().load_checkpoints(CONV) == [cp11, cp9]
    # Saving the same through_sequence again replaces it.
    cp11b = await _checkpoint_at(store, lease, 11, saved_at_s=5.0)
    assert await reopen().load_checkpoints(CONV) == [cp11b, cp9]


async def test_checkpoint_beyond_the_saved_one_is_dropped(reopen: Reopen) -> None:
    """A newer checkpoint than the one just saved can only be from a lost suffix."""
    store = reopen()
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    await append(store, lease_batch(1, lease), lease)
    await append(store, input_batch(2, 6, lease=lease), lease)
    await _checkpoint_at(store, lease, 3)
    cp7 = await _checkpoint_at(store, lease, 7)
    cp5 = await _checkpoint_at(store, lease, 5)
    loaded = await reopen().load_checkpoints(CONV)
    assert cp7 not in loaded
    assert [cp.through_sequence for cp in loaded] == [5, 3]
    assert loaded[0] == cp5


async def test_checkpoint_is_fenced(reopen: Reopen) -> None:
    store = reopen()
    a = await store.acquire_lease(CONV, "owner-a", ttl_s=1.0, now_s=0.0)
    await append(store, lease_batch(1, a), a)
    cp = make_checkpoint(reduce(new_state(CONV), await store.read_records(CONV)), saved_at_s=0.0)
    with pytest.raises(StaleLease):
        await store.save_checkpoint(cp, owner_id="owner-a", epoch=a.epoch + 1)
    b = await store.acquire_lease(CONV, "owner-b", ttl_s=1.0, now_s=5.0)
    with pytest.raises(StaleLease):
        await store.save_checkpoint(cp, owner_id="owner-a", epoch=a.epoch)
    assert await reopen().load_checkpoints(CONV) == []
    await store.save_checkpoint(cp, owner_id="owner-b", epoch=b.epoch)
    assert await reopen().load_checkpoints(CONV) == [cp]


# -- listing and description ---------------------------------------------------------------------


async def test_list_conversations(reopen: Reopen) -> None:
    store = reopen()
    assert await store.list_conversations() == []
    z = await store.acquire_lease("zeta", "owner-a", ttl_s=TTL, now_s=0.0)
    await store.acquire_lease("alpha.2", "owner-a", ttl_s=TTL, now_s=0.0)
    await store.append(
        "zeta",
        input_batch(1, 1, lease=z, conversation_id="zeta"),
        expected_sequence=1,
        owner_id="owner-a",
        epoch=z.epoch,
    )
    await store.acquire_lease("Mid_1", "owner-b", ttl_s=TTL, now_s=0.0)
    assert await reopen().list_conversations() == ["Mid_1", "alpha.2", "zeta"]


async def test_describe_names_the_durability_mode(reopen: Reopen) -> None:
    text = reopen().describe()
    assert "store" in text
    assert ("power loss" in text) or ("synchronous" in text)


async def test_without_shared_memory_the_log_is_checkpointed_and_truncated(tmp_path: Path) -> None:
    """Without shared memory SQLite's auto-checkpoint would never restart the log (its index dies
    with each connection); the store's own TRUNCATE checkpoint keeps it short and loses nothing."""
    path = tmp_path / "store.db"
    store = SQLiteStore(
        str(path), blocking=InlineBlocking(), shared_memory=False, wal_autocheckpoint=4
    )
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=TTL, now_s=0.0)
    await append(store, lease_batch(1, lease), lease)
    sizes = []
    for start in range(2, 42, 4):
        await append(store, input_batch(start, 4, lease=lease), lease)
        sizes.append((tmp_path / "store.db-wal").stat().st_size)
    assert 0 in sizes  # truncated by a checkpoint
    assert max(sizes) < 8 * 4096  # never more than a few pages past the threshold
    assert sequences(await store.read_records(CONV)) == list(range(1, 42))
    store.abandon()
