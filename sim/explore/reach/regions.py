"""What the reach measurement must reach: the recovery regions of ``durable/``, the branches
allowed to stay unreached (each with its reason), and where ``durable``'s sources are.

The catalogue is kept in code, beside the allowances, so a change to either is one reviewed diff
(the package's docstring, ``sim/explore/reach/__init__.py``, describes the whole measurement).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from sim.errors import UserError

Arc = tuple[str, int, int]  # (path relative to durable's parent, e.g. "durable/x.py"; from; to)


#: The recovery regions: every branch of these functions (and of the functions nested in them)
#: must be reached by the measurement, or be allowed below with a reason. What is in, and why:
#: the tool task's recovery entry and policies and the re-execution path (``_call``, the first
#: execution, is not recovery); the generation task's resumable phases (re-send of the pinned
#: request, retry at the committed deadline, the turn after the tools settled, the guards against
#: a run settled meanwhile) but not its first-turn budget checks; the compaction task's entry
#: (an intent from an earlier epoch settled stale) and its return of the waiting turn; the
#: journal (open, commit, lease renewal and fencing, checkpoint choice on recovery: every
#: function with a branch); the heartbeat; the runtime's
#: recovery paths (opening a conversation, shutdown's lease release, fencing, request-id dedupe,
#: an abort that finds the run settled or the lease lost); the reducer's branches that recovery
#: events take; and the stores' lease, log-repair and checkpoint code. Left out on purpose:
#: argument validation whose errors are caller bugs (``check_batch``, ``Conversation.resolve``'s
#: "not waiting" error), the reducer's branch for an unknown tool's result, and the file store's
#: read cache and directory listing (``_read_from_cache``, ``_checkpoint_files``: helpers of
#: readers that never repair, such as ``python -m durable inspect``), and
#: ``SQLiteStore.abandon`` (the simulator's stand-in for the OS closing a killed process's files).
RECOVERY_REGIONS: tuple[str, ...] = (
    "durable/tasks/__init__.py:live_task",
    "durable/tasks/tool.py:run_tool",
    "durable/tasks/tool.py:execute_and_record",
    "durable/tasks/tool.py:_context",
    "durable/tasks/tool.py:_recover",
    "durable/tasks/tool.py:_reconcile",
    "durable/tasks/generation.py:run_generation",
    "durable/tasks/generation.py:_request",
    "durable/tasks/generation.py:backoff_s",
    "durable/tasks/generation.py:_model_failed",
    "durable/tasks/generation.py:_retry",
    "durable/tasks/generation.py:_tools",
    "durable/tasks/compaction.py:run_compaction",
    "durable/tasks/compaction.py:_resume_turn",
    "durable/journal.py:Journal.open",
    "durable/journal.py:Journal.commit",
    "durable/journal.py:Journal._checkpoint",
    "durable/journal.py:Journal._ensure_lease_fresh",
    "durable/journal.py:Journal.ensure_lease",
    "durable/journal.py:Journal.renew_locked",
    "durable/journal.py:Journal.renew",
    "durable/journal.py:acquire_lease",
    "durable/journal.py:usable_checkpoint",
    "durable/journal.py:recover_state",
    "durable/lease.py:heartbeat",
    "durable/runtime.py:Runtime.conversation",
    "durable/runtime.py:Runtime._shutdown",
    "durable/runtime.py:Conversation._on_fenced",
    "durable/runtime.py:Conversation.submit",
    "durable/runtime.py:Conversation.abort",
    "durable/runtime.py:SubmissionHandle.wait",
    "durable/state.py:apply",
    "durable/state_model.py:State.runnable_tasks",
    "durable/state.py:_input_settled",
    "durable/store/file.py:FileStore._ensure_dir",
    "durable/store/file.py:FileStore._atomic_write",
    "durable/store/file.py:FileStore._read_lease",
    "durable/store/file.py:FileStore._acquire_lease",
    "durable/store/file.py:FileStore._renew_lease",
    "durable/store/file.py:FileStore._release_lease",
    "durable/store/file.py:FileStore._scan",
    "durable/store/file.py:FileStore._check_tail",
    "durable/store/logscan.py:check_line",
    "durable/store/logscan.py:scan_log",
    "durable/store/logscan.py:later_commit",
    "durable/store/file.py:FileStore._settle",
    "durable/store/file.py:FileStore.read_records",
    "durable/store/file.py:FileStore._read_records",
    "durable/store/file.py:FileStore._append",
    "durable/store/file.py:FileStore._unlink_all",
    "durable/store/file.py:FileStore._check_no_lost_commits",
    "durable/store/file.py:FileStore._set_aside_future_checkpoints",
    "durable/store/file.py:FileStore._check_recoverable",
    "durable/store/file.py:FileStore._read_file",
    "durable/store/file.py:FileStore._cut_tail",
    "durable/store/file.py:FileStore._quarantine_name",
    "durable/store/file.py:FileStore._quarantine",
    "durable/store/file.py:FileStore._set_aside",
    "durable/store/file.py:FileStore._superseded",
    "durable/store/file.py:FileStore._load_checkpoints",
    "durable/store/file.py:FileStore._save_checkpoint",
    "durable/store/file.py:FileStore.load_checkpoints",
    "durable/store/sqlite.py:SQLiteStore._transaction",
    "durable/store/sqlite.py:SQLiteStore._corrupt",
    "durable/store/sql.py:SqlStore.acquire_lease",
    "durable/store/sql.py:SqlStore._acquire_body",
    "durable/store/sql.py:SqlStore._check_recoverable",
    "durable/store/sql.py:SqlStore.renew_lease",
    "durable/store/sql.py:SqlStore.release_lease",
    "durable/store/sql.py:SqlStore.read_records",
    "durable/store/sql.py:SqlStore._insert_batch",
    "durable/store/sql.py:SqlStore.append",
    "durable/store/sql.py:SqlStore.save_checkpoint",
    "durable/store/sql.py:SqlStore.load_checkpoints",
    "durable/store/base.py:check_fence",
    "durable/store/base.py:verified_rows",
    "durable/store/base.py:granted_lease",
    "durable/store/base.py:renewed_lease",
    "durable/store/base.py:parsed_checkpoints",
    "durable/store/base.py:checkpoint_usable",
    "durable/store/base.py:lost_commits",
    "durable/store/base.py:check_lease_follows_log",
    "durable/store/base.py:check_recoverable_rows",
)


@dataclass(frozen=True)
class Allowance:
    """A recovery branch nothing can reach in a simulated run: the region it is in, the stripped
    source text of the line it leaves and of the line it goes to (``exit``: it leaves the
    function), and why it cannot be reached."""

    region: str
    source: str
    target: str
    reason: str


_STORAGE = "only damaged synced data (storage damage, not a crash) leads here"
_RENAMED = (
    "only a checkpoint under another sequence's name leads here, and no storage fault renames "
    "a file: tests/durable/test_damage_table.py covers it"
)
_SQLITE_STORAGE = "only a damaged database leads here (SQLite is swept with process kills only)"
_OS_ERROR = "only a real OS or SQLite error (disk full, locked or unreadable database) leads here"
_ONE_CLOCK = (
    "a writer renews a lease past half its TTL before it writes, so under one clock a zombie "
    "is fenced there first; this store-side check fires only with clock skew, not simulated"
)
_OPEN_GAP = (
    "a takeover while the opener was stopped between acquiring the lease and reading the log: "
    "nothing awaits there under the simulator (inline store calls), so only a real kernel "
    "pause reaches it (tests/durable/test_open_takeover.py, durable-sim workers)"
)
_READER = "a read that does not repair (python -m durable inspect); recovery always repairs"
_SETTLED_GUARD = (
    "defensive: an abort cancels every invocation before it settles the run, so no handler "
    "finds its run settled under it"
)

#: The recovery branches nothing reaches, each with the reason it cannot be (see ``Allowance``).
#: ``durable-sim coverage`` fails on an allowance that matches no branch any more (stale) and
#: lists the allowances whose branch *was* reached (then the allowance should go).
ALLOWED_UNREACHED: tuple[Allowance, ...] = (
    # The lease record went back to an older epoch (storage damage or an operator's restore),
    # or another owner took over while this process was stopped between its grant and its read
    # of the log (a fenced opener, not a corrupt store).
    Allowance(
        "durable/journal.py:Journal.open",
        "if lease.epoch <= state.epoch:",
        "current = await store.current_lease(conversation_id)",
        _OPEN_GAP,
    ),
    Allowance(
        "durable/journal.py:Journal.open",
        "if current is not None and current.epoch > lease.epoch:",
        "raise Fenced(",
        _OPEN_GAP,
    ),
    Allowance(
        "durable/journal.py:Journal.open",
        "if current is not None and current.epoch > lease.epoch:",
        "raise CorruptStore(",
        _STORAGE,
    ),
    Allowance(
        "durable/journal.py:Journal.ensure_lease",
        "if self.fenced:",
        'raise Fenced(f"{self.state.conversation_id}: lease lost")',
        "ensure_lease follows the intent commit with no wait between them, so the lease cannot "
        "be lost (and the journal fenced by another task) in that gap under one clock",
    ),
    Allowance(
        "durable/journal.py:usable_checkpoint",
        "if state.last_sequence != checkpoint.through_sequence:",
        "return None",
        "defensive: make_checkpoint takes through_sequence from the state it saves, and the "
        "checksum covers both",
    ),
    Allowance(
        "durable/runtime.py:Conversation.submit",
        "if mode not in INBOX_MODES:",
        "raise ValueError(f\"unknown inbox mode {mode!r} (one of {', '.join(INBOX_MODES)})\")",
        "argument validation (a caller bug, not recovery): the simulated client's modes come "
        "from validated scenarios; tests/durable/test_inbox_modes.py covers it",
    ),
    Allowance(
        "durable/runtime.py:Runtime.conversation",
        "if existing is not None and not existing.journal.fenced:",
        "return existing",
        "a second open of a conversation in one process (API convenience, not recovery); the "
        "simulated client opens it once per process",
    ),
    Allowance(
        "durable/tasks/tool.py:run_tool",
        'elif task.phase == "execute":',
        'raise AssertionError(f"tool task {task_id} cannot run from phase {task.phase}")',
        "defensive: a runnable tool task is in phase call or execute (one waiting for "
        "reconciliation is not runnable)",
    ),
    Allowance("durable/tasks/tool.py:run_tool", "if task is None:", "return", _SETTLED_GUARD),
    # Damaged history read *through a tool*: a sub-agent's child log damaged on disk, opened
    # again when its delegating call is re-run (``durable.tasks.NOT_A_TOOL_RESULT``; swept
    # with ``--crash storage``: delegate_to_subagent ``42:after:storage``).
    Allowance(
        "durable/tasks/tool.py:execute_and_record",
        "if not is_tool_failure(exc):",
        "raise",
        _STORAGE,
    ),
    # A verifier that raises: no bundled scenario's verifier does (they read a service, which
    # answers), so neither way out of its handler is taken; tests/durable/test_tool_failures.py
    # checks the classification both ways take.
    *(
        Allowance("durable/tasks/tool.py:_recover", "if not is_tool_failure(exc):", target, reason)
        for target, reason in (
            ("raise", _STORAGE),
            (
                'status, output = "unknown", f"verifier failed: {type(exc).__name__}: {exc}"',
                "no bundled scenario has a verifier that raises",
            ),
        )
    ),
    Allowance(
        "durable/tasks/generation.py:run_generation",
        'if task is None or (task.status == "waiting" and task.phase != "tools"):',
        "return",
        _SETTLED_GUARD,
    ),
    Allowance(
        "durable/tasks/generation.py:_model_failed",
        "if live_task(state, task_id) is None:",
        "return []",
        _SETTLED_GUARD,
    ),
    Allowance(
        "durable/tasks/generation.py:_tools", "if task is None:", "return []", _SETTLED_GUARD
    ),
    Allowance(
        "durable/tasks/compaction.py:run_compaction", "if task is None:", "return", _SETTLED_GUARD
    ),
    Allowance(
        "durable/tasks/compaction.py:run_compaction",
        "if isinstance(summary, ModelError):",
        'detail = f"the model refused the summary: {summary}"',
        "the fake model refuses a summarisation request only when the prefix alone exceeds its "
        "window, which no bundled scenario sets up; tests/durable/test_compaction.py covers it",
    ),
    Allowance(
        "durable/tasks/compaction.py:_resume_turn",
        'if turn is None or turn.status == "terminal":',
        "return []",
        _SETTLED_GUARD,
    ),
    # The file store.
    Allowance(
        "durable/store/file.py:FileStore._read_lease",
        "if lease.conversation_id != conversation_id:",
        'raise CorruptStore(f"{path}: lease is for conversation {lease.conversation_id}")',
        _STORAGE,
    ),
    Allowance(
        "durable/store/file.py:FileStore._acquire_lease",
        "if previous is None and self._fs.exists(self._events_path(conversation_id)):",
        "raise CorruptStore(",
        _STORAGE,
    ),
    Allowance(
        "durable/store/file.py:FileStore._release_lease",
        "if stored is None or (stored.owner_id, stored.epoch) != (lease.owner_id, lease.epoch):",
        "return",
        _ONE_CLOCK,
    ),
    Allowance(
        "durable/store/file.py:FileStore._check_tail",
        "if anomaly is None or anomaly.later is None or not self._fsync:",
        "raise CorruptStore(",
        _STORAGE,
    ),
    # The file store's log scanner (a pure function of the log's bytes).
    Allowance(
        "durable/store/logscan.py:check_line",
        "if record.conversation_id != conversation_id:",
        'return None, f"record of conversation {record.conversation_id}"',
        _STORAGE,
    ),
    Allowance(
        "durable/store/logscan.py:later_commit",
        "if record is not None and why is None and later:",
        "return LaterCommit(line_no, pos, record.sequence)",
        _STORAGE,
    ),
    Allowance(
        "durable/store/logscan.py:scan_log",
        "if record.sequence != expected:",
        'why = f"sequence {record.sequence}, expected {expected}"',
        _STORAGE + ": a crash only cuts the tail, never reorders complete records",
    ),
    Allowance(
        "durable/store/logscan.py:scan_log",
        "elif pending and record.batch != pending[0].batch:",
        'why = f"batch {record.batch} starts before batch {pending[0].batch} completed"',
        _STORAGE + ": one append writes one whole batch, so batches never interleave",
    ),
    Allowance(
        "durable/store/file.py:FileStore._append",
        "if cached is not None and self._fs.size(path) == cached.size:",
        "scan = self._scan(conversation_id, path)",
        "defensive: the lease holder cached the log when it recovered and nobody else can "
        "append under its lease, so its cache is never stale",
    ),
    Allowance(
        "durable/store/file.py:FileStore._settle",
        "elif repair:",
        "self._cache.pop(conversation_id, None)",
        _READER,
    ),
    Allowance("durable/store/file.py:FileStore._read_records", "if repair:", "return []", _READER),
    Allowance(
        "durable/store/file.py:FileStore._read_records",
        "if records is not None:",
        "scan = self._scan(conversation_id, path)",
        _READER,
    ),
    Allowance(
        "durable/store/file.py:FileStore._check_no_lost_commits",
        "if beyond:",
        "through, name = beyond[0]",
        _STORAGE,
    ),
    Allowance(
        "durable/store/file.py:FileStore._check_no_lost_commits",
        "if not self._fs.exists(events):",
        'held = "is missing"',
        _STORAGE,
    ),
    Allowance(
        "durable/store/file.py:FileStore._check_no_lost_commits",
        "if not self._fs.exists(events):",
        "raise CorruptStore(",
        _STORAGE,
    ),
    Allowance(
        "durable/store/file.py:FileStore._load_checkpoints",
        "if self._fsync:",
        "raise CorruptStore(",
        _STORAGE,
    ),
    *(
        Allowance("durable/store/file.py:FileStore._load_checkpoints", source, target, _RENAMED)
        for source, target in (
            (
                "if checkpoint.through_sequence != through and checkpoint.verify():",
                "if self._fsync:",
            ),
            ("if self._fsync:", "continue"),
        )
    ),
    Allowance(
        "durable/store/file.py:FileStore._superseded",
        "if checkpoint_usable(checkpoint, conversation_id) and named == (",
        "for name in names:",
        _STORAGE + ": a save rotates out a checkpoint that fails its checksum",
    ),
    Allowance(
        "durable/store/file.py:FileStore._set_aside",
        "if names and self._fsync:",
        "self._fs.fsync_dir(directory)",
        _STORAGE + ": with fsync, only a damaged checkpoint is set aside (at a rotation)",
    ),
    Allowance(
        "durable/store/base.py:check_lease_follows_log",
        "if last.epoch > stored.epoch:",
        "raise CorruptStore(",
        "only a lease record put back behind the log leads here; a storage fault flips bits "
        "(the lease's checksum fails first) and never restores an older file: "
        "tests/durable/test_damage_table.py covers it",
    ),
    Allowance(
        "durable/store/logscan.py:check_line",
        'if line.endswith(b"\\r"):',
        'return record, "ends with a carriage return (a CRLF line end: rewritten as text)"',
        "a CR before a newline is text conversion: no storage fault writes one (one flipped "
        "bit of a record's last byte, a '}', is no CR); tests/durable/test_damage_table.py",
    ),
    # The SQLite store.
    Allowance(
        "durable/store/sqlite.py:SQLiteStore._corrupt",
        "if isinstance(exc, _CORRUPT_ERRORS):",
        'return CorruptStore(f"{self._path}: not a usable SQLite database: {exc}")',
        _SQLITE_STORAGE,
    ),
    Allowance(
        "durable/store/sqlite.py:SQLiteStore._corrupt",
        "if isinstance(exc, _CORRUPT_ERRORS):",
        "return None",
        _OS_ERROR,
    ),
    Allowance(
        "durable/store/sqlite.py:SQLiteStore._transaction",
        "if conn.in_transaction:",
        "self._done_with_connection()",
        _OS_ERROR + " (BEGIN itself failed)",
    ),
    Allowance(
        "durable/store/sqlite.py:SQLiteStore._transaction",
        "if corrupt is not None:",
        "raise corrupt from exc",
        _SQLITE_STORAGE,
    ),
    Allowance(
        "durable/store/sqlite.py:SQLiteStore._transaction",
        "if corrupt is not None:",
        "raise",
        _OS_ERROR,
    ),
    Allowance(
        "durable/store/sql.py:SqlStore.release_lease",
        "if stored is None or (stored.owner_id, stored.epoch) != (lease.owner_id, lease.epoch):",
        "return",
        _ONE_CLOCK,
    ),
    Allowance(
        "durable/store/base.py:check_recoverable_rows",
        "if stored is None:",
        "raise CorruptStore(",
        _SQLITE_STORAGE,
    ),
    Allowance(
        "durable/store/base.py:lost_commits",
        "if through > last_sequence:",
        "raise CorruptStore(",
        _SQLITE_STORAGE,
    ),
    Allowance(
        "durable/store/base.py:parsed_checkpoints",
        "if checkpoint.through_sequence != through:",
        "raise CorruptStore(",
        _SQLITE_STORAGE,
    ),
    # The fence every store's ``_fence`` calls (one definition for the stores).
    Allowance(
        "durable/store/base.py:check_fence",
        "if stored is None:",
        'raise StaleLease(f"{conversation_id}: no lease; {owner_id} (epoch {epoch}) is fenced")',
        _STORAGE,
    ),
    Allowance(
        "durable/store/base.py:check_fence",
        "if stored.owner_id != owner_id or stored.epoch != epoch:",
        "raise StaleLease(",
        _ONE_CLOCK,
    ),
    # The rows of a database store (SQLite; Postgres is not measured), verified in one place.
    *(
        Allowance("durable/store/base.py:verified_rows", source, target, _SQLITE_STORAGE)
        for source, target in (
            (
                "if sequence != expected:",
                'raise CorruptStore(f"{where}: sequence gap, expected {expected}")',
            ),
            ("if not record.verify():", 'raise CorruptStore(f"{where}: checksum mismatch")'),
            (
                "if record.sequence != sequence or record.conversation_id != conversation_id:",
                "raise CorruptStore(",
            ),
            ("if out and not out[-1].last_in_batch:", "raise CorruptStore("),
        )
    ),
)


class ReachError(UserError):
    """The measurement itself failed (a region that does not exist, a corrupt corpus file)."""


# -- where durable's sources are ----------------------------------------------------------------


@functools.cache
def package_dir(name: str) -> Path:
    """A top-level package's directory, wherever it is installed (a checkout, an editable
    install or a wheel in site-packages), found by the import system *without importing it*: the
    measuring interpreter must start coverage before ``durable`` runs, or its module-level lines
    would count as missed. Nothing here reads a checkout's layout."""
    spec = find_spec(name)
    if spec is None or spec.origin is None:
        raise ReachError(f"the {name} package is not importable")
    return Path(spec.origin).resolve().parent


def durable_dir() -> Path:
    """The sources the measurement covers."""
    return package_dir("durable")


def source_root() -> Path:
    """The directory arcs and regions are relative to: ``durable``'s parent, so a branch reads
    ``durable/journal.py:...`` in a checkout and in an installed wheel alike."""
    return durable_dir().parent


def relative_source(filename: str) -> str | None:
    """``filename`` as an arc path (``durable/...``), or None for a file outside ``durable/``."""
    try:
        rel = Path(filename).resolve().relative_to(source_root())
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] == "durable" else None


def source_lines(path: str) -> list[str]:
    return (source_root() / path).read_text(encoding="utf-8").splitlines()


# -- regions --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """A recovery region as found in the source: its name, file and the lines it spans (its own
    body and the bodies of the functions nested in it)."""

    name: str
    path: str
    lines: frozenset[int]


#: A node ``_functions`` yields: a function or class, with a body and line numbers.
_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _functions(tree: ast.AST) -> Iterable[tuple[str, _Definition]]:
    """(qualified name, node) of every function and class, nested ones included."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                yield name, child
                stack.append((f"{name}.", child))
            else:
                stack.append((prefix, child))


def find_regions(names: Iterable[str] = RECOVERY_REGIONS) -> list[Region]:
    """Resolve region names against the current source; ``ReachError`` names one that is gone
    (a renamed function must be renamed here too, or its branches would silently drop out)."""
    trees: dict[str, dict[str, _Definition]] = {}
    out = []
    for name in names:
        path, _, qualname = name.partition(":")
        if path not in trees:
            source = (source_root() / path).read_text(encoding="utf-8")
            trees[path] = dict(_functions(ast.parse(source)))
        node = trees[path].get(qualname)
        if node is None:
            raise ReachError(
                f"recovery region {name} is not in the source any more: update "
                "RECOVERY_REGIONS in sim/explore/reach/regions.py"
            )
        first = node.body[0].lineno
        last = node.end_lineno or first
        out.append(Region(name, path, frozenset(range(first, last + 1))))
    return out


def region_filter() -> Callable[[set[Arc]], set[Arc]]:
    """A function keeping only the arcs that leave a line of some recovery region."""
    lines: dict[str, set[int]] = {}
    for region in find_regions():
        lines.setdefault(region.path, set()).update(region.lines)

    def keep(arcs: set[Arc]) -> set[Arc]:
        return {arc for arc in arcs if arc[1] in lines.get(arc[0], ())}

    return keep
