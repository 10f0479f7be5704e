"""Timelines of reports and ``replay --timeline``: crashes where the process died, repeats
folded."""

from __future__ import annotations

from sim.judgement.judge import timeline
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import Boundary, Schedule, parse_schedule
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind


def _index_of(lines: list[str], needle: str) -> int:
    return next(n for n, line in enumerate(lines) if needle in line)


def test_an_after_crash_of_a_commit_comes_after_its_own_file_operations() -> None:
    scenario = load_scenario("idempotent_payment")
    plain = run_scenario(scenario, seed=0, store="file")
    commit = next(b for b in plain.trace.boundaries if b.label.startswith("store.commit#5"))
    nested = [b for b in plain.trace.boundaries if b.index > commit.index][:2]
    assert all(b.label.startswith("fs.") for b in nested)  # the commit's append and fsync
    schedule = parse_schedule(f"{commit.index}:after:process")
    lines = timeline(run_scenario(scenario, seed=0, store="file", schedule=schedule))
    crash = _index_of(lines, "CRASH")
    assert "after store.commit#5" in lines[crash]
    assert crash > _index_of(lines, f"[{nested[-1].index:4d}]"), "the dead process kept writing"
    assert crash < _index_of(lines, f"[{nested[-1].index + 1:4d}]")


def test_a_before_crash_precedes_its_boundary() -> None:
    scenario = load_scenario("idempotent_payment")
    lines = timeline(
        run_scenario(scenario, seed=0, store="file", schedule=parse_schedule("10:before:process"))
    )
    assert _index_of(lines, "CRASH") == _index_of(lines, "[  10]") - 1


def test_repeated_renewals_are_folded() -> None:
    result = RunResult(load_scenario("idempotent_payment"), 0, StoreKind.FILE, Schedule())
    labels = ["store.commit#1"] + ["store.lease.renew#{n}", "fs.fsync:c1/lease.json"] * 500
    result.trace.boundaries = [
        Boundary(i, label.format(n=i), "p1", float(i)) for i, label in enumerate(labels)
    ]
    lines = timeline(result, limit=10_000)
    assert len(lines) == 4, lines
    assert "499 more times" in lines[-1]
    assert "[   1]" in lines[1] and "[   2]" in lines[2]  # the first cycle is shown


def test_distinct_lines_are_not_folded() -> None:
    result = RunResult(load_scenario("idempotent_payment"), 0, StoreKind.FILE, Schedule())
    labels = ["fs.write:a", "fs.write:b", "fs.fsync:a", "fs.fsync:b", "fs.rename:a"]
    result.trace.boundaries = [Boundary(i, label, "p1", 0.0) for i, label in enumerate(labels)]
    assert len(timeline(result)) == len(labels)
