"""``python -m durable inspect``: the report, its checks, its exit status, and that it never
changes the store or prints a traceback, whatever it is given."""

from __future__ import annotations

import gc
import io
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from testkit import (
    CONV,
    CRITERION,
    REPO,
    CounterIds,
    EffectTool,
    Harness,
    ScriptedModel,
    Stores,
    ToolLoopModel,
    Workspace,
    answer,
    call,
    settled,
    wait_until,
)

from durable.__main__ import main
from durable.config import RuntimeConfig
from durable.events import LeaseAcquired
from durable.inspect import TEXT_LIMIT, run
from durable.model import ModelError
from durable.runtime import Runtime
from durable.state import new_state, reduce
from durable.store import make_checkpoint
from durable.tools import content_hash
from sim.world.stores import StoreKind

CONV_2 = "conv-2"
LONG_ANSWER = "The invoice was paid in full; " * 5


def build(
    kind: StoreKind, root: Path, *, reconciliation: bool = False, stores: Stores | None = None
) -> Stores:
    """A store written by the real runtime: ``conv-1`` has a completed run with a tool call and a
    long answer, then a run that failed (model error); with ``reconciliation``, ``conv-2`` has a
    run waiting for an operator after a crash mid-tool (manual policy). ``stores`` writes it
    through another factory of stores (another mode, another kind of store)."""
    stores = stores if stores is not None else Stores(kind, root)

    async def write() -> None:
        lookup = EffectTool("lookup", "replay_safe")
        model = ScriptedModel(
            [
                call("lookup", q="invoice"),
                answer(LONG_ANSWER),
                ModelError("bad key", retryable=False),
            ]
        )
        config = RuntimeConfig(checkpoint_every=4)
        harness = Harness(stores, model=model, tools=[lookup.spec()], config=config)
        async with harness.process("owner-a") as runtime:
            conversation = await runtime.conversation(CONV)
            for request_id in ("req-1", "req-2"):
                handle = await conversation.submit(f"pay {request_id}", request_id=request_id)
                await settled(conversation, handle.id)
        if not reconciliation:
            return
        pay = EffectTool("pay", "manual", crash_at="after_effect")
        second = Harness(stores, model=ToolLoopModel("pay"), tools=[pay.spec()], config=config)
        second.ids = CounterIds("b")
        pay.crasher = second.crasher

        async def body(runtime: Runtime) -> None:
            conversation = await runtime.conversation(CONV_2)
            await (await conversation.submit("pay the supplier")).wait()

        await second.crash_run("owner-b", body)
        async with second.process("owner-c") as runtime:
            conversation = await runtime.conversation(CONV_2)
            await wait_until(lambda: bool(conversation.pending_reconciliations()))

    trio.run(write, clock=trio.testing.MockClock(autojump_threshold=0))
    stores.close()
    return stores


def inspect(path: Path | str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(str(path), as_json="--json" in args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (a FileStore directory), by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def records_of(stores: Stores, conversation_id: str = CONV) -> list[Any]:
    async def read() -> list[Any]:
        return await stores.records(conversation_id)

    out = trio.run(read)
    stores.close()
    return out


@pytest.fixture(params=["file", "sqlite"])
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return StoreKind(request.param)


# -- healthy stores ------------------------------------------------------------------------------


def test_text_report_of_a_healthy_store(kind: StoreKind, tmp_path: Path) -> None:
    stores = build(kind, tmp_path, reconciliation=True)
    code, out, err = inspect(stores.path)
    assert (code, err) == (0, "")
    n = len(records_of(stores))
    assert f"conversation {CONV}: {n} records, last sequence {n}" in out
    assert "lease: owner owner-a, epoch 1, released" in out  # released at exit
    assert "(completed), inputs sub-" in out and "(model_error), inputs sub-" in out
    assert "request req-1: done: 'The invoice was paid in full; The invoice was paid in" in out
    assert "request req-2: unanswered: model_error" in out
    assert "[ok  ] sequences contiguous: 1.." in out
    assert f"[ok  ] checksums valid: {n} records verify" in out
    assert "[ok  ] log replays" in out
    assert "verifies, equals replay, used by recovery" in out
    assert "verifies, equals replay, not used by recovery" in out
    # conv-2 waits for an operator.
    assert f"conversation {CONV_2}:" in out
    assert "tool pay (manual), key conv-2:call-b" in out and "waiting for an operator" in out
    assert "pending reconciliations: 1" in out
    assert "FAIL" not in out
    assert out.rstrip().endswith("all checks pass")


def test_json_report_of_a_healthy_store(kind: StoreKind, tmp_path: Path) -> None:
    stores = build(kind, tmp_path, reconciliation=True)
    code, out, _ = inspect(stores.path, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["ok"] is True and doc["store"] == kind
    by_id = {c["id"]: c for c in doc["conversations"]}
    assert sorted(by_id) == [CONV, CONV_2]
    conv = by_id[CONV]
    n = len(records_of(stores))
    assert (conv["records"], conv["last_sequence"]) == (n, n)
    assert conv["lease"]["owner_id"] == "owner-a" and conv["lease"]["epoch"] == 1
    assert [r["stop_reason"] for r in conv["runs"]] == ["completed", "model_error"]
    done, failed = conv["submissions"]
    assert done["request_id"] == "req-1" and done["status"] == "done"
    assert len(done["answer"]) == TEXT_LIMIT and done["answer"].endswith("...")
    assert LONG_ANSWER.startswith(done["answer"][:-3])
    assert (failed["status"], failed["reason"]) == ("unanswered", "model_error")
    assert conv["open_intents"] == [] and conv["pending_reconciliations"] == []
    assert [c["used_by_recovery"] for c in conv["checkpoints"]] == [True, False]
    assert all(c["verifies"] and c["matches_replay"] for c in conv["checkpoints"])
    assert conv["checkpoints"][0]["through_sequence"] == n
    names = [c["name"] for c in conv["checks"]]
    assert names[:4] == ["sequences contiguous", "checksums valid", "log replays", "lease epoch"]
    assert all(c["ok"] for c in conv["checks"])
    conv_2 = by_id[CONV_2]
    (pending,) = conv_2["pending_reconciliations"]
    assert conv_2["open_intents"] == [pending]
    assert (pending["tool"], pending["policy"], pending["reconciliation"]) == (
        "pay",
        "manual",
        True,
    )
    assert pending["idempotency_key"] == f"{CONV_2}:{pending['call_id']}"
    assert conv_2["lease"]["epoch"] == 2 and conv_2["active_run"] is not None


def test_inspect_is_read_only_and_ignores_a_torn_tail(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    events = stores.path / CONV / "events.jsonl"
    tail = b'{"schema_version":1,"conversation_id":"conv-1","seq'
    with events.open("ab") as f:
        f.write(tail)
    before = snapshot(stores.path)
    code, out, _ = inspect(stores.path)
    assert code == 0
    assert f"torn tail ignored ({len(tail)} bytes)" in out
    code, out, _ = inspect(stores.path, "--json")
    assert code == 0 and json.loads(out)["conversations"][0]["torn_tail_bytes"] == len(tail)
    assert snapshot(stores.path) == before  # not repaired, no lease taken, nothing written


def test_inspect_of_sqlite_takes_no_lease_and_writes_nothing(tmp_path: Path) -> None:
    stores = build(StoreKind.SQLITE, tmp_path)

    def dump() -> list[str]:
        conn = sqlite3.connect(stores.path)
        try:
            return list(conn.iterdump())
        finally:
            conn.close()

    before = dump()
    assert inspect(stores.path)[0] == 0
    assert dump() == before


def test_inspect_of_sqlite_does_not_wait_for_a_live_writer(tmp_path: Path) -> None:
    """A runtime holding the write lock (mid-commit) does not stop, or get stopped by, inspect."""
    stores = build(StoreKind.SQLITE, tmp_path)
    writer = sqlite3.connect(stores.path, isolation_level=None, timeout=0)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE leases SET expires_at_s = 123.0")
        code, out, _ = inspect(stores.path)
        assert code == 0, out
        assert "released" in out  # the uncommitted write is not seen
        writer.execute("COMMIT")  # and inspect did not hold any lock the writer needs
    finally:
        writer.close()


def _files(directory: Path) -> dict[str, bytes]:
    """Every file directly in ``directory``, by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _killed_sqlite(tmp_path: Path, *, shm: bool, journal: bool) -> Path:
    """A SQLite store as a killed runtime leaves it: its last commit (the lease's expiry set to
    42) only in the write-ahead log, the log's index (``-shm``) or not (a store opened without
    shared memory), and perhaps a garbage ``-journal`` beside it. Made by copying the files of
    a live connection, which is what a kill leaves on disk."""
    (tmp_path / "src").mkdir()
    stores = build(StoreKind.SQLITE, tmp_path / "src")
    gc.collect()
    live = sqlite3.connect(stores.path, isolation_level=None)
    live.execute("PRAGMA journal_mode=WAL")
    live.execute("UPDATE leases SET expires_at_s = 42.0")
    killed = tmp_path / "killed"
    killed.mkdir()
    for name in ("store.db", "store.db-wal") + (("store.db-shm",) if shm else ()):
        (killed / name).write_bytes((stores.path.parent / name).read_bytes())
    live.close()
    if journal:
        (killed / "store.db-journal").write_bytes(b"garbage!" * 64)
    return killed / "store.db"


@pytest.mark.parametrize("shm", [True, False], ids=["with-shm", "without-shm"])
@pytest.mark.parametrize("journal", [False, True], ids=["", "garbage-journal"])
def test_inspect_of_a_killed_sqlite_store_reads_its_log_and_changes_no_byte(
    tmp_path: Path, shm: bool, journal: bool
) -> None:
    """The last commit is in the log: inspect reports it, and the directory is byte for byte
    what it was -- no ``-shm`` created or rewritten, no journal rolled back or removed -- and no
    private copy is left behind."""
    path = _killed_sqlite(tmp_path, shm=shm, journal=journal)
    before = _files(path.parent)
    copies = set(Path(tempfile.gettempdir()).glob("durable-inspect-*"))
    code, out, err = inspect(path)
    assert (code, err) == (0, ""), out
    assert "epoch 1, expires at 42.000 s" in out
    assert _files(path.parent) == before
    assert set(Path(tempfile.gettempdir()).glob("durable-inspect-*")) == copies


def test_inspect_of_a_closed_sqlite_store_creates_no_side_file(tmp_path: Path) -> None:
    """A store whose last connection closed is one file; ``mode=ro`` would have created ``-wal``
    and ``-shm`` beside it (what the damage battery found)."""
    stores = build(StoreKind.SQLITE, tmp_path)
    gc.collect()
    before = _files(tmp_path)
    assert list(before) == ["store.db"]
    assert inspect(stores.path)[0] == 0
    assert _files(tmp_path) == before


def test_inspect_claims_no_durability_mode(kind: StoreKind, tmp_path: Path) -> None:
    """Nothing on disk records the mode a runtime opens a store in: the report says so rather
    than print the mode of the object inspect happened to open it with."""
    stores = build(kind, tmp_path)
    out = inspect(stores.path)[1]
    assert "fsync=True:" not in out and "synchronous=FULL" not in out
    assert "not recorded" in out.splitlines()[0]


def test_a_directory_it_cannot_read_is_a_one_line_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation whose files this user cannot read would look absent ("no store here",
    exit 0). As root nothing is unreadable, so ``os.access`` says what another user's would."""
    stores = build(StoreKind.FILE, tmp_path)
    hidden = str(stores.path / CONV)
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == hidden else real_access(p, mode)
    )
    code, out, err = inspect(stores.path)
    assert (code, out) == (2, "")
    assert err == f"error: {hidden}: permission denied: nothing was checked\n"
    monkeypatch.setattr(os, "access", lambda p, mode: str(p) != str(stores.path))
    assert inspect(stores.path)[0] == 2


def test_a_log_that_is_a_directory_is_a_one_line_refusal(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    events = stores.path / CONV / "events.jsonl"
    events.unlink()
    events.mkdir()
    code, out, _ = inspect(stores.path)
    assert code == 1 and out.count("\n") == 1
    assert out.startswith(f"corrupt store: {events} is a directory, not a file of the store")


def test_a_damaged_sqlite_header_is_corrupt_not_a_usage_error(tmp_path: Path) -> None:
    """A file that holds the store's tables without SQLite's header is this store, damaged:
    exit 1; a file holding neither is still no store at all (exit 2)."""
    stores = build(StoreKind.SQLITE, tmp_path)
    gc.collect()
    data = stores.path.read_bytes()
    stores.path.write_bytes(b"\x00" * 16 + data[16:])
    code, out, _ = inspect(stores.path)
    assert code == 1 and out.startswith("corrupt store: ") and "header is damaged" in out
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x00" * 16 + data[16:100])
    assert inspect(other)[0] == 2


# -- failed checks ---------------------------------------------------------------------------------


def test_corrupted_middle_record_of_a_file_log(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    events = stores.path / CONV / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    lines[middle] = lines[middle].replace(b'"recorded_at_s":', b'"recorded_at_s":1', 1)
    events.write_bytes(b"".join(lines))
    before = snapshot(stores.path)
    for args in ((), ("--json",)):
        code, out, err = inspect(stores.path, *args)
        assert code == 1 and err == ""
        assert out.count("\n") == 1, out  # one line
        if args:
            doc = json.loads(out)
            assert doc["ok"] is False and doc["error"] == "corrupt"
            assert doc["message"].startswith("corrupt store: ")
        else:
            assert out.startswith("corrupt store: ") and f"line {middle + 1}" in out
    assert snapshot(stores.path) == before


def test_corrupted_middle_record_of_a_sqlite_log(tmp_path: Path) -> None:
    stores = build(StoreKind.SQLITE, tmp_path)
    conn = sqlite3.connect(stores.path)
    conn.execute(
        "UPDATE events SET record = replace(record, 'pay', 'PAY') "
        "WHERE conversation_id = ? AND sequence = 2",
        (CONV,),
    )
    conn.commit()
    conn.close()
    code, out, _ = inspect(stores.path)
    assert code == 1
    assert out.startswith("corrupt store: ") and "checksum mismatch" in out
    assert out.count("\n") == 1


def test_checkpoint_that_differs_from_the_replay_fails(kind: StoreKind, tmp_path: Path) -> None:
    """A checkpoint whose checksum verifies but whose state is not the log's (a writer bug):
    recovery would trust it, so inspect must not."""
    stores = build(kind, tmp_path)
    records = records_of(stores)

    async def plant() -> None:
        store = stores()
        lease = await store.current_lease(CONV)
        assert lease is not None
        state = reduce(new_state(CONV), records)
        first = next(iter(state.submissions.values()))
        first.answer = "a different answer"
        await store.save_checkpoint(
            make_checkpoint(state, 0.0), owner_id=lease.owner_id, epoch=lease.epoch
        )

    trio.run(plant)
    stores.close()
    code, out, _ = inspect(stores.path)
    assert code == 1
    n = len(records)
    assert f"[FAIL] checkpoint {n}: differs from replaying records 1..{n}" in out
    assert "conversation(s) fail a check" in out
    doc = json.loads(inspect(stores.path, "--json")[1])
    assert doc["ok"] is False
    (conv,) = doc["conversations"]
    assert conv["checkpoints"][0]["matches_replay"] is False
    assert conv["checkpoints"][0]["used_by_recovery"] is True  # which is why this is a failure


def test_checkpoint_with_a_bad_checksum_fails(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    newest = sorted((stores.path / CONV).glob("checkpoint-*.json"))[-1]
    body = json.loads(newest.read_text())
    body["state"]["submissions"][next(iter(body["state"]["submissions"]))]["content"] = "edited"
    newest.write_text(json.dumps(body))
    code, out, _ = inspect(stores.path, "--json")
    assert code == 1
    (conv,) = json.loads(out)["conversations"]
    newest_entry, older_entry = conv["checkpoints"]
    assert newest_entry["verifies"] is False and newest_entry["used_by_recovery"] is False
    assert older_entry["used_by_recovery"] is True  # recovery falls back to the older one
    failed = [c for c in conv["checks"] if not c["ok"]]
    assert [c["detail"] for c in failed] == ["checksum does not verify"]


def test_checkpoint_beyond_the_log_fails(tmp_path: Path) -> None:
    """The log lost its last batch, the checkpoint of it survived: acknowledged commits are
    gone (legitimate only after power loss in a non-durable mode, which inspect cannot tell),
    so the check fails and names the missing sequences."""
    stores = build(StoreKind.FILE, tmp_path)
    events = stores.path / CONV / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    batches = [json.loads(line)["batch"] for line in lines]
    keep = batches.index(batches[-1])
    events.write_bytes(b"".join(lines[:keep]))
    code, out, _ = inspect(stores.path)
    assert code == 1, out
    assert f"checkpoint {len(lines)}: beyond the log (last sequence {keep})" in out
    assert f"acknowledged commits {keep + 1}..{len(lines)} are lost or damaged" in out


def test_log_that_does_not_replay_fails(tmp_path: Path) -> None:
    """Records that verify but cannot follow each other (here: a second lease record at the same
    epoch, re-sealed so that its checksum is valid) fail the replay check."""
    stores = build(StoreKind.FILE, tmp_path)
    events = stores.path / CONV / "events.jsonl"
    records = records_of(stores)
    last = records[-1]
    bogus = last.model_copy(
        update={
            "sequence": last.sequence + 1,
            "batch": "batch-bogus",
            "last_in_batch": True,
            "event": LeaseAcquired(owner_id="owner-z", epoch=last.epoch, expires_at_s=0.0),
        }
    ).sealed()
    with events.open("ab") as f:
        f.write((bogus.to_line() + "\n").encode())
    code, out, _ = inspect(stores.path)
    assert code == 1
    assert "[FAIL] log replays: InvariantViolation: lease epoch 1 not above 1" in out


# -- bad input -------------------------------------------------------------------------------------


def test_nonexistent_path(tmp_path: Path) -> None:
    code, out, err = inspect(tmp_path / "nope")
    assert (code, out) == (2, "")
    assert err == f"error: {tmp_path / 'nope'}: no such file or directory\n"
    code, out, _ = inspect(tmp_path / "nope", "--json")
    assert code == 2 and json.loads(out)["error"] == "usage"


def test_garbage_and_empty_files_are_not_stores(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\xffnot a store at all\n" * 10)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for path in (garbage, empty):
        code, out, err = inspect(path)
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {path}: not a store") and err.count("\n") == 1


def test_sqlite_file_that_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    code, _, err = inspect(path)
    assert code == 2 and "not a durable store" in err
    assert path.read_bytes() == before  # no store tables were created in someone else's file


def test_damaged_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x13" * 2000)
    code, out, _ = inspect(path)
    assert code == 1
    assert out.startswith("corrupt store: ") and out.count("\n") == 1


def test_empty_directory_is_an_empty_store(tmp_path: Path) -> None:
    """Nothing to check is not a failure, but it is not reported as a store whose checks pass."""
    code, out, _ = inspect(tmp_path)
    assert code == 0
    assert "no conversations" in out
    assert out == (
        f"{tmp_path}: no store here: no conversations (no <conversation>/events.jsonl or "
        "<conversation>/lease.json), nothing checked\n"
    )
    doc = json.loads(inspect(tmp_path, "--json")[1])
    assert doc == {
        "conversations": [],
        "description": doc["description"],
        "ok": True,
        "path": str(tmp_path),
        "store": "file",
    }


def test_directory_of_other_files_says_no_store_here(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    (tmp_path / "sub").mkdir()
    code, out, err = inspect(tmp_path)
    assert (code, err) == (0, "")
    assert out.startswith(f"{tmp_path}: no store here: no conversations")
    assert "all checks pass" not in out and out.count("\n") == 1


def test_empty_sqlite_store_says_nothing_checked(tmp_path: Path) -> None:
    stores = Stores(StoreKind.SQLITE, tmp_path)

    async def create_tables() -> None:
        assert await stores().list_conversations() == []

    trio.run(create_tables)
    stores.close()
    code, out, _ = inspect(stores.path)
    assert code == 0
    assert out.endswith("\nno conversations: the store is empty, nothing checked\n")
    assert "all checks pass" not in out


def test_directory_holding_a_sqlite_store_names_the_file(tmp_path: Path) -> None:
    """The easy mistake: the directory a SQLite store lives in, instead of the store's file. It
    used to pass as an empty FileStore ("all checks pass"); it is a usage error that says which
    path to inspect, and that path is the store."""
    stores = build(StoreKind.SQLITE, tmp_path)
    database = stores.path
    # A connection the runtime dropped without closing checkpoints the log into the database
    # when the garbage collector finalises it: let that happen before the snapshot, not during
    # the inspections it must compare equal across (it used to, now and then).
    gc.collect()
    before = database.read_bytes()
    code, out, err = inspect(tmp_path)
    assert (code, out) == (2, "")
    assert err == (
        f"error: {tmp_path} holds a SQLite database ({database.name}) and no FileStore "
        f"conversations: inspect the database by its path: python -m durable inspect "
        f"{shlex.quote(str(database))}\n"
    )
    code, out, _ = inspect(tmp_path, "--json")
    assert code == 2 and json.loads(out)["error"] == "usage"
    assert database.read_bytes() == before
    assert inspect(database)[0] == 0  # the hint's command inspects the store


def test_sqlite_files_are_recognised_by_name_or_header(tmp_path: Path) -> None:
    """An empty ``*.sqlite`` (what ``sqlite3.connect`` leaves before the first write) counts by
    its name, a file with the SQLite header by its content; several are all named."""
    (tmp_path / "fresh.sqlite").write_bytes(b"")
    (tmp_path / "data").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    (tmp_path / "readme.txt").write_text("SQLite format 3 is described elsewhere")
    code, _, err = inspect(tmp_path)
    assert code == 2
    assert f"{tmp_path} holds SQLite databases (data, fresh.sqlite) and no FileStore" in err
    assert (
        f"inspect each database by its path, e.g.: python -m durable inspect {tmp_path}/data" in err
    )
    assert err.count("\n") == 1


def test_file_store_with_a_sqlite_file_beside_it_is_a_file_store(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    (stores.path / "stray.sqlite").write_bytes(b"")
    code, out, _ = inspect(stores.path)
    assert code == 0 and out.rstrip().endswith("all checks pass")


def test_python_dash_m_durable_on_a_directory_without_a_store(tmp_path: Path) -> None:
    """Through the real entry point: a missing path and a directory holding only a SQLite
    store exit 2 with one line and no traceback; an empty directory says there is no store."""
    build(StoreKind.SQLITE, tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    results = {}
    for path in (tmp_path / "missing", tmp_path, empty):
        results[path] = subprocess.run(
            [sys.executable, "-m", "durable", "inspect", str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    for path in (tmp_path / "missing", tmp_path):
        done = results[path]
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "no such file or directory" in results[tmp_path / "missing"].stderr
    assert "holds a SQLite database (store.db)" in results[tmp_path].stderr
    done = results[empty]
    assert (done.returncode, done.stderr) == (0, "")
    assert "no store here" in done.stdout and "all checks pass" not in done.stdout


def test_unparseable_lease_file(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    (stores.path / CONV / "lease.json").write_bytes(b"{not json")
    code, out, _ = inspect(stores.path)
    assert code == 1 and out.startswith("corrupt store: ") and out.count("\n") == 1


def test_command_line_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["inspect", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for words in ("without changing it", "checksums valid", "torn tail", "exit status"):
        assert words in " ".join(text.split())
    for argv in ([], ["inspect"], ["inspect", "a", "b"], ["frobnicate", "x"], ["inspect", "-x"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        # One line, as every other error of inspect (a usage block and a second line once)
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "usage:" not in err, err
        assert err.startswith("python -m durable") and "--help)" in err, err
    assert main(["inspect", str(tmp_path)]) == 0
    assert main(["inspect", str(tmp_path / "nope")]) == 2


def test_python_dash_m_durable(tmp_path: Path) -> None:
    """The real entry point, in a subprocess: a report, and no traceback for a bad path."""
    stores = build(StoreKind.SQLITE, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(
        [sys.executable, "-m", "durable", "inspect", str(stores.path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["conversations"][0]["id"] == CONV
    bad = subprocess.run(
        [sys.executable, "-m", "durable", "inspect", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stdout == ""


# -- agent state -----------------------------------------------------------------------------------


def build_agent_state(kind: StoreKind, root: Path) -> Stores:
    """A conversation with agent state (docs/architecture.md, 1.7): a plan revised once, two
    edits of ``app.py``, a passing validation at the final revision, a resumable cursor."""
    stores = Stores(kind, root)
    workspace = Workspace({"app.py": "port = 80\ntls = off\n"})
    steps = [
        call("edit", path="app.py", old="80", new="443").model_copy(
            update={"plan": ["edit", "check"], "cursor": "resp-1", "resumable": True}
        ),
        call("edit", path="app.py", old="off", new="on"),
        call("test", path="app.py", expect="port = 443"),
        answer("done").model_copy(update={"plan": ["edit", "check", "report"]}),
    ]
    config = RuntimeConfig(required_criteria=(CRITERION,))
    harness = Harness(stores, model=ScriptedModel(steps), tools=workspace.specs(), config=config)

    async def write() -> None:
        async with harness.process("owner-a") as runtime:
            conversation = await runtime.conversation(CONV)
            handle = await conversation.submit("fix app.py", request_id="req-1")
            await settled(conversation, handle.id)

    trio.run(write, clock=trio.testing.MockClock(autojump_threshold=0))
    stores.close()
    stores.workspace = workspace  # type: ignore[attr-defined]  # this test's own attribute
    return stores


def test_inspect_shows_agent_state(kind: StoreKind, tmp_path: Path) -> None:
    stores = build_agent_state(kind, tmp_path)
    final_hash = content_hash(stores.workspace.files["app.py"])  # type: ignore[attr-defined]  # ^
    code, out, err = inspect(stores.path)
    assert (code, err) == (0, "")
    assert "plan (2 revisions): edit; check; report" in out
    assert "mutation revision: 2" in out
    assert f"changed file app.py: sha256 {final_hash[:16]} (revision 2, call " in out
    assert "validation 'tests pass' (" in out and "passed at revision 2 (current)" in out
    assert "provider cursor: resp-1 (resumable)" in out
    code, text, _ = inspect(stores.path, "--json")
    (conv,) = json.loads(text)["conversations"]
    assert conv["plan"] == ["edit", "check", "report"] and conv["plan_revisions"] == 2
    assert conv["mutation_revision"] == 2
    (changed,) = conv["changed_files"]
    assert (changed["path"], changed["after_hash"], changed["revision"]) == (
        "app.py",
        final_hash,
        2,
    )
    (validation,) = conv["validations"]
    assert (validation["criterion"], validation["passed"], validation["current"]) == (
        CRITERION,
        True,
        True,
    )
    assert (conv["cursor"]["cursor"], conv["cursor"]["resumable"]) == ("resp-1", True)
    assert [r["stop_reason"] for r in conv["runs"]] == ["completed"]


def test_a_conversation_without_agent_state_prints_no_agent_lines(tmp_path: Path) -> None:
    stores = build(StoreKind.FILE, tmp_path)
    code, out, _ = inspect(stores.path)
    assert code == 0
    for line in ("plan (", "mutation revision", "changed file", "validation '", "cursor:"):
        assert line not in out
