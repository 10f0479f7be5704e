"""SQLite's two durability modes under the simulator: ``synchronous=FULL`` promises that nothing
acknowledged is lost to a power loss, ``NORMAL`` (a scenario with ``fsync: false``) only that a
power loss takes a suffix of the acknowledged commits; and the store's checkpoints (the log copied
into the database, then truncated) are crossed by the bundled scenarios."""

from __future__ import annotations

from sim.judgement.oracles import check
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind


def _lost(result: RunResult) -> int:
    """How many acknowledged commits the final store no longer holds."""
    final = {r.checksum for r in result.durable.records}
    accepted = {a.boundary for a in result.leases.accepted}
    return sum(
        1
        for index, records in result.durable.commits
        if index in accepted and records and records[0].checksum not in final
    )


def test_the_store_kind_decides_the_promise_from_the_scenarios_fsync() -> None:
    for kind in StoreKind:
        assert kind.promises_power(True) and not kind.promises_power(False)


def test_normal_loses_a_suffix_on_power_loss_and_passes() -> None:
    """Some power loss in the NORMAL mode loses an acknowledged commit (the mode's loss is real,
    not theoretical), and the oracles judge it by the mode's promise: a pass."""
    scenario = load_scenario("weak_durability_nofsync")
    assert not scenario.fsync
    reference = run_scenario(scenario, seed=0, store="sqlite")
    for index in range(len(reference.trace.boundaries)):
        schedule = Schedule.of(CrashPoint(index, When.AFTER, CrashKind.POWER))
        result = run_scenario(scenario, seed=0, store="sqlite", schedule=schedule)
        if _lost(result):
            assert check(result, reference) == [], schedule.text()
            return
    raise AssertionError("no power loss lost an acknowledged commit under NORMAL")


def test_sqlite_checkpoints_and_truncates_its_log_within_a_scenario() -> None:
    """The log is copied into the database and truncated mid-scenario, so a sweep crosses the
    checkpoint's writes and syncs (SQLite's default threshold never would)."""
    result = run_scenario(load_scenario("idempotent_payment"), seed=0, store="sqlite")
    labels = [b.label for b in result.trace.boundaries]
    assert any(label.startswith("fs.truncate:") and label.endswith("-wal") for label in labels)
    assert (
        sum(1 for label in labels if label.startswith("fs.pwrite:") and label.endswith(".sqlite"))
        > 2
    )
