"""Reach: which recovery branches of ``durable/`` a measurement executes (coverage.py).

A crash-testing harness only finds bugs on the paths its scenarios reach. This module measures,
with coverage.py's branch coverage, which lines and branches (arcs) of ``durable/`` the default
sweep (every bundled scenario, both stores, process and power crashes) and the fuzzer execute,
and names the **recovery branches** that nothing reached.

Why coverage.py rather than a tracer of our own: it already does the hard parts -- which arcs a
Python function *can* take (its static analysis of the bytecode and AST, exits from nested
functions and lambdas included), a C tracer fast enough for a 10,000-schedule sweep, and data
that survives ``fork`` -- and its arcs are what a reviewer can check with ``coverage html``.

The pieces:

- ``RECOVERY_REGIONS``: the committed, explicit list of functions whose branches must all be
  reached (kept in code, beside the allowances, so a change to either is one reviewed diff).
  A region is ``path:qualified.name`` and includes the functions nested in it.
- ``ALLOWED_UNREACHED``: the few recovery branches nothing can reach in a simulated run, each with
  its one-line reason. Keyed by region and source text, not line numbers, so unrelated edits do
  not invalidate it; an allowance that matches no branch any more is reported as stale.
- The measurement runs in a fresh interpreter (``python -m sim.explore.reach``) that starts coverage
  *before* ``durable`` is imported, so module-level lines count. The sweep forks a child per crash
  point and children leave with ``os._exit``: ``save_child_coverage`` (called by
  ``sim.explore.forking`` just before that) writes the child's arcs, labelled with its schedule, to
  a small JSON file -- one per child rather than one SQLite data file each, which would take
  minutes to combine.
- A **reach corpus** (``tests/reach_corpus.json``): a greedy set cover of the recovery branches by
  the sweep's schedules, replayed by ``tests/sim/explore/test_reach.py`` in under a minute, so CI
  notices a recovery branch that becomes unreached.

Attribution is exact without resetting anything in the child: the parent flushes its collector
before and after each scenario x store sweep, so a child's data is (the parent's arcs since the
flush, up to the fork) plus its own; subtracting everything the parent recorded during that sweep
(``P``) leaves arcs only the child's crash and recovery reached. A corpus case is credited with
those arcs only (a lower bound), and the fault-free runs behind ``P`` are corpus cases of their
own, so every arc the corpus claims is one its replay executes.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DURABLE = ROOT / "durable"
CORPUS_SCHEMA_VERSION = 1
REGENERATE = "durable-sim coverage --write-corpus tests/reach_corpus.json"

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
    "durable/store/sqlite.py:SQLiteStore.acquire_lease",
    "durable/store/sqlite.py:SQLiteStore._check_recoverable",
    "durable/store/sqlite.py:SQLiteStore.renew_lease",
    "durable/store/sqlite.py:SQLiteStore.release_lease",
    "durable/store/sqlite.py:SQLiteStore.read_records",
    "durable/store/sqlite.py:SQLiteStore.append",
    "durable/store/sqlite.py:SQLiteStore.save_checkpoint",
    "durable/store/sqlite.py:SQLiteStore.load_checkpoints",
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
        "durable/store/sqlite.py:SQLiteStore.release_lease",
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


class ReachUnavailable(Exception):
    """coverage.py is not installed: the one-line error of ``durable-sim coverage``."""


class ReachError(Exception):
    """The measurement itself failed (a region that does not exist, a corrupt corpus file)."""


def require_coverage() -> None:
    """Raise ``ReachUnavailable`` unless coverage.py can be imported."""
    try:
        import coverage  # noqa: F401
    except ImportError as exc:
        raise ReachUnavailable(
            "coverage.py is not installed (it is the reach extra: pip install -e '.[reach]')"
        ) from exc


# -- what the measurement covers -----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Options:
    """What to run under coverage: a sweep (narrowed by scenarios and stores) plus the fuzzer, or
    the cases of a reach corpus."""

    scenarios: tuple[str, ...] = ()  # () = every bundled scenario
    stores: tuple[str, ...] = ("file", "sqlite")
    crash_kinds: tuple[str, ...] = ("process", "power")  # the default sweep's
    fuzz_examples: int = 300  # 0 = no fuzzing
    seed: int = 0
    corpus: str | None = None  # replay this corpus instead of sweeping
    quiet: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(
            self.__dict__,
            scenarios=list(self.scenarios),
            stores=list(self.stores),
            crash_kinds=list(self.crash_kinds),
        )

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Options:
        return cls(
            scenarios=tuple(doc["scenarios"]),
            stores=tuple(doc["stores"]),
            crash_kinds=tuple(doc["crash_kinds"]),
            fuzz_examples=int(doc["fuzz_examples"]),
            seed=int(doc["seed"]),
            corpus=doc["corpus"],
            quiet=bool(doc["quiet"]),
        )


Arc = tuple[str, int, int]  # (path relative to the repository, from line, to line)


@dataclass
class Case:
    """Runs that a corpus can replay, and the region arcs only they are credited with. One run
    for a crash schedule; the fault-free runs of a sweep (and its base crash) for its ``P``."""

    scenario: str
    store: str
    runs: list[dict[str, Any]]  # {"schedule": text, "fault_free": bool, "labels": [...]}
    arcs: set[Arc] = field(default_factory=set)
    cost: int = 0  # boundaries its runs pass: the corpus prefers cheap cases among equals


@dataclass
class Raw:
    """What the measuring interpreter hands back: every arc executed, and the corpus candidates."""

    arcs: set[Arc] = field(default_factory=set)
    cases: list[Case] = field(default_factory=list)
    fuzz_arcs: set[Arc] = field(default_factory=set)
    sweeps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "arcs": _arcs_json(self.arcs),
            "fuzz_arcs": _arcs_json(self.fuzz_arcs),
            "cases": [
                {
                    "scenario": c.scenario,
                    "store": c.store,
                    "runs": c.runs,
                    "arcs": _arcs_json(c.arcs),
                    "cost": c.cost,
                }
                for c in self.cases
            ],
            "sweeps": self.sweeps,
            "notes": self.notes,
            "wall_s": round(self.wall_s, 3),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Raw:
        return cls(
            arcs=_arcs_from(doc["arcs"]),
            fuzz_arcs=_arcs_from(doc["fuzz_arcs"]),
            cases=[
                Case(c["scenario"], c["store"], c["runs"], _arcs_from(c["arcs"]), c.get("cost", 0))
                for c in doc["cases"]
            ],
            sweeps=doc["sweeps"],
            notes=doc["notes"],
            wall_s=doc["wall_s"],
        )


def _arcs_json(arcs: Iterable[Arc]) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {}
    for path, a, b in sorted(arcs):
        out.setdefault(path, []).append([a, b])
    return out


def _arcs_from(doc: dict[str, list[list[int]]]) -> set[Arc]:
    return {(path, a, b) for path, pairs in doc.items() for a, b in pairs}


# -- the child hook (called by sim.explore.forking in a forked child) ------------------------------

#: Set by the measuring interpreter around each sweep; a forked child inherits it. None in every
#: ordinary run, so the hook costs one global read there.
_SINK: str | None = None


def save_child_coverage(schedule: str) -> None:
    """In a forked sweep child about to ``os._exit``: save what coverage recorded, labelled with
    the child's schedule. Does nothing unless a reach measurement is running. Never raises: the
    child must exit whatever happens here (a missing file is counted by the measurement)."""
    sink = _SINK
    if sink is None:
        return
    try:
        import coverage

        cov = coverage.Coverage.current()
        if cov is None:
            return
        cov.stop()
        doc = {"schedule": schedule, "arcs": _arcs_json(_harvest(cov))}
        path = os.path.join(sink, f"child-{os.getpid()}.json")
        with open(f"{path}.tmp", "w", encoding="utf-8") as out:
            json.dump(doc, out)
        os.replace(f"{path}.tmp", path)
    except BaseException:  # see the docstring: the child must reach os._exit
        pass


def _harvest(cov: Any) -> set[Arc]:
    """The arcs recorded since the last harvest (flushing the collector), as repository paths;
    the data is erased so the next harvest starts empty. After a fork, coverage.py gives the
    child a data store of its own, so a child's harvest never touches the parent's."""
    data = cov.get_data()
    arcs: set[Arc] = set()
    for filename in data.measured_files():
        path = _relative(filename)
        if path is None:
            continue
        arcs.update((path, a, b) for a, b in data.arcs(filename) or ())
    data.erase()
    return arcs


def _relative(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] == "durable" else None


# -- the measuring interpreter -------------------------------------------------------------------


def _quiet_coverage() -> None:
    """An empty harvest (nothing ran since the last one) is expected here, not worth a warning."""
    import warnings

    warnings.filterwarnings("ignore", message="No data was collected")


def _start_coverage() -> Any:
    import coverage

    _quiet_coverage()
    cov = coverage.Coverage(
        data_file=None, branch=True, source=[str(DURABLE)], config_file=False, auto_data=False
    )
    cov.start()
    return cov


def measure(options: Options, cov: Any) -> Raw:
    """Run the sweep (and the fuzzer) or the corpus under the already started ``cov``."""
    from sim.explore.progress import Progress

    started = time.perf_counter()
    raw = Raw()
    raw.arcs |= _harvest(cov)  # whatever ran at import time
    with Progress(command="coverage", unit="runs", enabled=not options.quiet) as progress:
        if options.corpus is not None:
            _replay_corpus(options, cov, raw, progress)
        else:
            _measure_sweeps(options, cov, raw, progress)
            if options.fuzz_examples:
                _measure_fuzz(options, cov, raw, progress)
    raw.arcs |= _harvest(cov)
    raw.wall_s = time.perf_counter() - started
    return raw


def _scenario_names(options: Options) -> list[str]:
    from sim.world.scenario import bundled_names

    return list(options.scenarios) or bundled_names()


def _measure_sweeps(options: Options, cov: Any, raw: Raw, progress: Any) -> None:
    global _SINK
    from sim.explore import forking
    from sim.explore.sweep import sweep
    from sim.world import tempdirs
    from sim.world.scenario import load_scenario

    for name in _scenario_names(options):
        scenario = load_scenario(name)
        for store in options.stores:
            progress.start(f"sweep {scenario.name}[{store}]")
            raw.arcs |= _harvest(cov)
            sink = tempdirs.make("reach")
            _SINK = sink
            if save_child_coverage not in forking.CHILD_EXIT_HOOKS:
                forking.CHILD_EXIT_HOOKS.append(save_child_coverage)
            try:
                result = sweep(
                    scenario,
                    ref=name,
                    store=store,  # type: ignore[arg-type]
                    seed=options.seed,
                    crash_kinds=options.crash_kinds,  # type: ignore[arg-type]
                    determinism=False,  # I10's twins re-run identical code: no new arcs
                    progress=progress.advance,
                    fork_from=0,  # every schedule in a forked child: its exit hook measures it
                )
                parent = _harvest(cov)
                children = _read_children(sink)
            finally:
                _SINK = None
                _remove_tree(sink)
            raw.arcs |= parent
            _record_sweep(raw, scenario, store, result, parent, children)
            progress.finish(f"{result.schedules} schedules, {len(children)} measured children")


def _record_sweep(
    raw: Raw,
    scenario: Any,
    store: str,
    result: Any,
    parent: set[Arc],
    children: list[tuple[str, set[Arc]]],
) -> None:
    """Corpus candidates of one sweep: its fault-free runs (credited with ``parent``) and each
    measured child (credited with what it reached beyond ``parent``)."""
    labels: list[str] = result.labels
    regional = region_filter()
    base = _schedule_text(result.base_points)
    fault_free = [{"schedule": "none", "fault_free": True, "labels": []}]
    if base != "none":
        fault_free.append(
            {"schedule": base, "fault_free": True, "labels": _labels_of(base, labels)}
        )
    if scenario.timed_crashes:  # the forking run keeps the scenario's own timed crashes
        fault_free.append(
            {"schedule": base, "fault_free": False, "labels": _labels_of(base, labels)}
        )
    cost = len(labels)
    raw.cases.append(
        Case(scenario.name, store, fault_free, regional(parent), cost * len(fault_free))
    )
    for schedule, arcs in children:
        raw.arcs |= arcs
        own = regional(arcs - parent)
        if own:
            run = {
                "schedule": schedule,
                "fault_free": False,
                "labels": _labels_of(schedule, labels),
            }
            raw.cases.append(Case(scenario.name, store, [run], own, cost))
    raw.sweeps.append(
        {
            "scenario": scenario.name,
            "store": store,
            "schedules": result.schedules,
            "measured_children": len(children),
            "verdicts": dict(result.verdicts),
        }
    )
    if result.reference_failed:
        raw.notes.append(f"{scenario.name}[{store}]: its fault-free run fails; nothing was swept")


def _schedule_text(points: list[Any]) -> str:
    from sim.world.faults import Schedule

    return Schedule(tuple(points)).text()


def _labels_of(schedule: str, labels: list[str]) -> list[str]:
    """The boundary label of each crash point of ``schedule`` in the traced run (``?`` beyond)."""
    from sim.world.faults import parse_schedule

    return [
        labels[p.index] if p.index < len(labels) else "?" for p in parse_schedule(schedule).points
    ]


def _read_children(sink: str) -> list[tuple[str, set[Arc]]]:
    """Every child's (schedule, arcs), in schedule order (not by process id: the corpus built
    from them must not depend on the order the children happened to get their pids)."""
    out = []
    for name in os.listdir(sink):
        if name.startswith("child-") and name.endswith(".json"):
            doc = json.loads(Path(sink, name).read_text(encoding="utf-8"))
            out.append((doc["schedule"], _arcs_from(doc["arcs"])))
    return sorted(out, key=lambda child: _schedule_order(child[0]))


def _schedule_order(text: str) -> list[tuple[int, int, str]]:
    from sim.world.faults import parse_schedule

    return [(p.index, p.when == "after", p.kind) for p in parse_schedule(text).points]


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _measure_fuzz(options: Options, cov: Any, raw: Raw, progress: Any) -> None:
    """The schedule fuzzer on every chosen scenario, and the world machine when no scenario was
    named, on the file store if it is chosen (the fuzzer's default), else SQLite."""
    from hypothesis.configuration import set_hypothesis_home_dir

    from sim.explore.fuzz import fuzz_machine, fuzz_schedules
    from sim.world import tempdirs
    from sim.world.scenario import load_scenario

    store = "file" if "file" in options.stores else options.stores[0]
    home = tempdirs.make("reach")
    set_hypothesis_home_dir(home)
    findings = 0
    runs: list[tuple[str, Callable[..., Any]]] = [
        (f"fuzz {name}[{store}]", partial(fuzz_schedules, load_scenario(name)))
        for name in _scenario_names(options)
    ]
    if not options.scenarios:
        runs.append((f"fuzz world machine[{store}]", fuzz_machine))
    try:
        for title, fuzzer in runs:
            progress.start(title)
            raw.arcs |= _harvest(cov)
            finding = fuzzer(
                store=store,
                examples=options.fuzz_examples,
                fuzz_seed=options.seed,
                on_example=lambda: progress.advance(1),
            )
            findings += finding is not None
            raw.fuzz_arcs |= _harvest(cov)
            progress.finish("failure found (see durable-sim fuzz)" if finding else "done")
    finally:
        _remove_tree(home)
    raw.arcs |= raw.fuzz_arcs
    if findings:
        raw.notes.append(
            f"the fuzzer found {findings} failing case(s); reach does not judge them: run "
            "durable-sim fuzz"
        )


def load_corpus(path: str) -> dict[str, Any]:
    """A reach corpus file, checked enough that a bad one is one line (``ReachError``)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReachError(f"cannot read reach corpus {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ReachError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(doc, dict) or doc.get("schema_version") != CORPUS_SCHEMA_VERSION:
        raise ReachError(f"{path}: not a reach corpus of schema version {CORPUS_SCHEMA_VERSION}")
    if not isinstance(doc.get("cases"), list):
        raise ReachError(f"{path}: a reach corpus needs a list of cases")
    return doc


def _replay_corpus(options: Options, cov: Any, raw: Raw, progress: Any) -> None:
    """Replay every run of every corpus case (no forking: one ``run_scenario`` each) and check
    that each crash point still lands on the boundary it was chosen for."""
    from sim.run.runner import run_scenario
    from sim.world.faults import parse_schedule
    from sim.world.scenario import load_scenario

    assert options.corpus is not None
    doc = load_corpus(options.corpus)
    progress.start(f"replay {options.corpus}")
    for case in doc["cases"]:
        scenario = load_scenario(case["scenario"])
        for run in case["runs"]:
            schedule = parse_schedule(run["schedule"])
            chosen = scenario.without_faults() if run["fault_free"] else scenario
            result = run_scenario(chosen, seed=doc["seed"], store=case["store"], schedule=schedule)
            landed = [c.label for c in result.crashes]
            if landed != run["labels"]:
                raw.notes.append(
                    f"boundary numbering changed: {case['scenario']}[{case['store']}] "
                    f"{run['schedule']} was chosen at {run['labels']} but crashes at {landed}; "
                    f"regenerate the corpus: {REGENERATE}"
                )
            progress.advance(1)
    raw.arcs |= _harvest(cov)
    progress.finish(f"{len(doc['cases'])} cases")


# -- regions and analysis ------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """A recovery region as found in the source: its name, file and the lines it spans (its own
    body and the bodies of the functions nested in it)."""

    name: str
    path: str
    lines: frozenset[int]


def _functions(tree: ast.AST) -> Iterable[tuple[str, ast.AST]]:
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
    trees: dict[str, dict[str, ast.AST]] = {}
    out = []
    for name in names:
        path, _, qualname = name.partition(":")
        if path not in trees:
            source = (ROOT / path).read_text(encoding="utf-8")
            trees[path] = dict(_functions(ast.parse(source)))
        node = trees[path].get(qualname)
        if node is None:
            raise ReachError(
                f"recovery region {name} is not in the source any more: update "
                "RECOVERY_REGIONS in sim/explore/reach.py"
            )
        first = node.body[0].lineno  # type: ignore[attr-defined]
        last = node.end_lineno or first  # type: ignore[attr-defined]
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


def _coverage_report(arcs: set[Arc]) -> dict[str, Any]:
    """coverage.py's JSON report (format 3) of ``arcs`` over every file of ``durable/``: the
    possible arcs come from its static analysis, so a never-imported file counts as 0%."""
    import coverage

    _quiet_coverage()
    cov = coverage.Coverage(
        data_file=None, branch=True, source=[str(DURABLE)], config_file=False, auto_data=False
    )
    data = cov.get_data()
    by_file: dict[str, list[tuple[int, int]]] = {}
    for path, a, b in arcs:
        by_file.setdefault(str(ROOT / path), []).append((a, b))
    for path in sorted(DURABLE.rglob("*.py")):
        by_file.setdefault(str(path), [])
    data.add_arcs(by_file)
    with tempfile.TemporaryDirectory(prefix="durable-sim-reach-") as tmp:
        out = Path(tmp, "coverage.json")
        cov.json_report(outfile=str(out))
        report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return {
        rel: body
        for filename, body in report["files"].items()
        if (rel := _relative(os.path.abspath(filename))) is not None  # relative to the cwd
    }


@dataclass
class Branch:
    """One recovery branch (arc) and what it is."""

    path: str
    source: int
    target: int  # negative: leaves the code object starting at line -target
    region: str
    source_text: str
    target_text: str
    allowed: str | None = None  # the reason, if it is allowed to stay unreached

    def key(self) -> str:
        return f"{self.path}:{self.source}->{self.target_label()}"

    def target_label(self) -> str:
        return str(self.target) if self.target > 0 else "exit"

    def to_json(self) -> dict[str, Any]:
        return {
            "branch": self.key(),
            "function": self.region.partition(":")[2],
            "from": self.source_text,
            "to": self.target_text,
            "allowed": self.allowed,
        }


def analyze(raw: Raw) -> dict[str, Any]:
    """Per-file figures of ``durable/``, the recovery branches nothing reached (allowed or not),
    stale allowances, and the reach corpus the measurement supports."""
    files = _coverage_report(raw.arcs)
    regions = find_regions()
    sources = {r.path: _source_lines(r.path) for r in regions}
    missing: list[Branch] = []
    reached: list[Branch] = []
    unreached_lines: list[str] = []
    used: set[Allowance] = set()
    for region in regions:
        body = files[region.path]
        lines = sources[region.path]
        for bucket, key in ((missing, "missing_branches"), (reached, "executed_branches")):
            for a, b in body.get(key, []):
                if a in region.lines and _innermost(regions, region.path, a) is region:
                    branch = _branch(region, a, b, lines)
                    allowance = _allowance(branch)
                    if allowance is not None:
                        used.add(allowance)
                        branch.allowed = allowance.reason
                    bucket.append(branch)
        for line in body.get("missing_lines", []):
            if line in region.lines and _innermost(regions, region.path, line) is region:
                unreached_lines.append(f"{region.path}:{line} ({region.name.partition(':')[2]})")
    stale = [a for a in ALLOWED_UNREACHED if a not in used]
    failing = [b for b in missing if b.allowed is None]
    return {
        "files": _file_figures(files),
        "totals": _totals(files),
        "recovery": {
            "regions": len(regions),
            "branches": len(missing) + len(reached),
            "reached": len(reached),
            "unreached": len(missing),
            "unreached_allowed": len(missing) - len(failing),
            "unreached_failing": len(failing),
        },
        "unreached": [b.to_json() for b in sorted(missing, key=_order)],
        "unreached_lines": unreached_lines,
        "reached_allowed": [b.to_json() for b in reached if b.allowed is not None],
        "stale_allowances": [f"{a.region}: {a.source} -> {a.target}" for a in stale],
        "reached_keys": sorted(b.key() for b in reached),
        "measurement": {"sweeps": raw.sweeps, "notes": raw.notes, "wall_s": round(raw.wall_s, 1)},
    }


def _order(branch: Branch) -> tuple[str, int, int]:
    return (branch.path, branch.source, branch.target)


def _innermost(regions: list[Region], path: str, line: int) -> Region | None:
    """The smallest region holding ``line``: a nested region listed on its own, or a method of a
    listed class, reports the branch under its own name."""
    holding = [r for r in regions if r.path == path and line in r.lines]
    return min(holding, key=lambda r: len(r.lines), default=None)


def _source_lines(path: str) -> list[str]:
    return (ROOT / path).read_text(encoding="utf-8").splitlines()


def _branch(region: Region, a: int, b: int, lines: list[str]) -> Branch:
    def text(n: int) -> str:
        return lines[n - 1].strip() if 0 < n <= len(lines) else "?"

    return Branch(region.path, a, b, region.name, text(a), text(b) if b > 0 else "exit")


def _allowance(branch: Branch) -> Allowance | None:
    for allowance in ALLOWED_UNREACHED:
        if (
            allowance.region == branch.region
            and allowance.source == branch.source_text
            and allowance.target == branch.target_text
        ):
            return allowance
    return None


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    lines = summary["num_statements"]
    branches = summary.get("num_branches", 0)
    return {
        "lines": {"covered": summary["covered_lines"], "total": lines},
        "branches": {"covered": summary.get("covered_branches", 0), "total": branches},
        "lines_percent": round(100.0 * summary["covered_lines"] / lines, 1) if lines else 100.0,
        "branches_percent": (
            round(100.0 * summary.get("covered_branches", 0) / branches, 1) if branches else 100.0
        ),
    }


def _file_figures(files: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"file": path, **_figures(files[path]["summary"])} for path in sorted(files)]


def _totals(files: dict[str, Any]) -> dict[str, Any]:
    keys = ("num_statements", "covered_lines", "num_branches", "covered_branches")
    total = {k: sum(body["summary"].get(k, 0) for body in files.values()) for k in keys}
    return _figures(total)


# -- the reach corpus ----------------------------------------------------------------------------


def build_corpus(
    raw: Raw,
    report: dict[str, Any],
    *,
    seed: int,
    translate: Callable[[set[Arc]], set[Arc]] | None = None,
) -> dict[str, Any]:
    """A greedy set cover of the reached recovery branches by the measurement's corpus
    candidates. Branches no candidate is credited with (reached only by the fuzzer, or only in
    the parent between sweeps) are listed in ``uncovered``: the corpus test will report them.
    ``translate`` maps a case's raw arcs to the report's (coverage.py's mapping by default)."""
    wanted = set(report["reached_keys"])
    allowed = {b["branch"] for b in report["reached_allowed"]}
    wanted -= allowed
    translate = translate or _translator()
    sets = [(case, {_key(arc) for arc in translate(case.arcs)} & wanted) for case in raw.cases]
    chosen: list[tuple[Case, set[str]]] = []
    left = set(wanted)
    while left:
        # The most new branches; among equals the cheapest case (the first one on a tie: the
        # candidates come in sweep order, so the corpus is the same on every run).
        case, gain = max(
            sets, key=lambda cs: (len(cs[1] & left), -cs[0].cost), default=(None, set())
        )
        gain = gain & left
        if case is None or not gain:
            break
        chosen.append((case, gain))
        left -= gain
    return {
        "schema_version": CORPUS_SCHEMA_VERSION,
        "generated_by": REGENERATE,
        "seed": seed,
        "cases": [
            {"scenario": c.scenario, "store": c.store, "runs": c.runs, "reaches": sorted(g)}
            for c, g in chosen
        ],
        "uncovered": sorted(left),
    }


def _translator() -> Callable[[set[Arc]], set[Arc]]:
    """Raw arcs as coverage.py reports them: an arc into or out of a statement spanning several
    lines is reported from and to its first line (``FileReporter.translate_arcs``), so a case's
    raw arcs must be translated before they are compared with the report's branches."""
    import coverage
    from coverage.python import PythonFileReporter

    cov = coverage.Coverage(data_file=None, branch=True, config_file=False, auto_data=False)
    reporters: dict[str, Any] = {}

    def translate(arcs: set[Arc]) -> set[Arc]:
        by_file: dict[str, list[tuple[int, int]]] = {}
        for path, a, b in arcs:
            by_file.setdefault(path, []).append((a, b))
        out: set[Arc] = set()
        for path, pairs in by_file.items():
            if path not in reporters:
                reporters[path] = PythonFileReporter(str(ROOT / path), coverage=cov)
            out.update((path, a, b) for a, b in reporters[path].translate_arcs(pairs))
        return out

    return translate


def _key(arc: Arc) -> str:
    path, a, b = arc
    return f"{path}:{a}->{b if b > 0 else 'exit'}"


# -- running it ----------------------------------------------------------------------------------


def run_measurement(options: Options) -> Raw:
    """Measure in a fresh interpreter (coverage must start before ``durable`` is imported, or its
    module-level lines would count as missed); stderr is shared, for the progress lines."""
    require_coverage()
    with tempfile.TemporaryDirectory(prefix="durable-sim-reach-") as tmp:
        out = Path(tmp, "raw.json")
        command = [
            sys.executable,
            "-m",
            "sim.explore.reach",
            json.dumps(options.to_json()),
            str(out),
        ]
        child = subprocess.Popen(command, cwd=str(ROOT), stdout=subprocess.DEVNULL)
        try:
            code = child.wait()
        except BaseException:
            child.terminate()
            child.wait()
            raise
        if code != 0 or not out.exists():
            problem = Path(tmp, "error.txt")
            why = problem.read_text(encoding="utf-8") if problem.exists() else f"exit {code}"
            raise ReachError(f"the measuring interpreter failed: {why.strip()}")
        return Raw.from_json(json.loads(out.read_text(encoding="utf-8")))


def _worker(argv: list[str]) -> int:
    """``python -m sim.explore.reach OPTIONS_JSON OUT``: start coverage, then import and run."""
    options = Options.from_json(json.loads(argv[0]))
    out = Path(argv[1])
    cov = _start_coverage()
    try:
        raw = measure(options, cov)
    except (ReachError, ValueError) as exc:  # a scenario or corpus error: one line upstairs
        cov.stop()
        out.with_name("error.txt").write_text(f"{type(exc).__name__}: {exc}", encoding="utf-8")
        return 2
    cov.stop()
    out.write_text(json.dumps(raw.to_json()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    # The importable module: its hook is the one registered.
    from sim.explore import reach as _reach

    sys.exit(_reach._worker(sys.argv[1:]))
