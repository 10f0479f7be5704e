"""``python -m durable inspect PATH``: a read-only health report of a store.

PATH is a ``FileStore`` directory or a ``SQLiteStore`` file (recognised by the SQLite header).
A directory without a single conversation is reported as "no store here", never as a store whose
checks pass; if it holds a SQLite database (a SQLite store is one file, easily confused with the
directory it lives in), that is a usage error naming the file to inspect instead.
For every conversation the report gives the log (records, last sequence), the lease, the runs,
the submissions, the open intents and pending reconciliations, the compensations of abandoned
runs (docs/runtime.md, "Compensation": each planned undo and whether its intent and result are
committed), and these checks:

- the log's sequences are contiguous from 1 and every record's checksum verifies (the store's own
  read already refuses damaged *committed* data; a torn tail, which is what a crash leaves, is
  reported as ignored, never as a failure);
- the log replays: ``reduce`` accepts every record (no ``InvariantViolation``);
- the log's epoch is not above the stored lease's epoch;
- each stored checkpoint verifies, belongs to the conversation, and equals
  ``reduce(new_state(conversation), records[:through_sequence])``; the report also says which
  checkpoint recovery would start from;
- no quarantine file lies beside the log (what a recovery moved aside to go on past damage:
  ``durable.store.file``): each one fails the report, ``quarantined: FILE (N bytes)``.

Inspecting is read-only, to the byte: it never repairs a torn tail, never takes, renews or
releases a lease, never writes a checkpoint, and opens a SQLite store so that no side file is
created or changed and no journal rolled back (``ReadOnlySQLiteStore``); a live runtime's writer
neither waits for it nor makes it wait. It does not claim a durability mode: nothing on disk
records how a runtime opens a store, and a file store is read as ``fsync=True`` reads it, which
reports damage anywhere. It is an operator's tool at the edge of the library, so like the real
ports it may look at the operating system directly; the runtime never imports it.

Exit status: 0 if every check passes (or a directory holds no conversation: nothing to check),
1 if one fails (or the store is corrupt: one line naming the damage), 2 for usage errors (no
such path, not a store, a directory holding a SQLite database instead of conversations, a
directory or file this user cannot read).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import trio

from durable.errors import UsageError
from durable.events import EventRecord
from durable.journal import usable_checkpoint
from durable.ports import InlineBlocking, OsFileSystem
from durable.state import State, new_state, reduce
from durable.store import CorruptStore, FileStore, SQLiteStore, Store
from durable.store.base import is_conversation_id
from durable.store.file import EVENTS_FILE, LEASE_FILE, is_quarantine
from durable.store.sqlite import SQLConnection

SQLITE_MAGIC = b"SQLite format 3\x00"
#: How much of a file is searched for the store's table definitions (SQLite's first page).
SCHEMA_PROBE_BYTES = 65536
SQLITE_SUFFIXES = (".sqlite", ".sqlite3")
STORE_TABLES = frozenset({"events", "checkpoints", "leases"})
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TEXT_LIMIT = 60

#: The stores a directory or file on disk can hold (``sim.world.stores.FILE_KINDS`` names the same
#: two: tests/sim/world/test_stores_on_disk.py holds them equal, as ``durable`` cannot import it).
DiskStoreKind = Literal["file", "sqlite"]

#: What the report says of each kind of store. Not the store's own ``describe()``: its
#: durability mode is how a runtime opens it, which nothing on disk records.
DESCRIPTIONS: dict[DiskStoreKind, str] = {
    "file": (
        "file store (its fsync mode is not recorded in the directory: read as FileStore(fsync="
        "True) reads it, so damage anywhere is reported)"
    ),
    "sqlite": (
        "sqlite store (its synchronous mode is a connection's setting, not recorded in the "
        "database)"
    ),
}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class ConversationReport:
    id: str
    records: int = 0
    last_sequence: int = 0
    torn_tail_bytes: int | None = None
    lease: dict[str, Any] | None = None
    active_run: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    submissions: list[dict[str, Any]] = field(default_factory=list)
    queue: list[dict[str, Any]] = field(default_factory=list)  # queued inputs, acceptance order
    open_intents: list[dict[str, Any]] = field(default_factory=list)
    pending_reconciliations: list[dict[str, Any]] = field(default_factory=list)
    compensations: list[dict[str, Any]] = field(default_factory=list)  # in the order they run
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    # Agent state (docs/architecture.md, 1.7): the plan and how many versions it had, the
    # last recorded change of each file, the validations, the provider cursor.
    plan: list[str] = field(default_factory=list)
    plan_revisions: int = 0
    mutation_revision: int = 0
    changed_files: list[dict[str, Any]] = field(default_factory=list)
    validations: list[dict[str, Any]] = field(default_factory=list)
    cursor: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """Every field (the checks as name, ok, detail) and ``ok``."""
        return {"ok": self.ok, **asdict(self)}


@dataclass
class StoreReport:
    path: str
    kind: DiskStoreKind
    description: str
    conversations: list[ConversationReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.conversations)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "store": self.kind,
            "description": self.description,
            "ok": self.ok,
            "conversations": [c.to_json() for c in self.conversations],
        }


# -- opening ---------------------------------------------------------------------------------------


def _uri(path: str, query: str) -> str:
    return f"{Path(os.path.abspath(path)).as_uri()}?{query}"


class ReadOnlySQLiteStore(SQLiteStore):
    """``SQLiteStore`` reading through a read-only connection that leaves every file beside the
    database as it found it: no ``-wal`` or ``-shm`` created, no hot journal rolled back, no
    byte of the side files changed (tests/durable/test_damage_table.py hashes the directory).

    The plain store's first call switches the journal mode and creates missing tables inside a
    write transaction; inspecting must do neither, nor wait for (or block) a live runtime's
    writes. How it reads depends on what lies beside the database (``_read_only_uri``). Every
    read still goes through ``SQLiteStore``'s own verification.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path, blocking=InlineBlocking())
        self._snapshot: str | None = None
        self._uri = self._read_only_uri(path)

    def _read_only_uri(self, path: str) -> str:
        """- No log with frames in it: all is in the database file, so ``immutable=1`` (no lock,
          no side file, no look for a hot journal). ``mode=ro`` alone creates ``-wal`` and
          ``-shm``, and refuses to open beside a garbage ``-journal`` it would have to roll
          back. Without a log no runtime has it open (the last connection removes the log).
        - A log and its ``-shm``: ``mode=ro&readonly_shm=1`` reads the frames through the index
          without writing it; a live runtime's writer and this reader never wait for each other.
        - A log without ``-shm`` (a store opened without shared memory), or beside a hot
          journal (``tables``): a private copy of the database and its log."""
        wal = f"{path}-wal"
        if not os.path.exists(wal) or os.path.getsize(wal) == 0:
            return _uri(path, "immutable=1")
        if os.path.exists(f"{path}-shm"):
            return _uri(path, "mode=ro&readonly_shm=1")
        return self._snapshot_uri(path)

    def _snapshot_uri(self, path: str) -> str:
        """Copy the database and its log (not ``-shm``, which SQLite rebuilds from the log, nor a
        ``-journal``, which a WAL database does not use) into a private directory, removed by
        ``release``, and read the copy."""
        if self._snapshot is None:
            self._snapshot = tempfile.mkdtemp(prefix="durable-inspect-")
        copy = os.path.join(self._snapshot, os.path.basename(path))
        for suffix in ("", "-wal"):
            if os.path.exists(f"{path}{suffix}"):
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
        return _uri(copy, "mode=ro")

    def _connection(self) -> SQLConnection:
        if self._conn is None:
            self._conn = sqlite3.connect(
                self._uri, uri=True, isolation_level=None, check_same_thread=False
            )
        return self._conn

    def tables(self) -> set[str]:
        """The database's table names; a database SQLite cannot read is ``CorruptStore``. Where
        the read-only connection cannot open without writing (a hot journal), the snapshot is
        read instead."""
        try:
            return self._tables()
        except sqlite3.OperationalError:
            if self._snapshot is not None:
                raise
            self.release()
            self._uri = self._snapshot_uri(self._path)
            return self._tables()

    def _tables(self) -> set[str]:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        try:
            return {str(row[0]) for row in self._connection().execute(query).fetchall()}
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise  # cannot open as asked (``tables`` falls back), not damage
            raise CorruptStore(f"{self._path}: not a usable SQLite database: {exc}") from exc

    def release(self) -> None:
        """Close the connection and remove the snapshot, if one was made."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        if self._snapshot is not None:
            shutil.rmtree(self._snapshot, ignore_errors=True)
            self._snapshot = None


def _holds_store_schema(head: bytes) -> bool:
    """Whether the first bytes of a file hold this store's table definitions, which SQLite keeps
    as text in the database's first page: a file without the SQLite header that holds them is a
    store whose header is damaged, not some other file."""
    return all(f"CREATE TABLE {table} (".encode() in head for table in sorted(STORE_TABLES))


def check_readable(root: str) -> None:
    """``UsageError`` naming the first directory or file of a ``FileStore`` directory that this
    user cannot read. Unchecked, a conversation whose files cannot be read looks absent (a store
    that cannot tell a file is there lists no conversation), and the report would be "no store
    here", exit 0, instead of the truth."""
    unreadable: list[str] = []
    if not os.access(root, os.R_OK | os.X_OK):
        unreadable.append(root)
    else:
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False) or not is_conversation_id(entry.name):
                continue
            if not os.access(entry.path, os.R_OK | os.X_OK):
                unreadable.append(entry.path)
                continue
            with os.scandir(entry.path) as files:
                unreadable += sorted(
                    f.path for f in files if f.is_file() and not os.access(f.path, os.R_OK)
                )
    if unreadable:
        more = f" (and {len(unreadable) - 1} more)" if unreadable[1:] else ""
        raise UsageError(f"{unreadable[0]}{more}: permission denied: nothing was checked")


def open_store(path: str) -> tuple[DiskStoreKind, Store]:
    """Recognise the store at ``path`` (without writing anything); ``UsageError`` if it is none
    or cannot be read, ``CorruptStore`` if it is a SQLite store SQLite cannot read."""
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        check_readable(path)
        return "file", FileStore(path, fs=OsFileSystem(), fsync=True)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: not a store (neither a directory nor a regular file)")
    try:
        with open(path, "rb") as f:
            head = f.read(SCHEMA_PROBE_BYTES)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not head.startswith(SQLITE_MAGIC):
        if _holds_store_schema(head):
            raise CorruptStore(
                f"{path}: the SQLite header is damaged (the file holds the store's tables, but "
                "does not start with 'SQLite format 3')"
            )
        raise UsageError(f"{path}: not a store (not a FileStore directory nor a SQLite file)")
    store = ReadOnlySQLiteStore(path)
    try:
        missing = STORE_TABLES - store.tables()
    except BaseException:
        store.release()
        raise
    if missing:
        store.release()
        raise UsageError(
            f"{path}: a SQLite database, but not a durable store (no {', '.join(sorted(missing))} "
            "table)"
        )
    return "sqlite", store


def _has_sqlite_header(path: str) -> bool:
    """Whether the file at ``path`` starts with the SQLite header. A file that cannot be read is
    not recognised by its header (only by its name): this is a hint for a directory holding no
    conversation, and an unreadable neighbour must not turn that report into a failure."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def sqlite_files(directory: str) -> list[str]:
    """The names of the regular files directly in ``directory`` that look like SQLite databases
    (a ``.sqlite``/``.sqlite3`` name, or the SQLite header), sorted."""
    with os.scandir(directory) as entries:
        names = sorted(entry.name for entry in entries if entry.is_file())
    return [
        name
        for name in names
        if name.endswith(SQLITE_SUFFIXES) or _has_sqlite_header(os.path.join(directory, name))
    ]


def _not_a_file_store(directory: str, databases: list[str]) -> UsageError:
    """The error for a directory with no conversation but SQLite databases: a SQLite store is
    the database file, so say which path to inspect instead."""
    shown = ", ".join(databases[:3]) + (f" and {len(databases) - 3} more" if databases[3:] else "")
    what = "a SQLite database" if len(databases) == 1 else "SQLite databases"
    how = "the database by its path" if len(databases) == 1 else "each database by its path, e.g."
    target = shlex.quote(os.path.join(directory, databases[0]))
    return UsageError(
        f"{directory} holds {what} ({shown}) and no FileStore conversations: inspect {how}: "
        f"python -m durable inspect {target}"
    )


# -- inspecting ------------------------------------------------------------------------------------


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= TEXT_LIMIT:
        return text
    return text[: TEXT_LIMIT - 3] + "..."


def _torn_tail_bytes(root: str, conversation_id: str, records: list[EventRecord]) -> int:
    """Bytes after the committed records of a FileStore log: the file size minus the size of the
    good records' lines (each written as ``to_line() + "\\n"``)."""
    path = os.path.join(root, conversation_id, EVENTS_FILE)
    if not os.path.exists(path):
        return 0
    good = sum(len(r.to_line().encode("utf-8")) + 1 for r in records)
    return max(os.path.getsize(path) - good, 0)


def _describe_state(report: ConversationReport, state: State) -> None:
    report.active_run = state.active_run
    report.runs = [
        {
            "id": run.id,
            "status": run.status,
            "stop_reason": run.stop_reason,
            "detail": _clip(run.detail) or "",
            "inputs": list(run.inputs),
            "model_turns": run.model_turns,
            "tool_calls": run.tool_calls,
        }
        for run in state.runs.values()
    ]
    report.submissions = [
        {
            "id": sub.id,
            "request_id": sub.request_id,
            "status": sub.status,
            "mode": sub.mode,
            "run_id": sub.run_id,
            "content": _clip(sub.content),
            "answer": _clip(sub.answer),
            "reason": _clip(sub.reason),
        }
        for sub in state.submissions.values()
    ]
    report.queue = [{"id": sid, "mode": state.submissions[sid].mode} for sid in state.queue]
    for intent in state.unresolved_intents():
        entry = {
            "call_id": intent.call_id,
            "task_id": intent.task_id,
            "tool": intent.tool,
            "policy": intent.policy,
            "idempotency_key": intent.idempotency_key,
            "epoch": intent.epoch,
            "sequence": intent.sequence,
            "interrupted": intent.interrupted,
            "reconciliation": intent.reconciliation,
        }
        report.open_intents.append(entry)
        if intent.reconciliation:
            report.pending_reconciliations.append(entry)
    report.compensations = _compensations(state)
    _describe_agent_state(report, state)


def _compensations(state: State) -> list[dict[str, Any]]:
    """Each compensation task's plan, in the order it runs: ``pending`` (no intent yet),
    ``intent`` (committed, no result: a crash hit it; the next owner runs it again under the
    same key), ``done`` or ``failed``."""
    out: list[dict[str, Any]] = []
    for task in state.tasks.values():
        if task.kind != "compensation":
            continue
        for call_id in task.data.get("calls", []):
            intent = state.intents[call_id]
            status = "pending"
            if intent.compensated_sequence is not None:
                status = "failed" if intent.compensation_failed else "done"
            elif intent.compensation_sequence is not None:
                status = "intent"
            out.append(
                {
                    "task_id": task.id,
                    "run_id": task.run_id,
                    "call_id": call_id,
                    "tool": intent.tool,
                    "status": status,
                }
            )
    return out


def _describe_agent_state(report: ConversationReport, state: State) -> None:
    report.plan = [_clip(step) or "" for step in state.plan]
    report.plan_revisions = len(state.plan_history)
    report.mutation_revision = state.mutation_revision
    report.changed_files = [
        {
            "path": change.path,
            "call_id": change.call_id,
            "before_hash": change.before_hash,
            "after_hash": change.after_hash,
            "revision": change.revision,
        }
        for _, change in sorted(state.changed_files.items())
    ]
    report.validations = [
        {
            "criterion": v.criterion,
            "call_id": v.call_id,
            "passed": v.passed,
            "revision": v.revision,
            "current": v.revision == state.mutation_revision,
        }
        for v in state.validations
    ]
    cursor = state.cursor
    if cursor is not None:
        report.cursor = {
            "cursor": cursor.cursor,
            "resumable": cursor.resumable,
            "task_id": cursor.task_id,
        }


async def inspect_conversation(
    store: Store, kind: DiskStoreKind, root: str, conversation_id: str
) -> ConversationReport:
    """Everything about one conversation; raises ``CorruptStore`` if its committed data is bad."""
    report = ConversationReport(id=conversation_id)
    records = await store.read_records(conversation_id)  # verifies; never repairs
    lease = await store.current_lease(conversation_id)
    report.records = len(records)
    report.last_sequence = records[-1].sequence if records else 0
    if lease is not None:
        report.lease = {
            "owner_id": lease.owner_id,
            "epoch": lease.epoch,
            "expires_at_s": lease.expires_at_s,
        }

    sequences = [r.sequence for r in records]
    gap = next((i + 1 for i, s in enumerate(sequences) if s != i + 1), None)
    report.checks.append(
        Check(
            "sequences contiguous",
            gap is None,
            f"1..{len(records)}" if gap is None else f"sequence {gap} missing or out of place",
        )
    )
    bad = [r.sequence for r in records if not r.verify()]
    detail = f"{len(records)} records verify" if not bad else f"bad checksums at {bad[:5]}"
    if kind == "file":
        report.torn_tail_bytes = _torn_tail_bytes(root, conversation_id, records)
        if report.torn_tail_bytes:
            detail += f"; torn tail ignored ({report.torn_tail_bytes} bytes)"
    report.checks.append(Check("checksums valid", not bad, detail))

    state: State | None
    try:
        state = reduce(new_state(conversation_id), records)
        report.checks.append(Check("log replays", True, f"state through {state.last_sequence}"))
    except Exception as exc:  # InvariantViolation, or worse: a log no runtime could have written
        state = None
        report.checks.append(Check("log replays", False, f"{type(exc).__name__}: {exc}"))
    if state is not None:
        _describe_state(report, state)
        if lease is not None or records:
            lease_epoch = lease.epoch if lease is not None else 0
            report.checks.append(
                Check(
                    "lease epoch",
                    state.epoch <= lease_epoch,
                    f"log epoch {state.epoch}, lease epoch {lease_epoch}",
                )
            )

    await _check_checkpoints(store, report, conversation_id, records)
    if kind == "file":
        _check_quarantine(report, os.path.join(root, conversation_id))
    return report


def _check_quarantine(report: ConversationReport, directory: str) -> None:
    """A quarantine file is what a recovery moved aside to go on past damage (the file store's
    module docstring): evidence for an operator, never read by the store, so its presence fails
    the report until someone looks at it and removes it."""
    for name in sorted(os.listdir(directory)):
        if is_quarantine(name):
            path = os.path.join(directory, name)
            size = os.path.getsize(path)
            report.checks.append(Check("quarantine", False, f"quarantined: {path} ({size} bytes)"))


async def _check_checkpoints(
    store: Store, report: ConversationReport, conversation_id: str, records: list[EventRecord]
) -> None:
    used: int | None = None
    last = records[-1].sequence if records else 0
    for checkpoint in await store.load_checkpoints(conversation_id):
        through = checkpoint.through_sequence
        entry: dict[str, Any] = {
            "through_sequence": through,
            "verifies": checkpoint.verify(),
            "in_log": 0 <= through <= last,
            "matches_replay": None,
            "used_by_recovery": False,
        }
        name = f"checkpoint {through}"
        problems: list[str] = []
        if not entry["verifies"]:
            problems.append("checksum does not verify")
        if checkpoint.conversation_id != conversation_id:
            problems.append(f"belongs to {checkpoint.conversation_id}")
        if entry["in_log"] and not problems:
            try:
                expected = reduce(new_state(conversation_id), records[:through])
                entry["matches_replay"] = (
                    checkpoint.to_state().model_dump() == expected.model_dump()
                )
            except Exception as exc:  # the log does not replay, or the state does not parse
                entry["matches_replay"] = False
                problems.append(f"cannot compare: {type(exc).__name__}: {exc}")
            else:
                if not entry["matches_replay"]:
                    problems.append(f"differs from replaying records 1..{through}")
        # Recovery (``journal.recover_state``) takes the newest usable checkpoint in the log.
        if used is None and entry["in_log"] and usable_checkpoint(checkpoint, conversation_id):
            used = through
            entry["used_by_recovery"] = True
        report.checkpoints.append(entry)
        if problems:
            report.checks.append(Check(name, False, "; ".join(problems)))
        elif not entry["in_log"]:
            # A checkpoint is saved only after the commits it covers were acknowledged: in a
            # durable mode those commits must still be in the log.
            detail = (
                f"beyond the log (last sequence {last}): acknowledged commits {last + 1}..{through}"
                " are lost or damaged (expected only after power loss with FileStore(fsync=False)"
                " or SQLite synchronous=NORMAL)"
            )
            report.checks.append(Check(name, False, detail))
        else:
            use = "used by recovery" if entry["used_by_recovery"] else "not used by recovery"
            report.checks.append(Check(name, True, f"verifies, equals replay, {use}"))
    if used is None and records:
        report.checks.append(Check("recovery start", True, "full replay (no usable checkpoint)"))


async def inspect_store(path: str) -> StoreReport:
    kind, store = open_store(path)
    try:
        report = StoreReport(path=path, kind=kind, description=DESCRIPTIONS[kind])
        conversation_ids = await store.list_conversations()
        if kind == "file" and not conversation_ids:
            databases = sqlite_files(path)
            if databases:
                raise _not_a_file_store(path, databases)
        for conversation_id in conversation_ids:
            report.conversations.append(
                await inspect_conversation(store, kind, path, conversation_id)
            )
        return report
    finally:
        if isinstance(store, ReadOnlySQLiteStore):
            store.release()


# -- rendering -------------------------------------------------------------------------------------


def render_text(report: StoreReport, out: TextIO) -> None:
    w = out.write
    if not report.conversations:
        # Nothing was checked: saying "all checks pass" would read as a healthy store, which for
        # a directory (an empty one, or the wrong one) is not even a store.
        if report.kind == "file":
            w(
                f"{report.path}: no store here: no conversations (no <conversation>/{EVENTS_FILE} "
                f"or <conversation>/{LEASE_FILE}), nothing checked\n"
            )
        else:
            w(f"{report.path}: {report.description}\n")
            w("no conversations: the store is empty, nothing checked\n")
        return
    w(f"{report.path}: {report.description}\n")
    for conv in report.conversations:
        w(f"\nconversation {conv.id}: {conv.records} records, last sequence {conv.last_sequence}\n")
        if conv.lease is None:
            w("  lease: none\n")
        else:
            lease = conv.lease
            expiry = lease["expires_at_s"]
            expires = "released" if expiry < 0 else f"expires at {expiry:.3f} s"
            w(f"  lease: owner {lease['owner_id']}, epoch {lease['epoch']}, {expires}\n")
        w(f"  active run: {conv.active_run or 'none'}\n")
        for run in conv.runs:
            stop = f" ({run['stop_reason']})" if run["stop_reason"] else ""
            w(f"  run {run['id']}: {run['status']}{stop}, inputs {', '.join(run['inputs'])}\n")
        for sub in conv.submissions:
            request = f" request {sub['request_id']}" if sub["request_id"] else ""
            outcome = ""
            if sub["answer"] is not None:
                outcome = f": {sub['answer']!r}"
            elif sub["reason"] is not None:
                outcome = f": {sub['reason']}"
            mode = f" [{sub['mode']}]" if sub.get("mode", "follow_up") != "follow_up" else ""
            w(f"  submission {sub['id']}{request}{mode}: {sub['status']}{outcome}\n")
        if conv.queue:
            queued = ", ".join(f"{q['id']} ({q['mode']})" for q in conv.queue)
            w(f"  queue: {queued}\n")
        if not conv.open_intents:
            w("  open intents: none\n")
        for intent in conv.open_intents:
            waiting = ", waiting for an operator" if intent["reconciliation"] else ""
            w(
                f"  open intent {intent['call_id']}: tool {intent['tool']} "
                f"({intent['policy']}), key {intent['idempotency_key']}{waiting}\n"
            )
        w(f"  pending reconciliations: {len(conv.pending_reconciliations)}\n")
        for undo in conv.compensations:
            w(
                f"  compensation of {undo['call_id']} (tool {undo['tool']}, run "
                f"{undo['run_id']}): {undo['status']}\n"
            )
        _render_agent_state(conv, w)
        for check in conv.checks:
            mark = "ok  " if check.ok else "FAIL"
            w(f"  [{mark}] {check.name}: {check.detail}\n")
    failed = sum(1 for c in report.conversations if not c.ok)
    verdict = "all checks pass" if failed == 0 else f"{failed} conversation(s) fail a check"
    w(f"\n{verdict}\n")


def _render_agent_state(conv: ConversationReport, w: Callable[[str], object]) -> None:
    """The agent-state lines, only for a conversation that has any (a conversation without
    them reads as before the agent features existed)."""
    if conv.plan_revisions:
        w(f"  plan ({conv.plan_revisions} revisions): {'; '.join(conv.plan) or '(empty)'}\n")
    if conv.mutation_revision or conv.changed_files:
        w(f"  mutation revision: {conv.mutation_revision}\n")
    for change in conv.changed_files:
        after = change["after_hash"]
        content = f"sha256 {after[:16]}" if after else "content unknown"
        w(
            f"  changed file {change['path']}: {content} "
            f"(revision {change['revision']}, call {change['call_id']})\n"
        )
    for v in conv.validations:
        verdict = "passed" if v["passed"] else "failed"
        stale = "current" if v["current"] else "stale"
        w(
            f"  validation {v['criterion']!r} ({v['call_id']}): {verdict} at revision "
            f"{v['revision']} ({stale})\n"
        )
    if conv.cursor is not None:
        resumable = "resumable" if conv.cursor["resumable"] else "not resumable"
        w(f"  provider cursor: {conv.cursor['cursor']} ({resumable})\n")


# -- command line ----------------------------------------------------------------------------------

HELP = """\
Inspect a durable store without changing it: no repair of a torn tail, no lease taken, renewed or
released, no checkpoint written.

PATH is a FileStore directory or a SQLiteStore file (recognised by its SQLite header). A
directory without a conversation is reported as "no store here" (nothing checked); one that holds
a SQLite database instead is a usage error that names the file to inspect. For every
conversation it prints the number of records and the last sequence, the current lease (owner,
epoch, expiry), the runs (id, status, stop reason, inputs), the submissions (id, request id,
inbox mode, status, answer or reason), the queue (queued inputs with their modes), the open
tool intents, the pending reconciliations and the compensations of abandoned runs (each undo in
the order it runs: pending, intent, done or failed), and checks:

  sequences contiguous  the log holds sequences 1..n without a gap
  checksums valid       every committed record verifies (a torn tail, which is what a crash
                        leaves, is reported as ignored, not as a failure)
  log replays           reduce() accepts every record in order
  lease epoch           the log's epoch is not above the stored lease's
  checkpoint N          each checkpoint verifies, belongs to the conversation and equals the
                        state replayed from records 1..N; the one recovery would use is named
  quarantine            a file a recovery moved aside to go on past damage: each one fails
                        ("quarantined: FILE (N bytes)") until an operator removes it

It changes no byte of the store (a SQLite store is read without creating -wal or -shm) and
claims no durability mode: none is recorded on disk.

exit status: 0 every check passes (or no conversation: nothing to check); 1 a check fails or
the store is corrupt; 2 usage error (no such path, not a store, a directory holding a SQLite
database instead of conversations, a directory or file this user cannot read)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a FileStore directory or a SQLite file")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")


def run(
    path: str, *, as_json: bool = False, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Inspect ``path`` and print the report; returns the exit status. Never raises for bad
    input: a missing path or a non-store is 2, a corrupt store or a failed check is 1."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        report = trio.run(inspect_store, path)
    except UsageError as exc:
        _error(err if not as_json else out, as_json, f"error: {exc}", "usage")
        return EXIT_USAGE
    except CorruptStore as exc:
        _error(out, as_json, f"corrupt store: {exc}", "corrupt")
        return EXIT_FAILED
    except (OSError, sqlite3.Error, ValueError) as exc:
        _error(out, as_json, f"inspect failed: {type(exc).__name__}: {exc}", "failed")
        return EXIT_FAILED
    if as_json:
        out.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        render_text(report, out)
    return EXIT_OK if report.ok else EXIT_FAILED


def _error(stream: TextIO, as_json: bool, message: str, kind: str) -> None:
    message = " ".join(message.split())  # one line, whatever the exception's text
    if as_json:
        stream.write(json.dumps({"ok": False, "error": kind, "message": message}) + "\n")
    else:
        stream.write(message + "\n")
