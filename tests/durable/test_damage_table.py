"""The damage table of docs/stores.md, row by row: what each store mode does with each kind of
damage.

Every row damages a store written by the real runtime (``test_inspect.build``: conversation
``conv-1`` with 27 records in 13 batches, checkpoints through 23 and 27), then

- opens it as a restarted process would (take the lease, recover the conversation), and checks
  the outcome: it recovers a given number of records, or it refuses with ``CorruptStore`` naming
  the damage -- and then every record and checkpoint is still there, byte for byte;
- runs ``python -m durable inspect`` (read-only) and checks its exit status and the line that
  says what it found.

The three modes are the file store with ``fsync=True`` and ``fsync=False`` (same files, same
damage) and the SQLite store. A row that cannot arise in a mode says why (``NA``).
"""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from test_inspect import build
from testkit import CONV, Harness, ScriptedModel, Stores

from durable.inspect import run as inspect_run
from durable.store.base import CorruptStore

FILE_T, FILE_F, SQLITE = "file-fsync", "file-nofsync", "sqlite"
ALL_RECORDS = 27
NA = "n/a"


@dataclass(frozen=True)
class Expect:
    """``records``: recovery succeeds with that many records; else ``refuses`` names the
    damage (a phrase of the ``CorruptStore`` message). ``inspect``: (exit status, phrase)."""

    records: int | None = None
    refuses: str = ""
    inspect: tuple[int, str] = (0, "all checks pass")


# -- damage ---------------------------------------------------------------------------------------


def _conv(stores: Stores) -> Path:
    return stores.path / CONV


def _lines(stores: Stores) -> list[bytes]:
    return (_conv(stores) / "events.jsonl").read_bytes().splitlines(keepends=True)


def _write_lines(stores: Stores, lines: list[bytes]) -> None:
    (_conv(stores) / "events.jsonl").write_bytes(b"".join(lines))


def _flip_letter(line: bytes) -> bytes:
    """Change one letter inside a string value (still JSON; only the checksum tells)."""
    at = line.index(b'"type":"') + len(b'"type":"')
    return line[:at] + bytes([line[at] ^ 0x20]) + line[at + 1 :]


def _sql(stores: Stores, *statements: str) -> None:
    conn = sqlite3.connect(stores.path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def torn_tail(stores: Stores) -> None:
    with (_conv(stores) / "events.jsonl").open("ab") as f:
        f.write(b'{"schema_version":1,"conversation_id":"conv-1","seq')


def last_commit_damaged(stores: Stores) -> None:
    """A letter flipped in the last batch (records 24..27); no checkpoint beyond record 23."""
    if stores.kind == "sqlite":
        _sql(
            stores,
            "UPDATE events SET record = replace(record, 'settled', 'Settled') WHERE sequence = 26",
            "DELETE FROM checkpoints WHERE through_sequence = 27",
        )
        return
    (_conv(stores) / "checkpoint-000000000027.json").unlink()
    lines = _lines(stores)
    lines[25] = _flip_letter(lines[25])
    _write_lines(stores, lines)


def last_commit_damaged_under_checkpoint(stores: Stores) -> None:
    """The same damage, but the checkpoint through 27 survives: proof it was acknowledged."""
    if stores.kind == "sqlite":
        _sql(
            stores,
            "UPDATE events SET record = replace(record, 'settled', 'Settled') WHERE sequence = 26",
        )
        return
    lines = _lines(stores)
    lines[25] = _flip_letter(lines[25])
    _write_lines(stores, lines)


def log_cut_under_checkpoint(stores: Stores) -> None:
    """The log cut cleanly after record 23 (a lost extent); the checkpoint through 27 survives."""
    if stores.kind == "sqlite":
        _sql(stores, "DELETE FROM events WHERE sequence > 23")
        return
    _write_lines(stores, _lines(stores)[:23])


def earlier_commit_damaged(stores: Stores) -> None:
    """A letter flipped in record 10, with valid commits after it."""
    if stores.kind == "sqlite":
        _sql(
            stores, "UPDATE events SET record = replace(record, 'tool', 'TOOL') WHERE sequence = 10"
        )
        return
    lines = _lines(stores)
    lines[9] = _flip_letter(lines[9])
    _write_lines(stores, lines)


def log_missing(stores: Stores) -> None:
    """The log is gone; the checkpoints (through 23 and 27) survive."""
    if stores.kind == "sqlite":
        _sql(stores, "DELETE FROM events")
        return
    (_conv(stores) / "events.jsonl").unlink()


def log_and_checkpoints_missing(stores: Stores) -> None:
    """Nothing but the lease is left (SQLite: the whole database file is gone)."""
    if stores.kind == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{stores.path}{suffix}").unlink(missing_ok=True)
        return
    for path in _conv(stores).iterdir():
        if path.name != "lease.json":
            path.unlink()


def newest_checkpoint_missing(stores: Stores) -> None:
    if stores.kind == "sqlite":
        _sql(stores, "DELETE FROM checkpoints WHERE through_sequence = 27")
        return
    (_conv(stores) / "checkpoint-000000000027.json").unlink()


def checkpoint_fails_checksum(stores: Stores) -> None:
    """The newest checkpoint still parses, but a value in it changed."""
    if stores.kind == "sqlite":
        _sql(
            stores,
            "UPDATE checkpoints SET body = replace(body, 'pay req-1', 'pay req-9') "
            "WHERE through_sequence = 27",
        )
        return
    path = _conv(stores) / "checkpoint-000000000027.json"
    path.write_bytes(path.read_bytes().replace(b"pay req-1", b"pay req-9"))


def checkpoint_unparseable(stores: Stores) -> None:
    """The newest checkpoint cut in half."""
    if stores.kind == "sqlite":
        _sql(
            stores,
            "UPDATE checkpoints SET body = substr(body, 1, 100) WHERE through_sequence = 27",
        )
        return
    path = _conv(stores) / "checkpoint-000000000027.json"
    path.write_bytes(path.read_bytes()[:100])


def lease_garbage(stores: Stores) -> None:
    """The lease's epoch changed by one bit (still parses: only a checksum tells)."""
    if stores.kind == "sqlite":
        _sql(stores, "UPDATE leases SET epoch = 'one'")
        return
    path = _conv(stores) / "lease.json"
    path.write_bytes(path.read_bytes().replace(b'"epoch":1', b'"epoch":3'))


def lease_missing(stores: Stores) -> None:
    if stores.kind == "sqlite":
        _sql(stores, "DELETE FROM leases")
        return
    (_conv(stores) / "lease.json").unlink()


def stray_temporary_files(stores: Stores) -> None:
    """Leftovers of interrupted atomic writes (SQLite: a garbage rollback journal)."""
    if stores.kind == "sqlite":
        Path(f"{stores.path}-journal").write_bytes(b"\x00garbage" * 64)
        return
    (_conv(stores) / "checkpoint-000000000031.json.tmp").write_bytes(b'{"schema_ver')
    (_conv(stores) / "lease.json.tmp").write_bytes(b"")


# -- the table (keep in step with docs/stores.md's) -----------------------------------------------

CHECKPOINT_BEYOND = "proves commits through sequence 27"
ROWS: list[tuple[str, Callable[[Stores], None], dict[str, Expect | str]]] = [
    (
        "torn tail",
        torn_tail,
        {
            FILE_T: Expect(records=ALL_RECORDS, inspect=(0, "torn tail ignored")),
            FILE_F: Expect(records=ALL_RECORDS, inspect=(0, "torn tail ignored")),
            SQLITE: NA + ": a transaction commits whole",
        },
    ),
    (
        "damaged last commit",
        last_commit_damaged,
        {
            # A single copy cannot tell damage to its last write from a torn write.
            FILE_T: Expect(records=23, inspect=(0, "torn tail ignored")),
            FILE_F: Expect(records=23, inspect=(0, "torn tail ignored")),
            SQLITE: Expect(refuses="events row (conv-1, 26)", inspect=(1, "corrupt store")),
        },
    ),
    (
        "damaged last commit, checkpoint beyond it",
        last_commit_damaged_under_checkpoint,
        {
            FILE_T: Expect(refuses=CHECKPOINT_BEYOND, inspect=(1, "beyond the log")),
            FILE_F: Expect(records=23, inspect=(1, "beyond the log")),
            # Recovery starts at the checkpoint (a verified copy of records 1..27) and does not
            # read the rows under it; inspect reads them all.
            SQLITE: Expect(records=ALL_RECORDS, inspect=(1, "corrupt store")),
        },
    ),
    (
        "log cut at a commit, checkpoint beyond it",
        log_cut_under_checkpoint,
        {
            FILE_T: Expect(refuses=CHECKPOINT_BEYOND, inspect=(1, "beyond the log")),
            FILE_F: Expect(records=23, inspect=(1, "beyond the log")),
            SQLITE: Expect(refuses="commits through 27", inspect=(1, "beyond the log")),
        },
    ),
    (
        "damaged earlier commit",
        earlier_commit_damaged,
        {
            FILE_T: Expect(refuses="holds a valid later record", inspect=(1, "corrupt store")),
            # Without fsync a power loss may tear any suffix: damage reads as one (inspect
            # cannot know the mode, and reports it).
            FILE_F: Expect(records=9, inspect=(1, "corrupt store")),
            # Recovery starts at the checkpoint through 27 (see above); inspect reads every row.
            SQLITE: Expect(records=ALL_RECORDS, inspect=(1, "corrupt store")),
        },
    ),
    (
        "missing log, checkpoints left",
        log_missing,
        {
            FILE_T: Expect(refuses="is missing, but", inspect=(1, "beyond the log")),
            FILE_F: Expect(records=0, inspect=(1, "beyond the log")),
            SQLITE: Expect(refuses="commits through 27", inspect=(1, "beyond the log")),
        },
    ),
    (
        "missing log and checkpoints",
        log_and_checkpoints_missing,
        {
            # A lease without commits is a legitimate state (acquired, killed before the first
            # commit): nothing is left to tell. SQLite: the whole database is gone.
            FILE_T: Expect(records=0, inspect=(0, "all checks pass")),
            FILE_F: Expect(records=0, inspect=(0, "all checks pass")),
            SQLITE: Expect(records=0, inspect=(2, "no such file")),
        },
    ),
    (
        "missing newest checkpoint",
        newest_checkpoint_missing,
        {
            FILE_T: Expect(records=ALL_RECORDS),
            FILE_F: Expect(records=ALL_RECORDS),
            SQLITE: Expect(records=ALL_RECORDS),
        },
    ),
    (
        "checkpoint fails its checksum",
        checkpoint_fails_checksum,
        {
            FILE_T: Expect(records=ALL_RECORDS, inspect=(1, "checksum does not verify")),
            FILE_F: Expect(records=ALL_RECORDS, inspect=(1, "checksum does not verify")),
            SQLITE: Expect(records=ALL_RECORDS, inspect=(1, "checksum does not verify")),
        },
    ),
    (
        "checkpoint does not parse",
        checkpoint_unparseable,
        {
            FILE_T: Expect(refuses="checkpoint does not parse", inspect=(1, "corrupt store")),
            # Power loss without fsync may leave a renamed checkpoint torn: skipped. Inspect
            # cannot know the mode: it reports what fsync=True would refuse.
            FILE_F: Expect(records=ALL_RECORDS, inspect=(1, "corrupt store")),
            SQLITE: Expect(refuses="checkpoints row", inspect=(1, "corrupt store")),
        },
    ),
    (
        "garbage lease",
        lease_garbage,
        {
            FILE_T: Expect(refuses="lease file fails its checksum", inspect=(1, "corrupt store")),
            FILE_F: Expect(refuses="lease file fails its checksum", inspect=(1, "corrupt store")),
            SQLITE: Expect(refuses="not a lease", inspect=(1, "corrupt store")),
        },
    ),
    (
        "missing lease, log present",
        lease_missing,
        {
            FILE_T: Expect(refuses="lease.json is missing", inspect=(1, "lease epoch")),
            FILE_F: Expect(refuses="lease.json is missing", inspect=(1, "lease epoch")),
            SQLITE: Expect(refuses="leases row (conv-1) is missing", inspect=(1, "lease epoch")),
        },
    ),
    (
        "stray temporary files",
        stray_temporary_files,
        {
            FILE_T: Expect(records=ALL_RECORDS),
            FILE_F: Expect(records=ALL_RECORDS),
            SQLITE: Expect(records=ALL_RECORDS),
        },
    ),
]


# -- the checks -----------------------------------------------------------------------------------


def _evidence(stores: Stores) -> dict[str, bytes | list[tuple[object, ...]]]:
    """What a refusing recovery must leave alone: the log and the checkpoints (the lease may be
    taken: it is not history)."""
    if stores.kind == "sqlite":
        if not stores.path.exists():
            return {}
        conn = sqlite3.connect(stores.path)
        rows = {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("events", "checkpoints")
        }
        conn.close()
        return rows  # type: ignore[return-value]
    return {
        p.name: p.read_bytes()
        for p in sorted(_conv(stores).iterdir())
        if not p.name.startswith("lease.json")
    }


def _open(stores: Stores) -> int | CorruptStore:
    """Recover ``conv-1`` as a restarted process would: how many of the old records it kept,
    or the refusal."""

    async def main() -> int | CorruptStore:
        harness = Harness(stores, model=ScriptedModel([]))
        refusals: list[CorruptStore] = []
        try:
            async with harness.process("owner-z") as runtime:
                conversation = await runtime.conversation(CONV)
                # The recovered history, without the lease record this process just added.
                return conversation.state.last_sequence - 1
        except* CorruptStore as group:
            refusals += [e for e in group.exceptions if isinstance(e, CorruptStore)]
        assert len(refusals) == 1, refusals
        return refusals[0]

    try:
        return trio.run(main)
    finally:
        stores.close()


def _inspect(path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = inspect_run(str(path), as_json=False, out=out, err=err)
    return code, out.getvalue() + err.getvalue()


CASES = [
    pytest.param(name, damage, mode, expect, id=f"{name.replace(' ', '-')}[{mode}]")
    for name, damage, by_mode in ROWS
    for mode, expect in by_mode.items()
]


@pytest.mark.parametrize(("name", "damage", "mode", "expect"), CASES)
def test_damage_row(
    name: str,
    damage: Callable[[Stores], None],
    mode: str,
    expect: Expect | str,
    tmp_path: Path,
) -> None:
    if isinstance(expect, str):
        assert expect.startswith(NA)
        pytest.skip(expect)
    kind = "sqlite" if mode == SQLITE else "file"
    stores = build(kind, tmp_path)  # type: ignore[arg-type]
    damage(stores)
    code, out = _inspect(stores.path)
    assert (code, expect.inspect[1] in out) == (expect.inspect[0], True), out
    stores = Stores(kind, tmp_path, fsync=mode != FILE_F)  # type: ignore[arg-type]
    before = _evidence(stores)
    outcome = _open(stores)
    if expect.records is not None:
        assert outcome == expect.records, f"{name}: {outcome}"
        return
    assert isinstance(outcome, CorruptStore), f"{name}: recovered {outcome} records"
    assert expect.refuses in str(outcome), str(outcome)
    assert _evidence(stores) == before, "a refusing recovery changed the log or checkpoints"


def test_the_table_covers_every_row_in_every_mode() -> None:
    assert len(ROWS) == 13
    for _, _, by_mode in ROWS:
        assert set(by_mode) == {FILE_T, FILE_F, SQLITE}


def test_refusals_are_one_line_from_inspect(tmp_path: Path) -> None:
    """``inspect`` on a refusing store prints one line naming the damaged file."""
    stores = build("file", tmp_path)
    earlier_commit_damaged(stores)
    code, out = _inspect(stores.path)
    assert code == 1 and out.count("\n") == 1 and "events.jsonl" in out
