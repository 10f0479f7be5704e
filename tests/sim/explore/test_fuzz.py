"""Fuzzing: the planted depth-2 bug is found and shrunk; the real runtime survives the same
budget; the world machine runs; the regression corpus replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from testkit import REPO

from durable.events import CompactionStarted
from sim.explore import fuzz as fuzz_mod
from sim.explore.fuzz import fuzz_machine, fuzz_schedules, save_case, schedule_strategy
from sim.explore.mutants import MUTANTS, Mutant, mutant_named, planted
from sim.explore.plan import SweepPlan
from sim.judgement.judge import judge
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import Schedule, parse_schedule, tries_kind
from sim.world.scenario import load_scenario, load_scenario_file

BUDGET = 300  # the CLI's default --examples
DEPTH2 = mutant_named("forgets-intent-on-second-recovery")


def test_planted_depth2_bug_is_found_and_shrunk(capsys: pytest.CaptureFixture[str]) -> None:
    with planted(DEPTH2):
        finding = fuzz_schedules(load_scenario(DEPTH2.scenario), examples=BUDGET, fuzz_seed=0)
    assert finding is not None, "the planted depth-2 bug was not found"
    points = parse_schedule(finding.schedule).points
    assert 2 <= len(points) <= 3  # depth 2 at least (depth 1 cannot show it), and shrunk
    assert finding.violations[0].invariant == DEPTH2.caught_by[0]
    print("\n".join(finding.describe()))
    assert "schedule:" in capsys.readouterr().out


STORAGE_ONLY = mutant_named("unparseable-checkpoint-skipped")


def test_a_bug_only_a_storage_fault_shows_is_found_and_shrunk() -> None:
    """The schedule fuzzer draws storage faults on a store that takes them: a store mutant
    that only damage to a synced checkpoint exposes is found, and shrunk to that one fault."""
    # One storage point of the trace shows it (the fault after the second checkpoint, which
    # damages the first), so the search's seed decides whether 60 examples draw it: a seed
    # that does, re-chosen by running the search when the boundary model renumbers the trace.
    with planted(STORAGE_ONLY):
        finding = fuzz_schedules(
            load_scenario(STORAGE_ONLY.scenario), examples=60, fuzz_seed=18, max_depth=2
        )
    assert finding is not None, "no storage fault found the planted bug"
    points = parse_schedule(finding.schedule).points
    assert [p.kind for p in points] == ["storage"], finding.schedule
    assert finding.labels[0].startswith("store."), finding.labels  # an acknowledged operation
    assert finding.violations[0].invariant == STORAGE_ONLY.caught_by[0]


def test_storage_faults_are_drawn_once_after_a_store_operation() -> None:
    """A drawn storage fault sits after an acknowledged store operation, one per schedule."""
    reference = run_scenario(load_scenario("read_edit_answer"), seed=0, store="file")
    labels = {b.index: b.label for b in reference.trace.boundaries}
    seen: list[Schedule] = []

    @settings(max_examples=80, database=None, deadline=None)
    @given(schedule_strategy(reference, kinds=("process", "power", "storage")))
    def draw(schedule: Schedule) -> None:
        storage = [p for p in schedule.points if p.kind == "storage"]
        assert len(storage) <= 1, schedule.text()
        for p in storage:
            assert tries_kind(p.kind, p.when, labels[p.index]), schedule.text()
        seen.append(schedule)

    draw()
    assert any(p.kind == "storage" for s in seen for p in s.points)


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if not m.swept], ids=lambda m: m.name)
def test_planted_bug_is_invisible_at_depth_1(mutant: Mutant) -> None:
    """The registry says the depth-1 sweep does not kill it: that sweep must pass."""
    from sim.explore.sweep import sweep

    with planted(mutant):
        result = sweep(
            SweepPlan(
                scenario=load_scenario(mutant.scenario),
                store=mutant.store,
                crash_kinds=mutant.crash_kinds,
                determinism="off",
            )
        )
    assert result.failures == []


@pytest.mark.slow
def test_unplanted_runtime_survives_the_same_budget() -> None:
    assert fuzz_schedules(load_scenario("read_edit_answer"), examples=BUDGET, fuzz_seed=0) is None


@pytest.mark.slow
def test_world_machine_runs_clean() -> None:
    assert fuzz_machine(examples=12, fuzz_seed=1) is None


def test_a_harness_error_inside_an_example_is_raised_as_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error of the harness's own in an example (here an oracle's assertion) is no finding:
    it propagates as itself, with its message, from both fuzzers."""

    def broken(*args: object, **kwargs: object) -> None:
        raise AssertionError("an oracle's own assertion")

    monkeypatch.setattr(fuzz_mod, "judge", broken)
    with pytest.raises(AssertionError, match="an oracle's own assertion"):
        fuzz_schedules(load_scenario("idempotent_payment"), examples=5, fuzz_seed=1)
    with pytest.raises(AssertionError, match="an oracle's own assertion"):
        fuzz_machine(examples=3, fuzz_seed=1)


def test_findings_are_saved_as_schema_versioned_cases(tmp_path: Path) -> None:
    with planted(DEPTH2):
        finding = fuzz_schedules(load_scenario(DEPTH2.scenario), examples=BUDGET, fuzz_seed=1)
    assert finding is not None
    path = save_case(finding, tmp_path)
    case = json.loads(path.read_text())
    assert case["schema_version"] == 1 and case["schedule"] == finding.schedule
    assert load_scenario_file(path).name == "read_edit_answer"


CORPUS_DIR = REPO / "tests" / "corpus"  # this repository's regression corpus
CASES = sorted(CORPUS_DIR.glob("*.json"))


def test_corpus_is_not_empty() -> None:
    assert CASES, f"no corpus cases in {CORPUS_DIR}"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_corpus_case_passes(path: Path) -> None:
    """A bug once found stays found: every saved case must pass on the current runtime."""
    case = json.loads(path.read_text())
    assert case["schema_version"] == 1
    scenario = load_scenario_file(path)
    store, seed = case["store"], case["seed"]
    reference = run_scenario(scenario.without_faults(), seed=seed, store=store)
    schedule = parse_schedule(case["schedule"])
    result = run_scenario(scenario, seed=seed, store=store, schedule=schedule)
    # The crash points still name the boundaries the case was saved for: a change to the
    # boundary model renumbers traces, and a stale index would test some other crash. (The
    # scenario's own timed crashes are not schedule points: they find their boundary by time.)
    if "labels" in case:
        scheduled = [c.label for c in result.trace.crashes if c.point in schedule.points]
        assert scheduled == case["labels"], "re-derive the schedule"
    outcome = judge(result, reference, determinism=True)
    assert outcome.verdict == "pass", [v.explanation for v in outcome.violations]


@pytest.mark.slow
def test_world_machine_drives_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's ``compact`` rule is drawn, and the programs it writes really compact (a
    compaction starts in a judged run), with every oracle holding."""
    notes: list[str] = []
    started: list[str] = []
    original_note = fuzz_mod.WorldMachine._note
    original_run = run_scenario  # what fuzz_mod.run_scenario is until it is patched below

    def note(self: fuzz_mod.WorldMachine, text: str) -> None:
        notes.append(text)
        original_note(self, text)

    def run(*args: Any, **kwargs: Any) -> RunResult:
        result = original_run(*args, **kwargs)
        started.extend(
            r.event.compaction_id
            for r in result.durable.records
            if isinstance(r.event, CompactionStarted)
        )
        return result

    monkeypatch.setattr(fuzz_mod.WorldMachine, "_note", note)
    monkeypatch.setattr(fuzz_mod, "run_scenario", run)
    assert fuzz_machine(examples=12, fuzz_seed=2) is None
    assert any(n.startswith("compaction:") for n in notes), notes[:20]
    assert started, "no program the machine wrote ever compacted"


@pytest.mark.slow
def test_parallel_fuzzers_find_what_one_process_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fuzz --jobs 2`` runs each scenario's fuzzer in a worker: each is its own seeded search,
    so the planted bug's shrunk schedule is the in-process fuzzer's, the other scenario's
    fuzzer still runs, and the finding comes back to be saved and reported."""
    from sim.outputs.cli.main import main

    with planted(DEPTH2):
        # 120 examples: with storage faults among the drawn kinds, 60 no longer reach it; the
        # other scenario calls no tool, so the planted bug (an intent forgotten) cannot show.
        alone = fuzz_schedules(load_scenario("read_edit_answer"), examples=120, fuzz_seed=0)
        args = ["fuzz", "read_edit_answer", "model_overloaded", "--no-machine"]
        args += ["--examples", "120", "--jobs", "2", "--corpus", str(tmp_path)]
        status = main(args)
    assert alone is not None, "the planted bug was not found: nothing to compare"
    assert status == 1
    out = capsys.readouterr().out
    assert f"schedule: {alone.schedule}" in out, out
    assert "found by the schedules fuzzer on read_edit_answer[file]" in out
    assert out.rstrip().endswith("1 failure(s)")
    (saved,) = tmp_path.glob("*.json")
    assert json.loads(saved.read_text())["schedule"] == alone.schedule
