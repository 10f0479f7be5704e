"""I23, the damage table kept (sim.judgement.oracles.damage_table): every storage fault of a sweep
maps to a record, the store answers as the record says, and the oracle is what tells a store
that skips a damaged checkpoint from one that refuses it."""

from __future__ import annotations

from typing import Any

import pytest

from durable.store.file import FileStore
from sim.explore.mutants import mutant_named, planted
from sim.judgement import oracles
from sim.judgement.oracles import UnmappedFault, check
from sim.judgement.oracles import damage_table as damage_table_mod
from sim.judgement.oracles import facts as facts_mod
from sim.run.runner import RunResult, run_scenario
from sim.world import injector as injector_mod
from sim.world.faults import CrashKind, CrashPoint, Schedule, When, parse_schedule, tries_kind
from sim.world.scenario import load_scenario
from sim.world.storage_faults import TableRow


def _run(name: str, schedule: str) -> tuple[RunResult, RunResult]:
    scenario = load_scenario(name)
    reference = run_scenario(scenario.without_faults(), seed=0, store="file")
    return run_scenario(
        scenario, seed=0, store="file", schedule=parse_schedule(schedule)
    ), reference


def test_every_storage_fault_of_a_sweep_has_its_record_and_is_kept() -> None:
    """The depth-1 storage sweep of one scenario: every fault maps to a record (the aimed ones
    among them), and the unbroken store answers each as its record says."""
    scenario = load_scenario("read_edit_answer")
    reference = run_scenario(scenario.without_faults(), seed=0, store="file")
    kinds: set[str] = set()
    for boundary in reference.trace.boundaries:
        if not tries_kind(CrashKind.STORAGE, When.AFTER, boundary.label):
            continue
        point = CrashPoint(boundary.index, When.AFTER, CrashKind.STORAGE)
        result = run_scenario(scenario, seed=0, store="file", schedule=Schedule.of(point))
        (crash,) = result.trace.crashes
        assert crash.fs_outcome and all(crash.damage_rows.values()), crash
        kinds |= {row.kind for row in crash.damage_rows.values() if row is not None}
        assert check(result, reference) == [], point.text()
    assert {"log-cut-under-checkpoint", "log-missing", "damaged-last-commit"} <= kinds
    assert {"damaged-earlier-commit", "checkpoint-unparseable", "lease-garbage"} <= kinds


def test_a_skipped_unparseable_checkpoint_is_caught_by_the_table_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``fsync=True`` a store that skips an unparseable checkpoint recovers everything:
    only I23 sees it, and with I23 switched off the schedule passes."""
    mutant = mutant_named("unparseable-checkpoint-skipped")
    with planted(mutant):
        result, reference = _run(mutant.scenario, mutant.first_kill or "")
    violations = check(result, reference)
    assert [v.invariant for v in violations] == ["I23"]
    assert "went on past damage" in violations[0].explanation
    monkeypatch.setattr(oracles, "check_damage_table", lambda result: [])
    assert check(result, reference) == []


def test_a_refusal_the_table_does_not_give_is_caught() -> None:
    """A checkpoint that fails its checksum is skipped in every mode; refusing it is wrong."""
    original = FileStore._load_checkpoints

    def refusing(self: FileStore, conversation_id: str) -> list[Any]:
        checkpoints = original(self, conversation_id)
        if any(not cp.verify() for cp in checkpoints):
            from durable.store.base import CorruptStore

            raise CorruptStore(f"{self._dir(conversation_id)}: a checkpoint fails its checksum")
        return checkpoints

    mp = pytest.MonkeyPatch()
    mp.setattr(FileStore, "_load_checkpoints", refusing)
    try:
        # After the lease's release a storage fault breaks the checksum of the older of the
        # scenario's two checkpoints.
        result, reference = _run("abort_mid_tool", "67:after:storage")
    finally:
        mp.undo()
    ((_, row),) = result.trace.crashes[0].damage_rows.items()
    assert row is not None and row.kind == "checkpoint-fails-checksum"
    assert "the store refused damage its damage table says it recovers from" in [
        v.explanation for v in check(result, reference) if v.invariant == "I23"
    ]


def test_the_table_allows_the_loss_of_a_damaged_last_commit_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bit flipped in the log's last synced write reads as a torn write: the store cuts the
    commit, and the others judge the run as outside the store's promise -- without that
    allowance I12 reports the acknowledged submission the cut took."""
    # After the lease renewal that follows the commit accepting a steer: that commit is the
    # log's last synced write, and the client already holds its acknowledgement.
    result, reference = _run("steer_mid_tools", "27:after:storage")
    ((_, row),) = result.trace.crashes[0].damage_rows.items()
    assert row is not None and row.kind == "damaged-last-commit"
    assert check(result, reference) == []
    monkeypatch.setattr(facts_mod, "table_allows_loss", lambda result: False)
    assert "I12" in {v.invariant for v in check(result, reference)}


def test_a_recovery_may_not_lose_more_than_the_damage() -> None:
    """The loss the table allows starts at the damaged commit: a store that cuts one commit
    more than the torn tail (and sets aside the checkpoints that would prove it) loses an
    acknowledged commit from before the damage."""
    original = FileStore._cut_tail

    def cut_more(self: FileStore, conversation_id: str, path: str, scan: Any) -> None:
        original(self, conversation_id, path, scan)
        last = [i for i, r in enumerate(scan.records) if r.batch == scan.records[-1].batch]
        if last and last[0] > 0:  # the commit before the damaged one, and what proves it
            self._fs.truncate(path, scan.offsets[last[0]])
            self._set_aside_future_checkpoints(conversation_id, scan.records[last[0] - 1].sequence)

    mp = pytest.MonkeyPatch()
    mp.setattr(FileStore, "_cut_tail", cut_more)
    try:
        # Right after commit #14, the log's last synced write: the commit before it is
        # acknowledged, and checkpoint #27 would prove it.
        result, reference = _run("budget_exhausted", "99:after:storage")
    finally:
        mp.undo()
    assert "a recovery after damage lost an acknowledged commit from before the damage" in [
        v.explanation for v in check(result, reference) if v.invariant == "I23"
    ]


def test_an_unmapped_fault_is_a_harness_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(injector_mod, "table_row", lambda *args: None)
    result, reference = _run("read_edit_answer", "11:after:storage")
    with pytest.raises(UnmappedFault, match="maps to no damage record"):
        check(result, reference)
    assert damage_table_mod.UnmappedFault is UnmappedFault


def test_a_second_fault_on_damaged_data_is_made_not_raised() -> None:
    """Placing a fault reads the log as it was; after a first fault that log may hold damage.
    The second fault is made and recorded -- read as the store's scan reads it: the first
    fault's damaged last line is a tail that proves nothing, the valid records before it are
    later commits than the second fault's -- the runtime never sees the harness fail, and I23
    judges only a schedule's single fault."""
    result, reference = _run("idempotent_payment", "25:after:storage,31:after:storage")
    first, second = result.trace.crashes
    assert first.damage_rows["/store/c1/events.jsonl"] == TableRow("damaged-last-commit", 11)
    # Its bytes from the first line on are what a recovery going on past it must copy first.
    assert list(second.damage_rows.values()) == [TableRow("damaged-earlier-commit", 1, offset=0)]
    assert result.errors.runtime_error is None and result.storage.refusal is not None
    assert check(result, reference) == []


def test_a_later_power_loss_is_not_blamed_for_what_the_damage_took() -> None:
    """A damaged last commit cut as a torn tail, then a power loss with fsync: the commit the
    damage took is I23's to judge, not a power loss's "commit lost from the middle" (I12)."""
    result, reference = _run(
        "model_overloaded", "7:after:storage,11:before:process,24:before:power"
    )
    ((_, row),) = result.trace.crashes[0].damage_rows.items()
    assert row is not None and row.kind == "damaged-last-commit"
    assert check(result, reference) == []
