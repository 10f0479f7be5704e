"""I23 on SQLite (sim.judgement.oracles.damage_table): every storage fault a sweep makes on
SQLite's files maps to a record -- what the fault did to the store's rows, read back through
SQLite (sim.world.storage_faults.aimed_sqlite_fault) -- and ``SQLiteStore`` answers each as its
record says; a store that reads past damage, or loses more than the damage, is caught."""

from __future__ import annotations

from typing import Any

import pytest

from durable.store import base as base_mod
from durable.store import sql as sql_store_mod
from durable.store.base import Checkpoint
from sim.explore.mutants import mutant_named, planted
from sim.judgement import oracles
from sim.judgement.oracles import check
from sim.judgement.oracles import damage_table as damage_table_mod
from sim.run.runner import RunResult, run_scenario
from sim.world import storage_faults as storage_faults_mod
from sim.world.faults import CrashKind, CrashPoint, Schedule, When, parse_schedule, tries_kind
from sim.world.scenario import load_scenario
from sim.world.storage_faults import TORN_WAL, TableRow


def _run(name: str, schedule: str) -> tuple[RunResult, RunResult]:
    scenario = load_scenario(name)
    reference = run_scenario(scenario.without_faults(), seed=0, store="sqlite")
    result = run_scenario(scenario, seed=0, store="sqlite", schedule=parse_schedule(schedule))
    return result, reference


def _row(result: RunResult) -> TableRow:
    ((_, row),) = result.trace.crashes[0].damage_rows.items()
    assert row is not None
    return row


def test_every_storage_fault_of_a_sqlite_sweep_has_its_record_and_is_kept() -> None:
    """The depth-1 storage sweep of one scenario on SQLite: every fault made maps to a record
    (the log's last transaction dropped, a record's row or a checkpoint damaged, the database
    unreadable), and the unbroken store answers each as its record says."""
    scenario = load_scenario("idempotent_payment")
    reference = run_scenario(scenario.without_faults(), seed=0, store="sqlite")
    kinds: set[str] = set()
    files: set[str] = set()
    for boundary in reference.trace.boundaries:
        if not tries_kind(CrashKind.STORAGE, When.AFTER, boundary.label):
            continue
        point = CrashPoint(boundary.index, When.AFTER, CrashKind.STORAGE)
        result = run_scenario(scenario, seed=0, store="sqlite", schedule=Schedule.of(point))
        (crash,) = result.trace.crashes
        assert all(crash.damage_rows.values())
        assert crash.damage_rows.keys() == crash.fs_outcome.keys()
        kinds |= {row.kind for row in crash.damage_rows.values() if row is not None}
        files |= {path.rsplit("/", 1)[-1] for path in crash.fs_outcome}
        assert check(result, reference) == [], point.text()
    assert files == {"store.sqlite", "store.sqlite-wal"}
    assert {TORN_WAL, "newest-checkpoint-missing", "sqlite-header-damaged"} <= kinds
    assert {"damaged-checkpoint-commit", "checkpoint-fails-checksum"} <= kinds


def test_a_row_read_past_is_caught_by_the_table() -> None:
    """``sqlite-damaged-row-as-end``: the damaged row is where the store's log ends. Its next
    append then meets the rows it did not read (I0), but only I23 says why."""
    mutant = mutant_named("sqlite-damaged-row-as-end")
    with planted(mutant):
        result, reference = _run(mutant.scenario, mutant.first_kill or "")
    assert _row(result).kind == "damaged-checkpoint-commit"
    violations = check(result, reference)
    assert violations[0].invariant == "I23"
    assert "went on past damage" in violations[0].explanation


def test_a_skipped_unparseable_checkpoint_row_is_caught_by_the_table_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bit flipped in a checkpoint row's text so that it no longer parses: a store that skips
    the row recovers everything from the older checkpoint or the log; only I23 -- SQLite writes
    a row whole, so the table refuses one -- sees it, and with I23 off the schedule passes."""
    parsed = base_mod.parsed_checkpoints  # what the sql module calls, until patched below

    def skipping(place: str, conversation_id: str, rows: list[tuple[int, str]]) -> list[Any]:
        kept = []
        for through, text in rows:
            try:
                Checkpoint.model_validate_json(text)
            except ValueError:
                continue
            kept.append((through, text))
        return parsed(place, conversation_id, kept)

    with monkeypatch.context() as mp:
        mp.setattr(sql_store_mod, "parsed_checkpoints", skipping)
        mp.setattr(base_mod, "parsed_checkpoints", skipping)  # the acquisition's check too
        result, reference = _run("model_error_then_message", "73:after:storage")
    assert _row(result).kind == "checkpoint-unparseable"
    violations = check(result, reference)
    assert [v.invariant for v in violations] == ["I23"]
    monkeypatch.setattr(oracles, "check_damage_table", lambda result: [])
    assert check(result, reference) == []


def test_a_torn_log_transaction_loses_that_commit_only() -> None:
    """A frame of the log's last transaction damaged: SQLite's recovery ends the log before it,
    as at a torn write, and the commit the store had just accepted is lost -- what the record
    allows (the runtime had not answered anyone yet, and does the work again) -- and no other:
    every commit accepted before it is in the final log."""
    result, reference = _run("idempotent_payment", "24:after:storage")
    row = _row(result)
    assert (row.kind, row.conversation) == (TORN_WAL, "c1")
    assert damage_table_mod.table_allows_loss(result)
    final = {r.checksum for r in result.durable.records}
    accepted = {a.boundary for a in result.leases.accepted}
    commits = [(i, recs) for i, recs in result.durable.commits if i in accepted and i <= 24]
    lost = [recs[0].sequence for _, recs in commits if recs[0].checksum not in final]
    assert lost == [row.first_lost]
    assert check(result, reference) == []


def test_a_recovery_may_not_lose_more_than_the_torn_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log cut one transaction earlier than its record says (two commits lost, the record
    naming the last): the acknowledged commit before the damage is lost, and I23 says so -- it
    reads the conversation from the record, since SQLite's one database file names none."""
    aims = storage_faults_mod._sqlite_aims

    def two_transactions(fs: Any, database: str, before: Any, conversation: str) -> Any:
        found = aims(fs, database, before, conversation)
        frames = storage_faults_mod._readers()[1](fs.read(f"{database}-wal"))
        assert frames is not None and len(frames.transactions) >= 2
        start = frames.starts[frames.transactions[-2][0]]
        cut = storage_faults_mod._Fault(f"{database}-wal", "cut-at-frame", cut=start)
        return {aim: [cut] if aim == "frame-cut" else [] for aim in found}

    def last_only(before: Any, after: Any, conversation: str) -> TableRow | None:
        events = [r for r in before.tables if r[:2] == ("events", conversation)]
        last = storage_faults_mod._batches(before.tables, conversation)[max(r[2] for r in events)]
        return TableRow(TORN_WAL, last[1], conversation)

    with monkeypatch.context() as mp:
        mp.setattr(storage_faults_mod, "_sqlite_aims", two_transactions)
        mp.setattr(storage_faults_mod, "_rolled_back", last_only)
        result, reference = _run("idempotent_payment", "24:after:storage")
    assert _row(result).kind == TORN_WAL
    explanations = [v.explanation for v in check(result, reference) if v.invariant == "I23"]
    assert explanations == [
        "a recovery after damage lost an acknowledged commit from before the damage"
    ]
    monkeypatch.setattr(damage_table_mod, "_lost_before_damage", lambda *args: [])
    assert [v for v in check(result, reference) if v.invariant == "I23"] == []
