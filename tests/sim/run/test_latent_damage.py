"""Damage to a sub-agent's child conversation that nobody opens again (docs/crash-model.md,
"Latent damage"), and a child that is opened again after the damage."""

from __future__ import annotations

from sim.explore.plan import SweepPlan
from sim.explore.sweep import sweep
from sim.judgement.judge import ScheduleOutcome, judge
from sim.run.runner import LatentDamage, RunResult, run_scenario
from sim.world.faults import CrashKind, parse_schedule
from sim.world.fs import SimFS
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

SCENARIO = "delegate_to_subagent"


def _run(schedule: str) -> tuple[RunResult, ScheduleOutcome]:
    scenario = load_scenario(SCENARIO)
    reference = run_scenario(scenario.without_faults(), seed=0, store="file")
    result = run_scenario(scenario, seed=0, store="file", schedule=parse_schedule(schedule))
    return result, judge(result, reference, determinism=False)


def test_damage_to_a_finished_child_is_found_by_the_judges_read() -> None:
    """After the run, the disk damages the finished child's log; the next process opens only
    the parent. The judge's read refuses naming the file, the child is judged as acknowledged."""
    result, outcome = _run("110:after:storage")
    assert outcome.verdict == "pass", [v.to_json() for v in outcome.violations]
    (child, error) = next(iter(result.durable.latent_damage.items()))
    assert child == "c1.sub.call-1" and "/store/c1.sub.call-1/events.jsonl" in error
    assert result.errors.store_error is None and result.durable.child_records[child]


def test_damage_to_a_child_opened_again_makes_the_runtime_refuse() -> None:
    """The delegating call is re-run after the damage: opening the child raises CorruptStore,
    which stops the parent (it is not the call's result), naming the file, changing nothing."""
    result, outcome = _run("42:after:storage")
    assert outcome.verdict == "pass", [v.to_json() for v in outcome.violations]
    assert (
        result.storage.refusal is not None
        and "c1.sub.call-1/events.jsonl" in result.storage.refusal
    )
    assert result.durable.latent_damage == {}


def test_every_storage_fault_of_the_subagent_scenario_passes() -> None:
    result = sweep(
        SweepPlan(
            scenario=load_scenario(SCENARIO),
            store=StoreKind.FILE,
            crash_kinds=(CrashKind.STORAGE,),
            determinism="off",
        )
    )
    assert result.schedules > 20 and result.failures == [], result.failures[0].repro


def _damaged_child() -> tuple[SimFS, LatentDamage]:
    fs = SimFS()
    fs.makedirs("store/c1.sub.call-1")
    fs.write("store/c1.sub.call-1/events.jsonl", b"x" * 2048 + b"\n" + b"y" * 2048 + b"\n")
    fs.fsync("store/c1.sub.call-1/events.jsonl")
    fs.fsync_dir("store/c1.sub.call-1")
    damage = {"/store/c1.sub.call-1/events.jsonl": "bitflip:0.0"}
    latent = LatentDamage(damage, fs.snapshot(), fs, "/store", before=None)
    return fs, latent


def test_latent_damage_needs_an_untouched_child_and_a_named_file() -> None:
    error = "CorruptStore: /store/c1.sub.call-1/events.jsonl: line 1: does not parse"
    fs, latent = _damaged_child()
    assert latent.untouched("c1.sub.call-1", error)
    assert not latent.untouched("c1.sub.call-1", "CorruptStore: the store is corrupt")
    assert not latent.untouched("c2.sub.call-9", error)  # not where the damage is
    fs.append("store/c1.sub.call-1/events.jsonl", b"z\n")  # someone opened it again
    assert not latent.untouched("c1.sub.call-1", error)
    fs2, latent2 = _damaged_child()
    fs2.write("store/c1.sub.call-1/lease.json", b"{}")  # a new file in the child
    assert not latent2.untouched("c1.sub.call-1", error)
