"""I23's repairs (sim.judgement.oracles.damage_table): a recovery that goes on past a log tail
which a checkpoint or a later commit proves acknowledged copies it to a quarantine file, durably,
before it cuts it, and sets the proving checkpoints aside instead of deleting them. A power loss
without fsync leaves such tails (``sim.world.storage_faults.power_rows``), and no other oracle
sees a repair: the mode's promise lets the power take those commits."""

from __future__ import annotations

import pytest

from durable.store.file import FileStore
from sim.explore.mutants import mutant_named, planted
from sim.judgement.oracles import check
from sim.judgement.oracles import damage_table as damage_table_mod
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import parse_schedule
from sim.world.scenario import load_scenario
from sim.world.storage_faults import TableRow

SCENARIO = "weak_durability_nofsync"  # FileStore(fsync=False)
LOG = "/store/c1/events.jsonl"
#: The power loss after the lease's release (``store.lease.release#1``): its lease write synced
#: the directory, as the renewal after checkpoint #24 had, so the names of checkpoints #24 and
#: #29 survive while the unsynced log loses commits; enumerated tear 1 cuts the log at its
#: durable end, under both.
UNDER_CHECKPOINT = "53:after:power~1"
#: The power loss at the release's first file write (its lease file opened, the directory not
#: yet synced): a seeded draw there damages a letter of record #16, before later commits.
BEFORE_LATER_COMMITS = "54:after:power"
PROOF = ("checkpoint-000000000024.json", "checkpoint-000000000029.json")


def _run(schedule: str) -> tuple[RunResult, RunResult]:
    scenario = load_scenario(SCENARIO)
    reference = run_scenario(scenario.without_faults(), seed=0, store="file")
    result = run_scenario(scenario, seed=0, store="file", schedule=parse_schedule(schedule))
    return result, reference


def _labels(result: RunResult, head: str) -> list[str]:
    return [b.label for b in result.trace.boundaries if b.label.startswith(head)]


def test_a_power_loss_records_the_tails_a_checkpoint_or_a_later_commit_proves() -> None:
    """The record says what the recovery must copy (from the end of the committed prefix) and
    which checkpoints prove it; the unbroken store copies, syncs, then cuts, and passes."""
    result, reference = _run(UNDER_CHECKPOINT)
    ((path, row),) = result.trace.crashes[0].damage_rows.items()
    assert path == LOG and row is not None
    assert (row.kind, row.conversation, row.beyond) == (
        "damaged-last-commit-under-checkpoint",
        "c1",
        PROOF,
    )
    assert row.offset > 0 and row.first_lost > 1
    copies = _labels(result, "fs.rename:c1/quarantine-")
    assert copies[0] == f"fs.rename:c1/quarantine-0001.events-from-byte-{row.offset}.jsonl"
    assert _labels(result, "fs.truncate:c1/events.jsonl")
    assert check(result, reference) == []
    result, reference = _run(BEFORE_LATER_COMMITS)
    ((_, row),) = result.trace.crashes[0].damage_rows.items()
    assert row is not None and row.kind == "damaged-earlier-commit"
    assert check(result, reference) == []


def test_a_torn_tail_nothing_proves_has_no_record() -> None:
    """A power loss before any checkpoint: the tail is a crash's leftover, cut without a copy."""
    result, reference = _run("20:after:power")
    assert [c.damage_rows for c in result.trace.crashes] == [{}]
    assert check(result, reference) == []


@pytest.mark.parametrize("schedule", [UNDER_CHECKPOINT, BEFORE_LATER_COMMITS])
def test_a_tail_cut_without_its_copy_is_caught_by_the_repairs_alone(
    schedule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tail-cut-without-copy``: every other oracle passes (the mode allows the loss); with
    the repairs check switched off, so does I23."""
    mutant = mutant_named("tail-cut-without-copy")
    with planted(mutant):
        result, reference = _run(schedule)
    assert not _labels(result, "fs.rename:c1/quarantine-0001.events")
    violations = check(result, reference)
    assert [v.invariant for v in violations] == ["I23"]
    assert "without a quarantine copy" in violations[0].explanation
    assert violations[0].actual == "no copy"
    monkeypatch.setattr(damage_table_mod, "_repairs_kept", lambda result: [])
    assert check(result, reference) == []


def test_a_copy_that_is_not_made_durable_is_no_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quarantine file renamed into place without its directory synced: a power loss could
    undo the rename after the cut took the only other copy."""
    original = FileStore._atomic_write

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        quarantine = name.startswith("quarantine-")
        original(self, directory, name, data, durable=durable and not quarantine)

    with monkeypatch.context() as mp:
        mp.setattr(FileStore, "_atomic_write", _atomic_write)
        result, reference = _run(UNDER_CHECKPOINT)
    (violation,) = [v for v in check(result, reference) if v.invariant == "I23"]
    assert violation.actual == "a copy not made durable"


def test_a_checkpoint_deleted_instead_of_set_aside_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint that proves the lost commits is the one record of them: a recovery that
    unlinks it instead of renaming it aside passes every other oracle."""

    def _set_aside(self: FileStore, directory: str, names: list[str], why: str) -> None:
        self._unlink_all(directory, names)

    with monkeypatch.context() as mp:
        mp.setattr(FileStore, "_set_aside", _set_aside)
        result, reference = _run(UNDER_CHECKPOINT)
    assert f"fs.unlink:c1/{PROOF[0]}" in _labels(result, "fs.unlink:")
    violations = check(result, reference)
    assert [v.invariant for v in violations] == ["I23"]
    assert "deleted a checkpoint" in violations[0].explanation
    monkeypatch.setattr(damage_table_mod, "_set_aside_not_deleted", lambda *args: [])
    assert check(result, reference) == []


def test_a_record_a_later_power_loss_supersedes_is_not_held_against_the_next_cut() -> None:
    """Two power losses: each record is judged on the recovery before the next crash that
    damages (which makes its own records); the unbroken store passes both."""
    # The second strikes the first recovery once it has written its quarantine copy of the
    # tail, before it syncs and renames the copy or cuts the log.
    result, reference = _run(f"{UNDER_CHECKPOINT},66:after:power")
    first, _ = result.trace.crashes
    assert first.damage_rows
    row = first.damage_rows[LOG]
    assert row is not None and row == TableRow(
        "damaged-last-commit-under-checkpoint",
        row.first_lost,
        "c1",
        offset=row.offset,
        beyond=PROOF,
    )
    assert [v for v in check(result, reference) if v.invariant == "I23"] == []
