"""``FileStore(fsync=False)`` goes on past damage without destroying it: what it cuts is copied
to a quarantine file first, and the checkpoints it cannot use are moved aside, never deleted
(``durable.store.file``, "Nothing damaged is ever deleted")."""

from __future__ import annotations

from pathlib import Path

import trio
from test_inspect import build
from testkit import CONV, Stores

from durable.ports import OsFileSystem
from durable.store.base import make_checkpoint
from durable.store.file import FileStore, is_quarantine
from sim.world.stores import StoreKind

#: Newest first: the order recovery moves them aside in.
CHECKPOINTS = ("checkpoint-000000000027.json", "checkpoint-000000000023.json")


def _damage_record_10(conv: Path) -> tuple[bytes, bytes]:
    """Flip a letter of record 10 (valid commits follow it): the log before it, and from it on."""
    lines = (conv / "events.jsonl").read_bytes().splitlines(keepends=True)
    at = lines[9].index(b'"type":"') + len(b'"type":"')
    lines[9] = lines[9][:at] + bytes([lines[9][at] ^ 0x20]) + lines[9][at + 1 :]
    (conv / "events.jsonl").write_bytes(b"".join(lines))
    return b"".join(lines[:9]), b"".join(lines[9:])


def _recover(root: Path) -> int:
    store = FileStore(str(root), fs=OsFileSystem(), fsync=False)
    records = trio.run(lambda: store.read_records(CONV, repair=True))
    return len(records)


def test_damage_is_copied_to_a_quarantine_file_before_the_log_is_cut(tmp_path: Path) -> None:
    stores: Stores = build(StoreKind.FILE, tmp_path)
    conv = stores.path / CONV
    checkpoints = {name: (conv / name).read_bytes() for name in CHECKPOINTS}
    kept, damaged = _damage_record_10(conv)
    assert _recover(stores.path) == 9
    assert (conv / "events.jsonl").read_bytes() == kept
    quarantined = sorted(p.name for p in conv.iterdir() if is_quarantine(p.name))
    log_copy = f"quarantine-0001.events-from-byte-{len(kept)}.jsonl"
    assert quarantined == [
        log_copy,
        "quarantine-0002.checkpoint-000000000027.json",
        "quarantine-0003.checkpoint-000000000023.json",
    ]
    assert (conv / log_copy).read_bytes() == damaged, "the copy is every byte that was cut"
    for name, data in checkpoints.items():
        assert not (conv / name).exists()
        assert (conv / quarantined[1 + CHECKPOINTS.index(name)]).read_bytes() == data
    assert not [p for p in conv.iterdir() if p.name.endswith(".tmp")]


def test_a_second_recovery_quarantines_nothing_more(tmp_path: Path) -> None:
    stores: Stores = build(StoreKind.FILE, tmp_path)
    conv = stores.path / CONV
    _damage_record_10(conv)
    _recover(stores.path)
    before = {p.name: p.read_bytes() for p in conv.iterdir()}
    assert _recover(stores.path) == 9
    assert {p.name: p.read_bytes() for p in conv.iterdir()} == before


def test_a_torn_tail_is_cut_without_a_copy(tmp_path: Path) -> None:
    """A torn tail is a crash's leftover, never acknowledged: no quarantine (the crash model)."""
    stores: Stores = build(StoreKind.FILE, tmp_path)
    conv = stores.path / CONV
    log = (conv / "events.jsonl").read_bytes()
    (conv / "events.jsonl").write_bytes(log + b'{"schema_version":1,"conv')
    assert _recover(stores.path) == 27
    assert (conv / "events.jsonl").read_bytes() == log
    assert not [p for p in conv.iterdir() if is_quarantine(p.name)]


def test_a_save_sets_a_damaged_checkpoint_aside_instead_of_rotating_it_out(tmp_path: Path) -> None:
    """A save keeps two checkpoints and deletes older ones it rotates out -- if they verify (a
    copy of what the log and the newer ones hold); one that does not is evidence, moved aside."""
    stores: Stores = build(StoreKind.FILE, tmp_path)
    conv = stores.path / CONV
    older = conv / "checkpoint-000000000023.json"
    damaged = older.read_bytes().replace(b"pay req-1", b"pay req-9")
    assert damaged != older.read_bytes()
    older.write_bytes(damaged)
    store = FileStore(str(stores.path), fs=OsFileSystem(), fsync=True)

    async def save(*throughs: int) -> None:
        lease = await store.acquire_lease(CONV, "owner-q", ttl_s=60.0, now_s=1e9)
        state = (await store.load_checkpoints(CONV))[0].to_state()
        for through in throughs:
            checkpoint = make_checkpoint(state.model_copy(update={"last_sequence": through}), 0.0)
            await store.save_checkpoint(checkpoint, owner_id="owner-q", epoch=lease.epoch)

    trio.run(save, 28, 29)  # 28 rotates out the damaged 23; 29 the verified 27
    aside = conv / "quarantine-0001.checkpoint-000000000023.json"
    assert aside.read_bytes() == damaged
    names = sorted(p.name for p in conv.iterdir() if "checkpoint" in p.name)
    assert names == [
        "checkpoint-000000000028.json",
        "checkpoint-000000000029.json",
        aside.name,
    ]
