"""What only the file store has to get right: torn tails, damaged files and the write protocol.

Also the SQLite store's refusal to open a file that is not a database.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from testkit import input_batch

from durable.events import EventRecord
from durable.journal import recover_state
from durable.ports import InlineBlocking, OsFileSystem
from durable.state import State, new_state, reduce
from durable.store import (
    CorruptStore,
    FileStore,
    Lease,
    SQLiteStore,
    make_checkpoint,
)

CONV = "conv-1"
T = TypeVar("T")


def state_after(log: list[EventRecord]) -> State:
    """The reduced state after ``log`` (whose records carry epoch 1 but no lease_acquired)."""
    start = new_state(CONV).model_copy(update={"epoch": log[0].epoch, "owner_id": log[0].owner_id})
    return reduce(start, log)


def line(record: EventRecord) -> bytes:
    return (record.to_line() + "\n").encode("utf-8")


async def append(store: FileStore, batch: list[EventRecord], lease: Lease) -> None:
    await store.append(
        CONV, batch, expected_sequence=batch[0].sequence, owner_id=lease.owner_id, epoch=lease.epoch
    )


@pytest.fixture(params=[True, False], ids=["fsync", "nofsync"])
def fsync(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def open_store(tmp_path: Path, fsync: bool = True) -> FileStore:
    return FileStore(str(tmp_path / "store"), fs=OsFileSystem(), fsync=fsync)


def events_file(tmp_path: Path) -> Path:
    return tmp_path / "store" / CONV / "events.jsonl"


async def setup_log(tmp_path: Path, fsync: bool) -> tuple[Lease, list[EventRecord]]:
    """A log of two committed batches (sequences 1-3), returning the lease and the records."""
    store = open_store(tmp_path, fsync)
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    good = input_batch(1, 2, lease=lease) + input_batch(3, 1, lease=lease)
    await append(store, good[:2], lease)
    await append(store, good[2:], lease)
    return lease, good


def corrupt_checksum(record: EventRecord) -> bytes:
    """The record's line with its content changed but its old checksum kept."""
    body = json.loads(record.to_line())
    body["event"]["content"] = "tampered"
    return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def torn_tails(lease: Lease) -> dict[str, bytes]:
    nxt = input_batch(4, 3, lease=lease)
    return {
        "half-line": line(nxt[0])[:40],
        "line-without-newline": line(nxt[0])[:-1],
        "incomplete-batch": line(nxt[0]) + line(nxt[1]),
        "incomplete-batch-then-half-line": line(nxt[0]) + line(nxt[1])[:25],
        "bad-checksum-last": b"".join(line(r) for r in nxt[:2]) + corrupt_checksum(nxt[2]),
        "zeros": b"\x00" * 300,
        "garbage-line": b"not json at all\n",
        "duplicate-old-record": line(input_batch(3, 1, lease=lease, batch="x")[0]),
    }


TAIL_KINDS = [
    "half-line",
    "line-without-newline",
    "incomplete-batch",
    "incomplete-batch-then-half-line",
    "bad-checksum-last",
    "zeros",
    "garbage-line",
    "duplicate-old-record",
]


@pytest.mark.parametrize("kind", TAIL_KINDS)
async def test_torn_tail_ignored_then_repaired(tmp_path: Path, fsync: bool, kind: str) -> None:
    lease, good = await setup_log(tmp_path, fsync)
    path = events_file(tmp_path)
    clean = path.read_bytes()
    with path.open("ab") as f:
        f.write(torn_tails(lease)[kind])
    torn = path.read_bytes()

    # Without repair: the tail is ignored, never trusted, and left alone.
    store = open_store(tmp_path, fsync)
    assert await store.read_records(CONV) == good
    assert path.read_bytes() == torn

    # With repair: truncated to the committed prefix.
    assert await store.read_records(CONV, repair=True) == good
    assert path.read_bytes() == clean

    # Appends continue contiguously after the repaired log.
    more = input_batch(4, 2, lease=lease)
    await append(store, more, lease)
    assert await open_store(tmp_path, fsync).read_records(CONV) == good + more


@pytest.mark.parametrize("kind", TAIL_KINDS)
async def test_append_repairs_a_torn_tail_first(tmp_path: Path, fsync: bool, kind: str) -> None:
    """An append on top of an unrepaired tail would bury it in the middle of the log."""
    lease, good = await setup_log(tmp_path, fsync)
    with events_file(tmp_path).open("ab") as f:
        f.write(torn_tails(lease)[kind])
    store = open_store(tmp_path, fsync)
    more = input_batch(4, 1, lease=lease)
    await append(store, more, lease)
    assert await open_store(tmp_path, fsync).read_records(CONV) == good + more


async def test_tail_appearing_under_a_warm_cache(tmp_path: Path) -> None:
    """The cache notices the file changed size and rescans rather than trusting itself."""
    lease, good = await setup_log(tmp_path, True)
    store = open_store(tmp_path)
    assert await store.read_records(CONV) == good
    with events_file(tmp_path).open("ab") as f:
        f.write(line(input_batch(4, 2, lease=lease)[0]))
    assert await store.read_records(CONV) == good
    assert await store.read_records(CONV, after_sequence=1) == good[1:]
    more = input_batch(4, 1, lease=lease)
    await append(store, more, lease)
    assert await store.read_records(CONV) == good + more


def _rewrite_line(path: Path, index: int, new: bytes | None) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    if new is None:
        del lines[index]
    else:
        lines[index] = new
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize("damage", ["checksum", "unparseable", "missing", "torn-then-more"])
async def test_damage_in_the_middle_is_corruption(tmp_path: Path, damage: str) -> None:
    store = open_store(tmp_path)
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    log = (
        input_batch(1, 1, lease=lease)
        + input_batch(2, 2, lease=lease)
        + input_batch(4, 1, lease=lease)
        + input_batch(5, 1, lease=lease)
    )
    for batch in (log[:1], log[1:3], log[3:4], log[4:]):
        await append(store, batch, lease)
    path = events_file(tmp_path)
    if damage == "checksum":
        _rewrite_line(path, 1, corrupt_checksum(log[1]))
    elif damage == "unparseable":
        _rewrite_line(path, 3, b'{"sequence": 4, "oops\n')
    elif damage == "missing":
        _rewrite_line(path, 3, None)  # record 4 (its own batch) gone: a gap
    else:
        _rewrite_line(path, 2, None)  # batch 2-3 lost its last record, later batches follow
    before = path.read_bytes()
    for repair in (False, True):
        with pytest.raises(CorruptStore) as err:
            await open_store(tmp_path).read_records(CONV, repair=repair)
        message = str(err.value)
        assert "events.jsonl" in message
        assert "line " in message
    with pytest.raises(CorruptStore):
        await append(open_store(tmp_path), input_batch(6, 1, lease=lease), lease)
    assert path.read_bytes() == before  # corruption is reported, never "repaired" away


async def test_incomplete_batch_followed_by_a_commit_is_corruption(tmp_path: Path) -> None:
    lease, _ = await setup_log(tmp_path, True)
    path = events_file(tmp_path)
    with path.open("ab") as f:
        f.write(line(input_batch(4, 2, lease=lease)[0]))  # batch 4-5 torn ...
        f.write(line(input_batch(5, 1, lease=lease, batch="later")[0]))  # ... then a later commit
    with pytest.raises(CorruptStore, match="line 5"):
        await open_store(tmp_path).read_records(CONV)


async def test_corrupt_newest_checkpoint_fails_verify(tmp_path: Path) -> None:
    lease, good = await setup_log(tmp_path, True)
    store = open_store(tmp_path)
    older = make_checkpoint(state_after(good[:2]), saved_at_s=1.0)
    newer = make_checkpoint(state_after(good), saved_at_s=2.0)
    await store.save_checkpoint(older, owner_id="owner-a", epoch=lease.epoch)
    await store.save_checkpoint(newer, owner_id="owner-a", epoch=lease.epoch)
    cp_path = tmp_path / "store" / CONV / "checkpoint-000000000003.json"
    assert cp_path.exists()
    body = json.loads(cp_path.read_text())
    body["state"]["last_sequence"] = 99  # bit rot that still parses
    cp_path.write_text(json.dumps(body))
    loaded = await open_store(tmp_path).load_checkpoints(CONV)
    assert [cp.through_sequence for cp in loaded] == [3, 2]
    assert not loaded[0].verify()
    assert loaded[1].verify()
    assert loaded[1] == older

    # A torn (unparseable) checkpoint: power loss may leave one only without fsync (skipped
    # there); with fsync=True the atomic write never does, so it is damage, named, not dropped.
    cp_path.write_bytes(cp_path.read_bytes()[:30])
    assert await open_store(tmp_path, fsync=False).load_checkpoints(CONV) == [older]
    with pytest.raises(CorruptStore, match=r"checkpoint-000000000003\.json: checkpoint does not"):
        await open_store(tmp_path).load_checkpoints(CONV)
    assert cp_path.exists()


async def test_stray_tmp_files_are_cleaned_up(tmp_path: Path) -> None:
    lease, good = await setup_log(tmp_path, True)
    conv_dir = tmp_path / "store" / CONV
    (conv_dir / "checkpoint-000000000002.json.tmp").write_text("{half")
    store = open_store(tmp_path)
    assert await store.load_checkpoints(CONV) == []
    cp = make_checkpoint(state_after(good), saved_at_s=1.0)
    await store.save_checkpoint(cp, owner_id="owner-a", epoch=lease.epoch)
    assert sorted(p.name for p in conv_dir.iterdir()) == [
        "checkpoint-000000000003.json",
        "events.jsonl",
        "lease.json",
    ]


async def test_repair_drops_checkpoints_beyond_the_log(tmp_path: Path) -> None:
    """After power loss without fsync a checkpoint may outlive the events it summarises."""
    lease, good = await setup_log(tmp_path, False)
    store = open_store(tmp_path, False)
    cp2 = make_checkpoint(state_after(good[:2]), saved_at_s=1.0)
    cp3 = make_checkpoint(state_after(good), saved_at_s=1.0)
    await store.save_checkpoint(cp2, owner_id="owner-a", epoch=lease.epoch)
    await store.save_checkpoint(cp3, owner_id="owner-a", epoch=lease.epoch)
    path = events_file(tmp_path)
    path.write_bytes(path.read_bytes()[: len(line(good[0])) + len(line(good[1])) + 10])
    recovered = open_store(tmp_path, False)
    assert await recovered.read_records(CONV) == good[:2]
    assert len(await recovered.load_checkpoints(CONV)) == 2  # plain reads change nothing
    assert await recovered.read_records(CONV, repair=True) == good[:2]
    assert await recovered.load_checkpoints(CONV) == [cp2]


async def test_garbage_lease_file_is_corruption(tmp_path: Path) -> None:
    lease, good = await setup_log(tmp_path, True)
    (tmp_path / "store" / CONV / "lease.json").write_bytes(b"\x00\x01 not a lease")
    store = open_store(tmp_path)
    with pytest.raises(CorruptStore, match="lease"):
        await store.current_lease(CONV)
    with pytest.raises(CorruptStore):
        await store.acquire_lease(CONV, "owner-b", ttl_s=30.0, now_s=1000.0)
    with pytest.raises(CorruptStore):
        await append(store, input_batch(4, 1, lease=lease), lease)
    assert await store.read_records(CONV) == good


async def test_sqlite_garbage_file_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"this is not a database, just some bytes " * 200)
    store = SQLiteStore(str(path), blocking=InlineBlocking())
    with pytest.raises(CorruptStore, match=r"store\.db"):
        await store.read_records(CONV)
    with pytest.raises(CorruptStore):
        await store.acquire_lease(CONV, "owner-a", ttl_s=1.0, now_s=0.0)
    store.abandon()


async def test_sqlite_damaged_row_is_corruption(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    store = SQLiteStore(path, blocking=InlineBlocking())
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    good = input_batch(1, 2, lease=lease) + input_batch(3, 1, lease=lease)
    await store.append(CONV, good[:2], expected_sequence=1, owner_id="owner-a", epoch=1)
    await store.append(CONV, good[2:], expected_sequence=3, owner_id="owner-a", epoch=1)
    await store.close()
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE events SET record = ? WHERE sequence = 2", (corrupt_checksum(good[1]).decode(),)
    )
    conn.commit()
    conn.close()
    reopened = SQLiteStore(path, blocking=InlineBlocking())
    assert await reopened.read_records(CONV, after_sequence=2) == good[2:]
    with pytest.raises(CorruptStore, match="checksum"):
        await reopened.read_records(CONV)
    reopened.abandon()


@dataclass
class RecordingBlocking:
    labels: list[str] = field(default_factory=list)

    async def run(self, label: str, fn: Callable[[], T]) -> T:
        self.labels.append(label)
        return fn()


async def test_sqlite_calls_go_through_the_blocking_port(tmp_path: Path) -> None:
    blocking = RecordingBlocking()
    store = SQLiteStore(str(tmp_path / "store.db"), blocking=blocking)
    assert blocking.labels == []  # the connection is opened lazily
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    await store.append(
        CONV, input_batch(1, 1, lease=lease), expected_sequence=1, owner_id="owner-a", epoch=1
    )
    log = await store.read_records(CONV)
    cp = make_checkpoint(state_after(log), saved_at_s=0.0)
    await store.save_checkpoint(cp, owner_id="owner-a", epoch=1)
    await store.load_checkpoints(CONV)
    assert blocking.labels == [
        "sqlite.lease",
        "sqlite.commit",
        "sqlite.read",
        "sqlite.checkpoint",
        "sqlite.read",
    ]
    store.abandon()
    assert (
        await SQLiteStore(str(tmp_path / "store.db"), blocking=blocking).read_records(CONV) == log
    )


@dataclass
class RecordingFs:
    """The real file system, logging each call as (operation, file name)."""

    inner: OsFileSystem = field(default_factory=OsFileSystem)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.inner, name)

        def call(*args: Any) -> Any:
            if name not in ("exists", "read", "size", "listdir"):
                self.calls.append((name, str(args[0]).rsplit("/", 1)[-1]))
            return method(*args)

        return call


async def test_write_protocol_in_fsync_mode(tmp_path: Path) -> None:
    fs = RecordingFs()
    store = FileStore(str(tmp_path / "store"), fs=fs, fsync=True)
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    assert fs.calls == [
        ("makedirs", CONV),
        ("fsync_dir", "store"),
        ("exclusive", CONV),  # every read-modify-write holds the directory's lock
        ("write", "lease.json.tmp"),
        ("fsync", "lease.json.tmp"),
        ("rename", "lease.json.tmp"),
        ("fsync_dir", CONV),
    ]
    fs.calls.clear()
    log = input_batch(1, 3, lease=lease)
    await append(store, log, lease)
    assert fs.calls == [
        ("exclusive", CONV),
        ("append", "events.jsonl"),
        ("fsync", "events.jsonl"),
        ("fsync_dir", CONV),
    ]
    fs.calls.clear()
    await append(store, input_batch(4, 1, lease=lease), lease)
    assert fs.calls == [("exclusive", CONV), ("append", "events.jsonl"), ("fsync", "events.jsonl")]
    fs.calls.clear()
    cp = make_checkpoint(state_after(log), saved_at_s=0.0)
    await store.save_checkpoint(cp, owner_id="owner-a", epoch=lease.epoch)
    name = "checkpoint-000000000003.json"
    assert fs.calls == [
        ("exclusive", CONV),
        ("write", f"{name}.tmp"),
        ("fsync", f"{name}.tmp"),
        ("rename", f"{name}.tmp"),
        ("fsync_dir", CONV),
    ]


async def test_no_fsync_mode_only_fsyncs_leases(tmp_path: Path) -> None:
    fs = RecordingFs()
    store = FileStore(str(tmp_path / "store"), fs=fs, fsync=False)
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    assert ("fsync", "lease.json.tmp") in fs.calls
    fs.calls.clear()
    log = input_batch(1, 3, lease=lease)
    await append(store, log, lease)
    cp = make_checkpoint(state_after(log), saved_at_s=0.0)
    await store.save_checkpoint(cp, owner_id="owner-a", epoch=lease.epoch)
    assert [op for op, _ in fs.calls if op.startswith("fsync")] == []
    assert "power loss" in store.describe()


async def test_one_append_call_per_batch(tmp_path: Path) -> None:
    """A whole batch in one write: a process crash can never leave half of it."""
    fs = RecordingFs()
    store = FileStore(str(tmp_path / "store"), fs=fs, fsync=True)
    lease = await store.acquire_lease(CONV, "owner-a", ttl_s=30.0, now_s=0.0)
    fs.calls.clear()
    await append(store, input_batch(1, 5, lease=lease), lease)
    assert [op for op, _ in fs.calls].count("append") == 1
    assert len(events_file(tmp_path).read_bytes().splitlines()) == 5


# -- damage that looks like a crash: the evidence is kept -----------------------------------------


async def _checkpointed_log(tmp_path: Path, fsync: bool) -> tuple[FileStore, Path, list[Path]]:
    """Sequences 1-3 in two batches, a checkpoint through 2 and one through 3."""
    lease, good = await setup_log(tmp_path, fsync)
    store = open_store(tmp_path, fsync)
    for n in (2, 3):
        checkpoint = make_checkpoint(state_after(good[:n]), saved_at_s=float(n))
        await store.save_checkpoint(checkpoint, owner_id="owner-a", epoch=lease.epoch)
    directory = tmp_path / "store" / CONV
    return store, events_file(tmp_path), sorted(directory.glob("checkpoint-*.json"))


def _delete(events: Path) -> None:
    events.unlink()


def _empty(events: Path) -> None:
    events.write_bytes(b"")


def _cut_last_commit(events: Path) -> None:
    """The last commit (sequence 3) cut off cleanly at a record boundary."""
    events.write_bytes(b"".join(events.read_bytes().splitlines(keepends=True)[:2]))


def _flip_in_last_commit(events: Path) -> None:
    """One byte changed inside the complete last commit: it reads as a torn tail."""
    data = bytearray(events.read_bytes())
    at = data.rindex(b'"content"') if b'"content"' in data else len(data) - 20
    data[at + 1] ^= 0x20
    events.write_bytes(bytes(data))


DAMAGE = {
    "log deleted": _delete,
    "log emptied": _empty,
    "last commit cut at a record boundary": _cut_last_commit,
    "byte flipped in the last commit": _flip_in_last_commit,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
async def test_fsync_store_refuses_a_log_that_lost_acknowledged_commits(
    tmp_path: Path, damage: str
) -> None:
    """A checkpoint through sequence 3 proves commits 1-3 were acknowledged. With fsync=True,
    recovery stops with CorruptStore naming the missing sequences, and deletes and truncates
    nothing (the old behaviour: an empty or shorter conversation, both checkpoints deleted)."""
    _, events, checkpoints = await _checkpointed_log(tmp_path, fsync=True)
    DAMAGE[damage](events)
    before = events.read_bytes() if events.exists() else None
    with pytest.raises(CorruptStore, match=r"proves commits through sequence 3") as err:
        await recover_state(open_store(tmp_path), CONV)
    assert "are lost or damaged" in str(err.value)
    assert all(path.exists() for path in checkpoints), "the evidence was deleted"
    assert (events.read_bytes() if events.exists() else None) == before, "the log was repaired"


@pytest.mark.parametrize("damage", ["last commit cut at a record boundary", "log emptied"])
async def test_nofsync_store_treats_a_lost_suffix_as_its_promise_allows(
    tmp_path: Path, damage: str
) -> None:
    """With fsync=False power loss may take any suffix of acknowledged commits: recovery goes
    on from what is left and drops the checkpoints beyond it."""
    _, events, _ = await _checkpointed_log(tmp_path, fsync=False)
    DAMAGE[damage](events)
    state = await recover_state(open_store(tmp_path, fsync=False), CONV)
    assert state.last_sequence == (2 if "cut" in damage else 0)


# -- a tail a checkpoint proves acknowledged is damage: copied before the cut ---------------------


def _foreign_last_commit(events: Path) -> None:
    """The last commit (sequence 3) replaced by a sealed record of another conversation."""
    lease = Lease(conversation_id="conv-2", owner_id="owner-a", epoch=1, expires_at_s=30.0)
    (other,) = input_batch(3, 1, lease=lease, conversation_id="conv-2")
    events.write_bytes(b"".join(events.read_bytes().splitlines(keepends=True)[:2]) + line(other))


def _cut_mid_line(events: Path) -> None:
    """The last commit's line cut short, as a torn write leaves one."""
    events.write_bytes(events.read_bytes()[:-30])


def _cut_inside_a_batch(events: Path) -> None:
    """The log cut after sequence 1, inside the batch of sequences 1 and 2."""
    events.write_bytes(events.read_bytes().splitlines(keepends=True)[0])


PROVEN_TAILS: dict[str, tuple[Callable[[Path], None], int]] = {
    "byte flipped in the last commit": (_flip_in_last_commit, 2),
    "last commit cut mid-line": (_cut_mid_line, 2),
    "last commit another conversation's record": (_foreign_last_commit, 2),
    "cut inside a batch": (_cut_inside_a_batch, 0),
}


@pytest.mark.parametrize("damage", list(PROVEN_TAILS))
async def test_nofsync_copies_a_tail_a_checkpoint_proves_acknowledged(
    tmp_path: Path, damage: str
) -> None:
    """With fsync=False a power loss may take a suffix, so recovery goes on from the committed
    prefix; but a checkpoint through sequence 3 proves the cut bytes held acknowledged commits:
    they are damage, not a torn write, and are copied to a quarantine file before the log is
    cut (the old behaviour: cut without a copy, as a torn tail). The checkpoints beyond the
    prefix are set aside after the cut, never deleted."""
    _, events, checkpoints = await _checkpointed_log(tmp_path, fsync=False)
    found = {path.name: path.read_bytes() for path in checkpoints}
    damaging, kept = PROVEN_TAILS[damage]
    damaging(events)
    data = events.read_bytes()
    good_end = sum(len(x) for x in data.splitlines(keepends=True)[:kept])
    state = await recover_state(open_store(tmp_path, fsync=False), CONV)
    assert state.last_sequence == kept
    assert events.read_bytes() == data[:good_end]
    conv = events.parent
    copy = conv / f"quarantine-0001.events-from-byte-{good_end}.jsonl"
    assert copy.exists(), sorted(p.name for p in conv.iterdir())
    assert copy.read_bytes() == data[good_end:], "the copy is every byte that was cut"
    aside = {
        p.name.split(".", 1)[1]: p.read_bytes() for p in conv.glob("quarantine-*.checkpoint-*")
    }
    beyond = {name: body for name, body in found.items() if int(name[11:23]) > kept}
    assert aside == beyond, "every checkpoint beyond the prefix is set aside, none deleted"


async def test_nofsync_cuts_a_torn_tail_without_a_copy_when_nothing_proves_it(
    tmp_path: Path,
) -> None:
    """The control: the same cut, no checkpoint beyond it -- a torn tail, cut without a copy."""
    _, events, checkpoints = await _checkpointed_log(tmp_path, fsync=False)
    checkpoints[-1].unlink()  # the checkpoint through 3
    _cut_mid_line(events)
    state = await recover_state(open_store(tmp_path, fsync=False), CONV)
    assert state.last_sequence == 2
    assert not list(events.parent.glob("quarantine-*"))


async def test_nofsync_sets_aside_a_checkpoint_misnamed_lower(tmp_path: Path) -> None:
    """The newest checkpoint (through 3) under the name of one through 1: it verifies, its name
    claims nothing beyond the log, and with fsync=False it is skipped -- and recovery sets it
    aside under a quarantine name (the old behaviour: left in place, where a save kept it as the
    "newest older" checkpoint). Later saves rotate checkpoints; the quarantine file stays."""
    store, events, checkpoints = await _checkpointed_log(tmp_path, fsync=False)
    conv = events.parent
    newest = checkpoints[-1].read_bytes()
    checkpoints[-1].rename(conv / "checkpoint-000000000001.json")
    store = open_store(tmp_path, fsync=False)
    state = await recover_state(store, CONV)
    assert state.last_sequence == 3  # from the checkpoint through 2, then record 3
    aside = conv / "quarantine-0001.checkpoint-000000000001.json"
    assert aside.exists(), sorted(p.name for p in conv.iterdir())
    assert aside.read_bytes() == newest
    assert not (conv / "checkpoint-000000000001.json").exists()
    lease = await store.current_lease(CONV)
    assert lease is not None
    for sequence in (4, 5):  # two saves: the second rotates out the checkpoint through 2
        record = input_batch(sequence, 1, lease=lease)
        await append(store, record, lease)
        state = reduce(state, record)
        checkpoint = make_checkpoint(state, saved_at_s=float(sequence))
        await store.save_checkpoint(checkpoint, owner_id=lease.owner_id, epoch=lease.epoch)
    assert not (conv / "checkpoint-000000000002.json").exists()
    assert aside.read_bytes() == newest
    assert await recover_state(open_store(tmp_path, fsync=False), CONV) == state
    assert sorted(p.name for p in conv.glob("quarantine-*")) == [aside.name]


async def test_a_lease_file_that_is_a_directory_is_corruption(tmp_path: Path, fsync: bool) -> None:
    """``lease.json`` a directory: ``CorruptStore`` naming it (the old behaviour: a raw
    ``IsADirectoryError`` from the file system), and nothing written by any attempt."""
    lease, good = await setup_log(tmp_path, fsync)
    conv = tmp_path / "store" / CONV
    (conv / "lease.json").unlink()
    (conv / "lease.json").mkdir()

    def snapshot() -> dict[str, bytes | None]:
        return {p.name: None if p.is_dir() else p.read_bytes() for p in conv.iterdir()}

    before = snapshot()
    store = open_store(tmp_path, fsync)
    attempts: list[Callable[[], Any]] = [
        lambda: store.current_lease(CONV),
        lambda: store.acquire_lease(CONV, "owner-b", ttl_s=30.0, now_s=1000.0),
        lambda: append(store, input_batch(4, 1, lease=lease), lease),
        lambda: store.renew_lease(lease, ttl_s=30.0, now_s=1.0),
    ]
    for attempt in attempts:
        with pytest.raises(CorruptStore, match=r"lease\.json is a directory"):
            await attempt()
        assert snapshot() == before
    assert await store.read_records(CONV) == good
