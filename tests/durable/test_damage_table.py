"""The damage table (``durable.store.damage``), record by record, on real stores.

Every record damages a store written by the real runtime (``test_inspect.build``: conversation
``conv-1`` with 27 records in 13 batches, checkpoints through 23 and 27) in every mode it names
-- the file store with ``fsync=True`` and ``fsync=False``, SQLite with ``synchronous=FULL`` and
``NORMAL``, PostgreSQL (a throw-away cluster, tests/pgcluster.py) -- and then, as an operator and
a restarted process would:

- runs ``python -m durable inspect`` twice (file and SQLite stores): the table's exit status and
  phrase both times, and not a byte of the store changed;
- opens the conversation twice in a row (takes the lease, recovers): the table's response both
  times. A refusal names the damage and changes nothing -- every byte of the store is hashed
  before and after each attempt, the lease included, so the second attempt refuses exactly as
  the first did. A repair or a recovery that proceeds keeps what the table says, and the second
  open finds nothing more to repair (the quarantine files are the same);
- for a store that went on, runs ``inspect`` again: what the table says it reports afterwards.

The table of docs/stores.md is this registry's rendering, and nothing else
(``test_the_table_of_docs_stores_md_is_the_registry``). Besides the table: every SQLite refusal
names the database file, and a dropped table is refused with the database file and its log
unchanged byte for byte, frames left in the log included.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from test_inspect import build
from testkit import CONV, REPO, Harness, ScriptedModel, Stores, input_batch

from durable.codec import canonical_json, sha256_hex
from durable.inspect import run as inspect_run
from durable.ports import InlineBlocking
from durable.store import PostgresStore, SQLiteStore, Store
from durable.store.base import CorruptStore
from durable.store.damage import DAMAGE, Damage, Kept, Mode, Repair, Response, markdown_table
from durable.store.file import is_quarantine
from durable.store.logscan import scan_log
from sim.world.stores import StoreKind

ALL_RECORDS = 27
#: The modes the battery runs, and the table's mode each one is.
MODES: dict[str, Mode] = {
    "file-fsync": Mode.FILE_FSYNC,
    "file-nofsync": Mode.FILE_NOFSYNC,
    "sqlite-full": Mode.SQLITE,
    "sqlite-normal": Mode.SQLITE,
    "postgres": Mode.POSTGRES,
}


# -- stores in every mode --------------------------------------------------------------------------


class NormalStores(Stores):
    """SQLite stores with ``synchronous=NORMAL``."""

    def __call__(self, fs: Any = None) -> Store:
        store = SQLiteStore(str(self.path), blocking=InlineBlocking(), synchronous="NORMAL")
        self._opened.append(store)
        return store


class PgStores(Stores):
    """PostgreSQL stores on one schema of the session's server."""

    def __init__(self, root: Path, conninfo: str, namespace: str) -> None:
        super().__init__(StoreKind.SQLITE, root)
        self.kind = StoreKind.POSTGRES
        self.conninfo = conninfo
        self.namespace = namespace
        self._pg: list[PostgresStore] = []

    def __call__(self, fs: Any = None) -> Store:
        store = PostgresStore(self.conninfo, blocking=InlineBlocking(), namespace=self.namespace)
        self._pg.append(store)
        return store

    def close(self) -> None:
        for store in self._pg:
            store.abandon()
        self._pg.clear()


def _stores(mode: str, root: Path, request: pytest.FixtureRequest) -> Stores:
    if mode == "postgres":
        conninfo = request.getfixturevalue("pg_conninfo")
        return PgStores(root, conninfo, request.getfixturevalue("pg_namespace"))
    if mode == "sqlite-normal":
        return NormalStores(StoreKind.SQLITE, root)
    if mode == "sqlite-full":
        return Stores(StoreKind.SQLITE, root)
    return Stores(StoreKind.FILE, root, fsync=mode == "file-fsync")


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
    """Run ``statements`` on the store's tables (SQLite's file, or the PostgreSQL schema)."""
    if isinstance(stores, PgStores):
        import psycopg

        with psycopg.connect(stores.conninfo, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {stores.namespace}")
            for statement in statements:
                conn.execute(statement)
        return
    db = sqlite3.connect(stores.path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def _is_sql(stores: Stores) -> bool:
    return stores.kind != "file"


def _cp(stores: Stores, through: int) -> Path:
    return _conv(stores) / f"checkpoint-{through:012d}.json"


def torn_tail(stores: Stores) -> int:
    with (_conv(stores) / "events.jsonl").open("ab") as f:
        f.write(b'{"schema_version":1,"conversation_id":"conv-1","seq')
    return ALL_RECORDS


def damaged_last_commit(stores: Stores) -> int:
    """A letter flipped in the last batch (records 24..27); no checkpoint beyond record 23."""
    if _is_sql(stores):
        _sql(
            stores,
            "UPDATE events SET record = replace(record, 'settled', 'Settled') WHERE sequence = 26",
            "DELETE FROM checkpoints WHERE through_sequence = 27",
        )
        return 23
    _cp(stores, 27).unlink()
    lines = _lines(stores)
    lines[25] = _flip_letter(lines[25])
    _write_lines(stores, lines)
    return 23


def damaged_last_commit_under_checkpoint(stores: Stores) -> int:
    """The same damage, but the checkpoint through 27 survives: proof it was acknowledged."""
    if _is_sql(stores):
        _sql(
            stores,
            "UPDATE events SET record = replace(record, 'settled', 'Settled') WHERE sequence = 26",
        )
        return 23
    lines = _lines(stores)
    lines[25] = _flip_letter(lines[25])
    _write_lines(stores, lines)
    return 23


def log_cut_under_checkpoint(stores: Stores) -> int:
    """The log cut cleanly after record 23 (a lost extent); the checkpoint through 27 survives."""
    if _is_sql(stores):
        _sql(stores, "DELETE FROM events WHERE sequence > 23")
    else:
        _write_lines(stores, _lines(stores)[:23])
    return 23


def damaged_earlier_commit(stores: Stores) -> int:
    """A letter flipped in record 10 (the first of its commit), valid commits after it."""
    if _is_sql(stores):
        _sql(
            stores, "UPDATE events SET record = replace(record, 'tool', 'TOOL') WHERE sequence = 10"
        )
        return 9
    lines = _lines(stores)
    lines[9] = _flip_letter(lines[9])
    _write_lines(stores, lines)
    return 9


def damaged_checkpoint_commit(stores: Stores) -> int:
    """A letter flipped in record 23 -- a commit of its own, the one the checkpoint through 23
    ends at -- with the checkpoint through 27 gone, so the damaged commit is the newest
    checkpoint's own row and valid commits (24..27) follow it."""
    if _is_sql(stores):
        _sql(
            stores,
            "UPDATE events SET record = replace(record, 'model_requested', 'Model_requested') "
            "WHERE sequence = 23",
            "DELETE FROM checkpoints WHERE through_sequence = 27",
        )
        return 22
    _cp(stores, 27).unlink()
    lines = _lines(stores)
    lines[22] = _flip_letter(lines[22])
    _write_lines(stores, lines)
    return 22


def duplicated_line(stores: Stores) -> int:
    """Record 10's line written twice, one after the other (record 10 is a commit of its own:
    the first line is the commit, the second the damage)."""
    lines = _lines(stores)
    _write_lines(stores, [*lines[:10], lines[9], *lines[10:]])
    return 10


def crlf_line_ends(stores: Stores) -> int:
    path = _conv(stores) / "events.jsonl"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    return 0


def log_is_a_directory(stores: Stores) -> int:
    path = _conv(stores) / "events.jsonl"
    path.unlink()
    path.mkdir()
    return 0


def log_missing(stores: Stores) -> int:
    """The log is gone; the checkpoints (through 23 and 27) survive."""
    if _is_sql(stores):
        _sql(stores, "DELETE FROM events")
    else:
        (_conv(stores) / "events.jsonl").unlink()
    return 0


def log_and_checkpoints_missing(stores: Stores) -> int:
    """Nothing but the lease is left (SQLite: the whole database file is gone)."""
    if _is_sql(stores):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{stores.path}{suffix}").unlink(missing_ok=True)
        return 0
    for path in _conv(stores).iterdir():
        if path.name != "lease.json":
            path.unlink()
    return 0


def newest_checkpoint_missing(stores: Stores) -> int:
    if _is_sql(stores):
        _sql(stores, "DELETE FROM checkpoints WHERE through_sequence = 27")
    else:
        _cp(stores, 27).unlink()
    return ALL_RECORDS


def checkpoint_fails_checksum(stores: Stores) -> int:
    """The newest checkpoint still parses, but a value in it changed."""
    if _is_sql(stores):
        _sql(
            stores,
            "UPDATE checkpoints SET body = replace(body, 'pay req-1', 'pay req-9') "
            "WHERE through_sequence = 27",
        )
    else:
        path = _cp(stores, 27)
        path.write_bytes(path.read_bytes().replace(b"pay req-1", b"pay req-9"))
    return ALL_RECORDS


def checkpoint_unparseable(stores: Stores) -> int:
    """The newest checkpoint cut in half."""
    if _is_sql(stores):
        _sql(
            stores,
            "UPDATE checkpoints SET body = substr(body, 1, 100) WHERE through_sequence = 27",
        )
    else:
        path = _cp(stores, 27)
        path.write_bytes(path.read_bytes()[:100])
    return ALL_RECORDS


def checkpoint_misnamed(stores: Stores) -> int:
    """The checkpoint through 27 under the name (the key) of one through 999."""
    if _is_sql(stores):
        _sql(
            stores,
            "UPDATE checkpoints SET through_sequence = 999 WHERE through_sequence = 27",
        )
    else:
        _cp(stores, 27).rename(_cp(stores, 999))
    return ALL_RECORDS


def _sealed_lease(stores: Stores, lease: dict[str, Any]) -> None:
    """A lease file that passes its checksum, whatever it holds."""
    doc = {"checksum": sha256_hex(canonical_json(lease)), "lease": lease}
    (_conv(stores) / "lease.json").write_bytes((canonical_json(doc) + "\n").encode())


def lease_garbage(stores: Stores) -> int:
    """The lease's epoch changed (file: still parses, fails its checksum; SQLite: text)."""
    if _is_sql(stores):
        _sql(stores, "UPDATE leases SET epoch = 'one'")
    else:
        path = _conv(stores) / "lease.json"
        path.write_bytes(path.read_bytes().replace(b'"epoch":1', b'"epoch":3'))
    return ALL_RECORDS


def lease_out_of_range(stores: Stores) -> int:
    """A lease with no owner and epoch -7 (in the file store, under a valid checksum)."""
    if _is_sql(stores):
        _sql(stores, "UPDATE leases SET owner_id = '', epoch = -7")
    else:
        lease = {"conversation_id": CONV, "owner_id": "", "epoch": -7, "expires_at_s": -1.0}
        _sealed_lease(stores, lease)
    return ALL_RECORDS


def lease_went_back(stores: Stores) -> int:
    """A second process opens the conversation (epoch 2 is in the log), then the stored lease
    goes back to epoch 1, validly (file: a sealed lease; SQL: an update)."""
    _open(stores)
    if _is_sql(stores):
        _sql(stores, "UPDATE leases SET epoch = epoch - 1")
    else:
        lease = {"conversation_id": CONV, "owner_id": "owner-z", "epoch": 1, "expires_at_s": -1.0}
        _sealed_lease(stores, lease)
    return ALL_RECORDS + 1


def lease_missing(stores: Stores) -> int:
    if _is_sql(stores):
        _sql(stores, "DELETE FROM leases")
    else:
        (_conv(stores) / "lease.json").unlink()
    return ALL_RECORDS


def stray_temporary_files(stores: Stores) -> int:
    """Leftovers of interrupted atomic writes (SQLite: a garbage rollback journal, whose first
    byte is not zero: SQLite calls such a journal hot)."""
    if _is_sql(stores):
        Path(f"{stores.path}-journal").write_bytes(b"garbage!" * 64)
    else:
        (_conv(stores) / "checkpoint-000000000031.json.tmp").write_bytes(b'{"schema_ver')
        (_conv(stores) / "lease.json.tmp").write_bytes(b"")
    return ALL_RECORDS


def sqlite_header_damaged(stores: Stores) -> int:
    """The header's first 16 bytes ("SQLite format 3") zeroed."""
    gc.collect()  # no connection of the writer left open to write the header back
    with stores.path.open("r+b") as f:
        f.write(b"\x00" * 16)
    return ALL_RECORDS


def table_dropped(stores: Stores) -> int:
    _sql(stores, "DROP TABLE events")
    return 0


#: Each kind of damage of the registry, done to a store (returns how many records precede it).
DAMAGING: dict[str, Callable[[Stores], int]] = {
    "torn-tail": torn_tail,
    "damaged-last-commit": damaged_last_commit,
    "damaged-last-commit-under-checkpoint": damaged_last_commit_under_checkpoint,
    "log-cut-under-checkpoint": log_cut_under_checkpoint,
    "damaged-earlier-commit": damaged_earlier_commit,
    "damaged-checkpoint-commit": damaged_checkpoint_commit,
    "duplicated-line": duplicated_line,
    "crlf-line-ends": crlf_line_ends,
    "log-is-a-directory": log_is_a_directory,
    "log-missing": log_missing,
    "log-and-checkpoints-missing": log_and_checkpoints_missing,
    "newest-checkpoint-missing": newest_checkpoint_missing,
    "checkpoint-fails-checksum": checkpoint_fails_checksum,
    "checkpoint-unparseable": checkpoint_unparseable,
    "checkpoint-misnamed": checkpoint_misnamed,
    "lease-garbage": lease_garbage,
    "lease-out-of-range": lease_out_of_range,
    "lease-went-back": lease_went_back,
    "lease-missing": lease_missing,
    "stray-temporary-files": stray_temporary_files,
    "sqlite-header-damaged": sqlite_header_damaged,
    "table-dropped": table_dropped,
}


# -- observing a store ----------------------------------------------------------------------------


def _fingerprint(stores: Stores) -> dict[str, str]:
    """Every byte of the store: each file and directory under its root, or every row of the
    PostgreSQL schema. Of SQLite's side files, its log and any journal count; ``-shm`` (an
    index SQLite rebuilds from the log) and an empty log (what opening a WAL database creates)
    do not: they are a connection's working files, not data."""
    gc.collect()  # abandoned SQLite connections close: SQLite removes an empty log
    if isinstance(stores, PgStores):
        import psycopg

        with psycopg.connect(stores.conninfo, autocommit=True) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
                    (stores.namespace,),
                ).fetchall()
            ]  # which tables there are counts too: a refusal must not create a dropped one
            dump = {"tables": repr(tables)}
            for table in tables:
                query = f"SELECT * FROM {stores.namespace}.{table} ORDER BY 1, 2"
                dump[table] = repr(conn.execute(query).fetchall())
            return dump
    out: dict[str, str] = {}
    for directory, dirs, files in os.walk(stores.root):
        for name in dirs:
            out[os.path.relpath(os.path.join(directory, name), stores.root) + "/"] = "dir"
        for name in files:
            path = os.path.join(directory, name)
            data = Path(path).read_bytes()
            if stores.kind != "file" and (
                name.endswith("-shm") or (name.endswith("-wal") and not data)
            ):
                continue
            out[os.path.relpath(path, stores.root)] = hashlib.sha256(data).hexdigest()
    return out


def _quarantined(stores: Stores) -> list[str]:
    if stores.kind != "file" or not _conv(stores).is_dir():
        return []
    return sorted(name for name in os.listdir(_conv(stores)) if is_quarantine(name))


def _open(stores: Stores) -> int | CorruptStore:
    """Recover ``conv-1`` as a restarted process would: how many records it recovered (the
    record of its own lease not counted), or the refusal."""

    async def main() -> int | CorruptStore:
        harness = Harness(stores, model=ScriptedModel([]))
        refusals: list[CorruptStore] = []
        try:
            async with harness.process("owner-z") as runtime:
                conversation = await runtime.conversation(CONV)
                return conversation.state.last_sequence - 1
        except* CorruptStore as group:
            refusals += [e for e in group.exceptions if isinstance(e, CorruptStore)]
        assert len(refusals) == 1, refusals
        return refusals[0]

    try:
        return trio.run(main)
    finally:
        stores.close()


def _inspect(stores: Stores) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = inspect_run(str(stores.path), as_json=False, out=out, err=err)
    return code, out.getvalue() + err.getvalue()


# -- the battery ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    damage: Damage
    mode: str

    @property
    def table_mode(self) -> Mode:
        return MODES[self.mode]


def _cases() -> Iterator[Any]:
    for damage in DAMAGE:
        for mode, table_mode in MODES.items():
            outcome = damage.outcome(table_mode)
            if outcome is None or outcome.response is Response.CANNOT_ARISE:
                continue
            yield pytest.param(Case(damage, mode), id=f"{damage.kind}[{mode}]")


def _check_inspect(stores: Stores, expected: tuple[int, str], when: str) -> None:
    """``inspect`` twice: the expected report both times, and no byte of the store changed."""
    before = _fingerprint(stores)
    first = _inspect(stores)
    assert (first[0], expected[1] in first[1]) == (expected[0], True), f"{when}: {first[1]}"
    assert _inspect(stores) == first, f"{when}: a second inspect said something else"
    assert _fingerprint(stores) == before, f"{when}: inspect changed the store"


@pytest.mark.parametrize("case", list(_cases()))
def test_damage_row(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    outcome = case.damage.outcome(case.table_mode)
    assert outcome is not None
    stores = _stores(case.mode, tmp_path, request)
    build(
        StoreKind.FILE if stores.kind == StoreKind.FILE else StoreKind.SQLITE,
        tmp_path,
        stores=stores,
    )
    before_damage = DAMAGING[case.damage.kind](stores)
    family = "file" if stores.kind == "file" else "sqlite"
    said = case.damage.inspect.get(family)
    if stores.kind != "postgres" and said is not None:
        _check_inspect(stores, (said.exit, said.says), "before recovery")
    found = _fingerprint(stores)
    first = _open(stores)
    if outcome.response is Response.REFUSE:
        assert isinstance(first, CorruptStore), f"recovered {first} records"
        assert outcome.says in str(first), str(first)
        assert _fingerprint(stores) == found, "a refusal changed the store"
        second = _open(stores)
        assert isinstance(second, CorruptStore) and str(second) == str(first), second
        assert _fingerprint(stores) == found, "the second refusal changed the store"
        return
    assert not isinstance(first, CorruptStore), first
    expected = {Kept.ALL: ALL_RECORDS, Kept.BEFORE_DAMAGE: before_damage, Kept.NOTHING: 0}
    assert outcome.kept is not None and first == expected[outcome.kept], first
    _check_repairs(stores, outcome.repairs, found)
    quarantined = _quarantined(stores)
    assert _open(stores) == first + 1, "the second open lost or found more than the first"
    assert _quarantined(stores) == quarantined, "the second open quarantined something again"
    if stores.kind != "postgres" and outcome.after is not None:
        _check_inspect(stores, (outcome.after.exit, outcome.after.says), "after recovery")


def _check_repairs(stores: Stores, repairs: tuple[Repair, ...], found: dict[str, str]) -> None:
    """What the first open did is what the table's repairs say, and nothing else: a quarantine
    file of the log exactly when it quarantines, checkpoints set aside exactly when it sets
    them aside, and the log ending cleanly after a truncation."""
    quarantined = _quarantined(stores)
    log = [name for name in quarantined if ".events-" in name]
    checkpoints = [name for name in quarantined if ".checkpoint-" in name]
    assert bool(log) == (Repair.QUARANTINE in repairs), quarantined
    assert bool(checkpoints) == (Repair.SET_ASIDE in repairs), quarantined
    if Repair.TRUNCATE in repairs or Repair.QUARANTINE in repairs:
        events = _conv(stores) / "events.jsonl"
        assert scan_log(events.read_bytes(), CONV).anomaly is None
    if not repairs and stores.kind == "file":
        # Proceeding changes nothing it found but the lease and the log it appends to.
        now = _fingerprint(stores)
        written = ("lease.json", "lease.json.tmp", "events.jsonl")  # the lease's own tmp is reused
        kept = {k: v for k, v in found.items() if not k.endswith(written)}
        assert {k: now.get(k) for k in kept} == kept


def test_every_record_has_its_damage_and_every_damage_its_record() -> None:
    assert sorted(DAMAGING) == sorted(d.kind for d in DAMAGE)
    assert len({d.kind for d in DAMAGE}) == len(DAMAGE)


def test_the_table_of_docs_stores_md_is_the_registry() -> None:
    """docs/stores.md, "What each store mode does with damaged storage", holds exactly the
    registry's rendering: a row without its record, a record without its row, or an edited cell
    fails."""
    text = (REPO / "docs" / "stores.md").read_text(encoding="utf-8")
    section = text.split("## What each store mode does with damaged storage\n", 1)[1]
    section = section.split("\n## ", 1)[0].split("\n### ", 1)[0]
    lines = section.split("\n")
    rendered = markdown_table()
    start = lines.index(rendered.split("\n", 1)[0])
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    assert "\n".join(lines[start:end]) + "\n" == rendered, (
        "docs/stores.md: paste durable.store.damage.markdown_table()"
    )


def test_a_refusal_names_the_lost_sequences_exactly(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The log cut at 23 under a checkpoint through 27: every store names 24..27 as lost (not
    the first sequence after the one recovery asked for)."""
    for mode in ("file-fsync", "sqlite-full"):
        stores = _stores(mode, tmp_path / mode, request)
        (tmp_path / mode).mkdir()
        build(
            StoreKind.FILE if stores.kind == StoreKind.FILE else StoreKind.SQLITE,
            tmp_path / mode,
            stores=stores,
        )
        log_cut_under_checkpoint(stores)
        refusal = _open(stores)
        assert isinstance(refusal, CorruptStore) and "sequences 24..27" in str(refusal), refusal


def test_refusals_are_one_line_from_inspect(tmp_path: Path) -> None:
    """``inspect`` on a refusing store prints one line naming the damaged file."""
    stores = build(StoreKind.FILE, tmp_path)
    damaged_earlier_commit(stores)
    code, out = _inspect(stores)
    assert code == 1 and out.count("\n") == 1 and "events.jsonl" in out


def _sqlite_refusals() -> Iterator[Any]:
    for damage in DAMAGE:
        outcome = damage.outcome(Mode.SQLITE)
        if outcome is not None and outcome.response is Response.REFUSE:
            yield pytest.param(damage, id=damage.kind)


@pytest.mark.parametrize("damage", list(_sqlite_refusals()))
def test_every_sqlite_refusal_names_the_database_file(
    damage: Damage, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An operator with several stores must know which one to look at: every refusal of the
    table's SQLite rows names the database file (the lease rows once named only the row)."""
    stores = _stores("sqlite-full", tmp_path, request)
    build(StoreKind.SQLITE, tmp_path, stores=stores)
    DAMAGING[damage.kind](stores)
    refusal = _open(stores)
    assert isinstance(refusal, CorruptStore) and str(stores.path) in str(refusal), refusal


def _drop_keeping_the_log(path: Path, table: str) -> None:
    """Drop ``table`` through a connection that leaves its log in place on close (no checkpoint), so
    the database file and its ``-wal`` both hold bytes a write would change."""
    import apsw

    conn = apsw.Connection(str(path))
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    conn.execute(f"DROP TABLE {table}")
    conn.close()


def _db_bytes(path: Path) -> tuple[bytes, bytes]:
    """The database file and its log (none: empty), after every abandoned connection closed."""
    gc.collect()
    wal = Path(f"{path}-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else b""


@pytest.mark.parametrize("table", ["events", "checkpoints", "leases"])
def test_a_dropped_table_is_refused_without_a_write(table: str, tmp_path: Path) -> None:
    """A SQLite store whose ``table`` was dropped: opening it refuses with ``CorruptStore``
    naming the database and the table, twice the same way, and writes nothing -- the database
    file and its log hold the same bytes before and after (the old behaviour: the store created
    an empty table, then refused -- for the events table, as commits lost under a checkpoint)."""
    stores = build(StoreKind.SQLITE, tmp_path)
    gc.collect()
    _drop_keeping_the_log(stores.path, table)
    found = _db_bytes(stores.path)
    assert found[1], "the drop is still in the log"
    first = _open(stores)
    assert isinstance(first, CorruptStore), first
    assert str(stores.path) in str(first) and table in str(first), first
    assert _db_bytes(stores.path) == found, "the refusal wrote to the database or its log"
    second = _open(stores)
    assert isinstance(second, CorruptStore) and str(second) == str(first), second
    assert _db_bytes(stores.path) == found


def _log_transactions(log: bytes) -> list[int]:
    """Where each transaction of a write-ahead log starts (its frames end at a commit frame,
    whose header's second word is not zero: sqlite.org/fileformat2.html, "WAL File Format")."""
    page = int.from_bytes(log[8:12], "big")
    starts, start, offset = [], 32, 32
    while offset + 24 + page <= len(log):
        commit = int.from_bytes(log[offset + 4 : offset + 8], "big")
        offset += 24 + page
        if commit:
            starts.append(start)
            start = offset
    return starts


@pytest.mark.parametrize(("frame", "kept"), [("last", [1, 2]), ("earlier", [1])])
def test_sqlite_reads_a_damaged_log_frame_as_the_end_of_its_log(
    frame: str, kept: list[int], tmp_path: Path
) -> None:
    """What the simulator's storage faults on SQLite's write-ahead log rest on
    (docs/crash-model.md, "SQLite under storage faults"), on real files: SQLite's recovery
    stops at the first frame that fails its checksum and drops its transaction with every later
    one, without an error. A byte of the last transaction's frames damaged loses that commit,
    as a torn write would (the faults the sweep makes); one of an earlier transaction's loses
    every later commit too -- damage no record of this table describes, and no single copy's
    reader that trusts SQLite can see (not made: docs/crash-model.md, "Not modelled")."""
    path = tmp_path / "store.sqlite"

    def store() -> SQLiteStore:  # a connection per transaction, closed without a checkpoint
        return SQLiteStore(str(path), blocking=InlineBlocking(), shared_memory=False)

    async def write() -> None:
        writer = store()
        lease = await writer.acquire_lease(CONV, "w", ttl_s=9.0, now_s=0.0)
        for n in (1, 2, 3):
            records = input_batch(n, 1, lease=lease, batch=f"b{n}")
            await writer.append(CONV, records, expected_sequence=n, owner_id="w", epoch=1)

    trio.run(write)
    log = Path(f"{path}-wal")
    data = bytearray(log.read_bytes())
    starts = _log_transactions(bytes(data))
    assert len(starts) == 5  # the schema, the lease, three commits
    data[starts[-1 if frame == "last" else -2] + 24 + 100] ^= 1
    log.write_bytes(bytes(data))

    async def read() -> list[int]:
        return [r.sequence for r in await store().read_records(CONV, 0, repair=True)]

    assert trio.run(read) == kept
