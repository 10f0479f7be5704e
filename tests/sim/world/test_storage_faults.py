"""The aimed storage faults and the damage-table record of every fault (sim.world.storage_faults):
a synced log is cut or deleted only where a checkpoint proves the loss, its last synced write
is damaged only there, and each fault maps to the record the damage table gives it."""

from __future__ import annotations

import random

from testkit import input_batch

from durable.codec import canonical_json, sha256_hex
from durable.store.base import Lease
from durable.store.logscan import scan_log
from sim.world.fs import SimFS
from sim.world.storage_faults import (
    CUT,
    DELETED,
    INVISIBLE,
    LAST_WRITE,
    UNREAD,
    TableRow,
    aimed_fault,
    proven_cuts,
    table_row,
)

LOG = "/store/c1/events.jsonl"
#: Three commits: sequences 1-2, 3, 4-5 (each appended and synced on its own).
BATCHES = (("a", (1, 2)), ("b", (3,)), ("c", (4, 5)))


#: The lease the log's records were written under.
LEASE = Lease(conversation_id="c1", owner_id="w", epoch=1, expires_at_s=9.0)


def _commit(sequences: tuple[int, ...], batch: str) -> bytes:
    """One commit's lines, sealed as the file store writes them (the mapping verifies records
    as the store's scan does: checksums included)."""
    records = input_batch(
        sequences[0], len(sequences), lease=LEASE, conversation_id="c1", batch=batch
    )
    return b"".join((r.to_line() + "\n").encode() for r in records)


def store_disk(*, checkpoint_through: int | None) -> tuple[SimFS, list[int]]:
    """A conversation directory as the file store leaves it: the log synced commit by commit, a
    lease, and maybe one checkpoint. Also returns each commit's end offset."""
    fs = SimFS()
    fs.makedirs("/store/c1")
    ends: list[int] = []
    for batch, sequences in BATCHES:
        fs.append(LOG, _commit(sequences, batch))
        fs.fsync(LOG)
        ends.append(fs.size(LOG))
    lease = {"conversation_id": "c1", "owner_id": "w", "epoch": 1, "expires_at_s": 9.0}
    doc = {"checksum": sha256_hex(canonical_json(lease)), "lease": lease}
    fs.write("/store/c1/lease.json", (canonical_json(doc) + "\n").encode())
    fs.fsync("/store/c1/lease.json")
    if checkpoint_through is not None:
        fs.write(f"/store/c1/checkpoint-{checkpoint_through:012d}.json", b"{}\n")
        fs.fsync(f"/store/c1/checkpoint-{checkpoint_through:012d}.json")
    fs.fsync_dir("/store/c1")
    return fs, ends


def test_a_cut_is_proven_only_below_a_checkpoint() -> None:
    fs, ends = store_disk(checkpoint_through=3)
    assert proven_cuts(fs, LOG, fs.read(LOG)) == [0, ends[0]]  # not at ends[1]: #3 is kept
    fs, _ = store_disk(checkpoint_through=None)
    assert proven_cuts(fs, LOG, fs.read(LOG)) == []


def test_aimed_faults_reach_every_kind_with_its_record() -> None:
    seen: dict[str, set[str]] = {}
    for seed in range(120):
        fs, ends = store_disk(checkpoint_through=3)
        before = fs.clone(deep=True)
        outcome = aimed_fault(fs, random.Random(seed), under="/store/c1")
        if not outcome:
            assert fs.snapshot() == before.snapshot()
            continue
        ((path, what),) = outcome.items()
        assert path == LOG
        row = table_row(before, fs, path, what)
        assert row is not None, what
        seen.setdefault(what.split(":")[0], set()).add(row.kind)
        kind, _, detail = what.partition(":")
        proof = ("checkpoint-000000000003.json",)  # what a repair must set aside, not delete
        if kind == CUT:
            assert int(detail) in (0, ends[0]) and fs.read(LOG) == before.read(LOG)[: int(detail)]
            first = 1 if detail == "0" else 3
            assert row == TableRow("log-cut-under-checkpoint", first, beyond=proof)
        elif kind == LAST_WRITE:
            assert ends[1] <= int(detail.split(".")[0]) < ends[2]  # inside the last write
            assert row == TableRow("damaged-last-commit", 4)
        else:
            assert kind == DELETED and not fs.exists(LOG)
            assert row == TableRow("log-missing", 1, beyond=proof)
    assert {k: sorted(v) for k, v in seen.items()} == {
        CUT: ["log-cut-under-checkpoint"],
        DELETED: ["log-missing"],
        LAST_WRITE: ["damaged-last-commit"],
    }


def test_without_a_checkpoint_only_the_last_write_is_aimed_at() -> None:
    kinds = set()
    for seed in range(60):
        fs, _ = store_disk(checkpoint_through=None)
        kinds |= {w.split(":")[0] for w in aimed_fault(fs, random.Random(seed), under="/").values()}
    assert kinds == {LAST_WRITE}


def test_a_log_with_pending_data_is_not_aimed_at() -> None:
    fs, _ = store_disk(checkpoint_through=3)
    fs.append(LOG, _commit((6,), "d"))  # acknowledged without fsync: pending
    assert fs.synced_logs(under="/store") == []
    assert all(aimed_fault(fs, random.Random(s), under="/store") == {} for s in range(30))


def test_every_role_maps_to_its_record() -> None:
    fs, ends = store_disk(checkpoint_through=4)
    before = fs.clone(deep=True)
    lease = "/store/c1/lease.json"
    checkpoint = "/store/c1/checkpoint-000000000004.json"

    def row(path: str, what: str) -> str | None:
        found = table_row(before, fs, path, what)
        return None if found is None else found.kind

    assert row(LOG, "bitflip:3.0") == "damaged-earlier-commit"
    assert row(LOG, f"{LAST_WRITE}:{ends[1]}.0") == "damaged-last-commit-under-checkpoint"
    fs.write(lease, fs.read(lease).replace(b'"epoch":1', b'"epoch":3'))
    assert row(lease, "bitflip:40.1") == "lease-garbage"
    fs.write(lease, before.read(lease)[:-1])  # its last newline cut: the same lease
    assert row(lease, "truncated:10") == INVISIBLE
    fs.unlink(lease)
    assert row(lease, "deleted:gone") == "lease-missing"
    fs.write(checkpoint, b"{")
    assert row(checkpoint, "truncated:1") == "checkpoint-unparseable"
    assert row(checkpoint, "deleted:gone") == "newest-checkpoint-missing"
    assert row("/store/c1/quarantine-0001.events-from-byte-9.jsonl", "bitflip:1.1") == UNREAD
    assert row("/store/c1/lease.json.tmp", "bitflip:1.1") == "stray-temporary-files"
    assert row("/store/c1/notes.txt", "bitflip:1.1") is None  # unmapped: a harness error


def test_a_flipped_newline_before_the_last_record_leaves_no_later_commit() -> None:
    """The newline that ends the second-to-last commit, flipped (``\\n`` -> ``J``), joins a
    last commit of one record to the struck line: the store's scan sees no valid later commit,
    so the record is the last commit's under the checkpoint (refused as lost), not an earlier
    commit's. Found by a long fuzz run; one byte earlier, the last record still proves it."""
    fs, ends = store_disk(checkpoint_through=None)
    fs.append(LOG, _commit((6,), "d"))
    fs.fsync(LOG)
    fs.write("/store/c1/checkpoint-000000000006.json", b"{}\n")
    before = fs.clone(deep=True)
    newline = ends[2] - 1
    assert before.read(LOG)[newline : newline + 1] == b"\n"
    joined = scan_log(_flipped(before.read(LOG), newline), "c1").anomaly
    assert joined is not None and joined.later is None
    found = table_row(before, fs, LOG, f"bitflip:{newline}.6")
    assert found is not None and found.kind == "damaged-last-commit-under-checkpoint"
    assert found.first_lost == 4
    struck = scan_log(_flipped(before.read(LOG), newline - 1), "c1").anomaly
    assert struck is not None and struck.later is not None
    found = table_row(before, fs, LOG, f"bitflip:{newline - 1}.6")
    assert found is not None and found.kind == "damaged-earlier-commit"


def _flipped(data: bytes, offset: int) -> bytes:
    """``data`` with bit 6 of the byte at ``offset`` flipped."""
    return data[:offset] + bytes([data[offset] ^ 0x40]) + data[offset + 1 :]
