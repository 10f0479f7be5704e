"""The damage-table record of every storage fault (sim.world.storage_faults): each fault maps to
the record the damage table gives it, from the damaged file's role and where the fault struck."""

from __future__ import annotations

import json

from durable.codec import canonical_json, sha256_hex
from sim.world.fs import SimFS
from sim.world.storage_faults import INVISIBLE, UNREAD, table_row

LOG = "/store/c1/events.jsonl"
#: Three commits: sequences 1-2, 3, 4-5 (each appended and synced on its own).
BATCHES = (("a", (1, 2)), ("b", (3,)), ("c", (4, 5)))


def _line(sequence: int, batch: str, last: bool) -> bytes:
    doc = {"sequence": sequence, "batch": batch, "last_in_batch": last, "pad": "x" * 40}
    return (json.dumps(doc) + "\n").encode()


def store_disk(*, checkpoint_through: int | None) -> tuple[SimFS, list[int]]:
    """A conversation directory as the file store leaves it: the log synced commit by commit, a
    lease, and maybe one checkpoint. Also returns each commit's end offset."""
    fs = SimFS()
    fs.makedirs("/store/c1")
    ends: list[int] = []
    for batch, sequences in BATCHES:
        fs.append(LOG, b"".join(_line(s, batch, s == sequences[-1]) for s in sequences))
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


def test_every_role_maps_to_its_record() -> None:
    fs, ends = store_disk(checkpoint_through=4)
    before = fs.clone(deep=True)
    lease = "/store/c1/lease.json"
    checkpoint = "/store/c1/checkpoint-000000000004.json"

    def row(path: str, what: str) -> str | None:
        found = table_row(before, fs, path, what)
        return None if found is None else found.kind

    assert row(LOG, "bitflip:3.0") == "damaged-earlier-commit"
    assert row(LOG, f"bitflip:{ends[1]}.0") == "damaged-last-commit-under-checkpoint"
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
