"""``--prune rejoin`` (sim/explore/pruning.py): a crashed run stops where it rejoins the
fault-free run, its window judged, and the full-suffix check catches the renaming failing.

The equivalence families keep one cheap case in the fast tier and sweep the rest with
``--run-slow`` (tests/tiers.py): every bundled scenario's verdicts equal the exact sweep's, and
every mutant's first killing schedule is its registered one."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from testkit import terminated
from tiers import sampled

from sim.explore import pruning
from sim.explore.mutants import MUTANTS, mutant_named, planted
from sim.explore.plan import SweepPlan
from sim.explore.rejoin import CanonicalProbe, Row
from sim.explore.sweep import depth1_schedules, sweep
from sim.judgement import invariants
from sim.judgement.oracles import check
from sim.outputs.cli import main
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, Schedule
from sim.world.scenario import TimedCrashDef, bundled_names, load_scenario
from sim.world.stores import StoreKind


def _verdicts(result: Any) -> list[tuple[int, str, str, str]]:
    return [(m["index"], m["when"], m["kind"], m["verdict"]) for m in result.matrix]


def test_options_are_validated_eagerly() -> None:
    assert pruning.prune_check("full") == "full"
    with pytest.raises(ValueError, match="prune check must be one of sample, full"):
        pruning.prune_check("some")
    with pytest.raises(ValueError, match="simulated stores only"):
        pruning.sweep(
            SweepPlan(scenario=load_scenario("read_edit_answer"), store=StoreKind.POSTGRES)
        )
    timed = load_scenario("read_edit_answer").model_copy(
        update={"timed_crashes": [TimedCrashDef(at_s=1.0)]}
    )
    with pytest.raises(ValueError, match="timed crashes"):
        pruning.sweep(SweepPlan(scenario=timed, store=StoreKind.FILE))


def test_the_check_samples_one_in_sixteen_stably() -> None:
    texts = [f"{i}:after:process" for i in range(1600)]
    picked = [t for t in texts if pruning.wants_check("sample", 0, t)]
    assert 60 <= len(picked) <= 140  # 1 in 16 of 1600 is 100
    assert picked == [t for t in texts if pruning.wants_check("sample", 0, t)]
    assert picked != [t for t in texts if pruning.wants_check("sample", 1, t)]  # seeded
    assert all(pruning.wants_check("full", 0, t) for t in texts)


def _met(name: str) -> tuple[Schedule, RunResult, pruning.PruneProbe, RunResult]:
    """The first depth-1 process crash of ``name`` whose child rejoins, its pruned run and
    probe, and the fault-free run."""
    scenario = load_scenario(name)
    base = Schedule()
    reference = run_scenario(scenario, seed=0, store="file", schedule=base)
    probe = CanonicalProbe(base)
    run_scenario(scenario, seed=0, store="file", schedule=base, fork=probe)
    views = pruning.Reference.of(probe)
    labels = [b.label for b in reference.trace.boundaries]
    for schedule in depth1_schedules(labels, [CrashKind.PROCESS], base=base):
        pruned = views.probe(schedule)
        result = run_scenario(scenario, seed=0, store="file", schedule=schedule, fork=pruned)
        if pruned.met is not None:
            return schedule, result, pruned, reference
    raise AssertionError(f"no child of {name} rejoins")


def test_a_pruned_run_stops_at_its_rejoin_and_is_judged_on_its_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedule, result, probe, reference = _met("read_edit_answer")
    assert probe.met is not None and probe.met[0] == probe.commits - 1  # stopped there
    # Only the commits whose sketch is one of the fault-free run's were viewed in full.
    assert 0 < len(probe.rows) <= probe.commits
    assert result.trace.halted_at is not None and not result.trace.settled
    whole = run_scenario(load_scenario("read_edit_answer"), seed=0, store="file", schedule=schedule)
    assert len(result.trace.boundaries) < len(whole.trace.boundaries)
    # Stopped, the run has not settled: I7 (judged at a run's end) fails it, and only I7.
    assert {v.invariant for v in check(result, reference)} == {"I7"}
    assert pruning.window_violations(result, reference) == []

    # I7 judged on the window too: the stopped run fails, so the flag is what spares it.
    def _at_any_time(code: str) -> invariants.Invariant:
        return dataclasses.replace(invariants.invariant(code), judged_at_end=False)

    monkeypatch.setattr(pruning, "invariant", _at_any_time)
    assert [v.invariant for v in pruning.window_violations(result, reference)] == ["I7"]


def test_the_sketch_never_hides_a_meeting() -> None:
    """A pruned child views in full only the commits whose sketch is one of the fault-free
    run's; it stops where a child viewed at every commit first meets the fault-free run, so the
    sketch (a function of the view) hides no meeting."""
    scenario = load_scenario("read_edit_answer")
    base = Schedule()
    probe = CanonicalProbe(base)
    reference = run_scenario(scenario, seed=0, store="file", schedule=base, fork=probe)
    views = pruning.Reference.of(probe)
    labels = [b.label for b in reference.trace.boundaries]
    met = 0
    for schedule in depth1_schedules(labels, [CrashKind.PROCESS], base=base)[::3]:
        full = CanonicalProbe(schedule)
        run_scenario(scenario, seed=0, store="file", schedule=schedule, fork=full)
        lookup = views.after(schedule.last_index)
        keys = [row.key(pruning.PRUNED_VIEW) for row in full.rows]
        first = next(((i, lookup[k]) for i, k in enumerate(keys) if k in lookup), None)
        pruned = views.probe(schedule)
        run_scenario(scenario, seed=0, store="file", schedule=schedule, fork=pruned)
        assert pruned.met == first, schedule.text()
        met += first is not None
    assert met > 0


def test_forked_and_naive_pruned_sweeps_agree() -> None:
    """The forking pruned sweep (children forked at their crash points, folded points
    inheriting their twin's outcome) gives every schedule the naive pruned sweep's verdict."""
    plan = SweepPlan(scenario=load_scenario("crash_during_recovery"), store=StoreKind.FILE)
    forked = pruning.sweep(plan, fast=True, jobs=2)
    naive = pruning.sweep(plan, fast=False)
    assert _verdicts(forked) == _verdicts(naive)
    assert forked.prune is not None and naive.prune is not None
    assert 0 < forked.prune["pruned"] <= naive.prune["pruned"]  # folded points are inherited
    assert "broken" not in forked.prune and "broken" not in naive.prune


def test_only_the_end_of_a_run_is_judged_at_its_end() -> None:
    assert [i.code for i in invariants.INVARIANTS if i.judged_at_end] == ["I7"]


def _row(stamp: int, **digests: str) -> Row:
    from sim.explore.rejoin import COMPONENTS

    return Row(stamp, {c: digests.get(c, "same") for c in COMPONENTS})


def test_a_suffix_mismatch_names_the_commit_and_the_components() -> None:
    reference = pruning.Reference.of(CanonicalProbe(Schedule(), rows=[_row(5), _row(9), _row(12)]))
    child = CanonicalProbe(Schedule(), rows=[_row(20), _row(24), _row(27)])
    assert pruning.suffix_mismatch((1, 1), child, reference) is None
    child.rows[2] = _row(27, world="other", unsynced="other", scheduler="other")
    assert pruning.suffix_mismatch((1, 1), child, reference) == (
        "1 commit(s) after the rejoin (the child's boundary 27, the fault-free run's 12) "
        "the views differ in world, unsynced"  # the scheduler RNG is not in the pruned view
    )
    longer = CanonicalProbe(Schedule(), rows=[_row(20), _row(24), _row(27), _row(30)])
    assert pruning.suffix_mismatch((1, 1), longer, reference) == (
        "the child ran 3 commits from the rejoin, the fault-free run 2"
    )


#: Where, at seed 0, the sampled check finds a child that met the fault-free run and left it:
#: none since the scheduler is reseeded at every commit's end and the runtime checkpoints and
#: renews where the log says (docs/performance.md, "Rejoin"); a case found later goes here.
PARTED: tuple[tuple[str, str], ...] = ()

EXACT_CASES = [
    (name, store)
    for name in bundled_names()
    if name != "long_horizon"  # its exact sweep alone takes minutes
    for store in ("file", "sqlite")
    if store == "file" or name in ("lease_takeover", "crash_during_recovery", "read_edit_answer")
]


@pytest.mark.parametrize(
    ("name", "store"),
    # One property scenario by scenario (a repetition, and pruning is opt-in): the parted cases,
    # which the test names one by one, and one in six of the rest run with --run-slow; a
    # release check runs all (tests/tiers.py).
    sampled(EXACT_CASES, fast=[("crash_during_recovery", "file")], every=6, keep=PARTED),
)
def test_pruned_and_exact_sweeps_agree(name: str, store: str) -> None:
    scenario = load_scenario(name)
    plan = SweepPlan(scenario=scenario, store=StoreKind(store), determinism="off")
    pruned = pruning.sweep(plan)
    exact = sweep(plan)
    assert _verdicts(pruned) == _verdicts(exact)
    assert [f.invariants for f in pruned.failures] == [f.invariants for f in exact.failures]
    # Pruned, or swept again exactly where the check caught the renaming failing (below).
    assert pruned.prune is not None and pruned.prune["pruned"] > 0
    assert ("broken" in pruned.prune) == ((name, store) in PARTED), pruned.prune
    assert [f.invariants for f in pruned.failures] == [f.invariants for f in exact.failures]


def test_a_sweep_prunes_and_checks_some_children() -> None:
    out = pruning.sweep(
        SweepPlan(scenario=load_scenario("crash_during_recovery"), store=StoreKind.FILE),
        check_mode="full",
    )
    assert out.prune is not None and "broken" not in out.prune, out.prune
    assert 0 < out.prune["pruned"] == out.prune["checked"]
    assert out.to_json()["prune"] == out.prune


def test_a_checked_child_forks_its_check_at_its_rejoin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked pruned sweep's full-suffix check runs in a process its child forks at the
    rejoin (the suffix alone, beside the other children), never from scratch in the parent:
    with that path switched off it still passes every pruned child of a sound runtime and
    still catches the absolute-value mutant."""

    def from_scratch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a pruned child was checked from scratch")

    monkeypatch.setattr(pruning._Pruner, "check_suffix", from_scratch)
    plan = SweepPlan(scenario=load_scenario("crash_during_recovery"), store=StoreKind.FILE)
    clean = pruning.sweep(plan, check_mode="full")
    assert clean.prune is not None and "broken" not in clean.prune, clean.prune
    assert 0 < clean.prune["pruned"] == clean.prune["checked"]
    mutant = mutant_named("key-per-epoch")
    with planted(mutant):
        out = pruning.sweep(
            SweepPlan(scenario=load_scenario(mutant.scenario), store=mutant.store),
            check_mode="full",
        )
    assert out.prune is not None and "then left it" in str(out.prune.get("broken")), out.prune


def test_the_check_catches_a_view_that_misses_what_decides_the_future() -> None:
    """On SQLite a child of ``read_edit_answer`` that met the fault-free run leaves it a
    commit later in ``unsynced`` (its files are left unsynced at other commits than the
    fault-free run's; the cause is not traced yet): checked to its end, the renaming fails and
    the scenario is swept exactly (docs/performance.md, "Rejoin")."""
    scenario = load_scenario("read_edit_answer")
    plan = SweepPlan(scenario=scenario, store=StoreKind.SQLITE, determinism="off")
    out = pruning.sweep(plan, check_mode="full")
    assert out.prune is not None, out.prune
    assert "then left it" in out.prune["broken"] and out.prune["broken"].endswith("in unsynced")
    assert _verdicts(out) == _verdicts(sweep(plan))


#: A seed whose 1-in-16 sample picks a child of the mutant's scenario that leaves the fault-free
#: run after rejoining it (``--prune-check full`` checks every one: any seed).
SAMPLE_CATCHES_AT_SEED = {"key-per-epoch": 0, "fsync-skipped-on-round-sequence": 2}


KILLED = [m for m in MUTANTS if m.first_kill is not None and m.store.forks]


@pytest.mark.parametrize(
    "name",
    # Each mutant's kill is checked by the exact sweep (test_mutants); here the opt-in pruned
    # sweep repeats it mutant by mutant: the two absolute-value mutants, which pruning exists to
    # be checked against, and one in three of the rest run with --run-slow (tests/tiers.py).
    sampled(
        [m.name for m in KILLED],
        fast=["key-per-epoch"],
        every=3,
        keep=sorted(set(SAMPLE_CATCHES_AT_SEED) - {"key-per-epoch"}),
    ),
)
def test_a_pruned_sweep_kills_each_mutant_at_its_first_killing_schedule(name: str) -> None:
    mutant = mutant_named(name)
    with planted(mutant):
        out = pruning.sweep(
            SweepPlan(
                scenario=load_scenario(mutant.scenario),
                store=mutant.store,
                crash_kinds=mutant.crash_kinds,
                stop_at_first_failure=True,
            )
        )
    assert out.failures and out.failures[0].schedule == mutant.first_kill


def test_every_absolute_mutant_has_a_seed_its_sample_catches() -> None:
    assert sorted(m.name for m in MUTANTS if m.absolute) == sorted(SAMPLE_CATCHES_AT_SEED)


@pytest.mark.parametrize(
    ("name", "check_mode"),
    # key-per-epoch (a recovery mutant, I1) in the fast tier; the store mutant's sampled check
    # at its seed (fsync-skipped-on-round-sequence, I11 under power loss) with --run-slow; its
    # full check, a repetition of minutes, in a release check (tests/tiers.py).
    sampled(
        [(name, mode) for name in sorted(SAMPLE_CATCHES_AT_SEED) for mode in ("sample", "full")],
        fast=[("key-per-epoch", "sample"), ("key-per-epoch", "full")],
        every=None,
        keep=[("fsync-skipped-on-round-sequence", "sample")],
    ),
)
def test_the_check_catches_a_runtime_that_branches_on_absolute_values(
    name: str, check_mode: str
) -> None:
    mutant = mutant_named(name)
    seed = SAMPLE_CATCHES_AT_SEED[name] if check_mode == "sample" else 0
    scenario = load_scenario(mutant.scenario)
    with planted(mutant):
        out = pruning.sweep(
            SweepPlan(scenario=scenario, store=mutant.store, seed=seed), check_mode=check_mode
        )
        exact = sweep(SweepPlan(scenario=scenario, store=mutant.store, seed=seed))
    assert out.prune is not None and "rejoined the fault-free run, then left it" in str(
        out.prune.get("broken")
    ), out.prune
    # Pruning turned off, the scenario was swept exactly: the exact verdicts, the mutant killed.
    assert _verdicts(out) == _verdicts(exact) and out.failures


# key-per-epoch's control in the fast tier shows that nothing but the check notices; the second
# absolute mutant's, a sweep of minutes, in a release check (tests/tiers.py).
@pytest.mark.parametrize(
    "name", sampled(sorted(SAMPLE_CATCHES_AT_SEED), fast=["key-per-epoch"], every=None)
)
def test_without_the_check_an_absolute_mutant_passes_unnoticed(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The control: with the check switched off nothing else notices, not even the verdicts
    (each stopped child's whole run passes as its window does; only its views part from the
    fault-free run's), so the check is what catches these mutants."""
    monkeypatch.setattr(pruning, "wants_check", lambda *_: False)
    mutant = mutant_named(name)
    scenario = load_scenario(mutant.scenario)
    with planted(mutant):
        out = pruning.sweep(SweepPlan(scenario=scenario, store=mutant.store), check_mode="full")
        exact = sweep(SweepPlan(scenario=scenario, store=mutant.store))
    assert out.prune is not None and "broken" not in out.prune, out.prune
    assert out.prune["pruned"] > 0 and _verdicts(out) == _verdicts(exact)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["sweep", "--prune", "rejoin", "--depth", "2"], "depth 1 only"),
        (["sweep", "--prune-check", "full"], "--prune-check needs --prune rejoin"),
        (["sweep", "--prune", "rejoin", "--store", "postgres"], "simulated stores"),
        (["sweep", "--prune", "sometimes"], "--prune"),
    ],
)
def test_bad_prune_options_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], named: str, tmp_path: Path
) -> None:
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert named in err, err


def test_the_cli_reports_what_it_pruned(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["sweep", "crash_during_recovery", "--store", "file", "--prune", "rejoin"]
    assert main([*args, "--prune-check", "full", "--out", str(tmp_path), "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "checked to the end)" in err and "pruned " in err, err


def test_sigterm_stops_a_pruned_sweep_cleanly(tmp_path: Path) -> None:
    """Exit 130 soon after SIGTERM, no worker and no temporary directory left."""
    command = ["sweep", "long_horizon", "read_edit_answer", "--store", "file", "--prune"]
    command += ["rejoin", "--jobs", "2", "--out", str(tmp_path / "out")]
    status, stderr = terminated(command, tmp_path, started="durable-sim-jobs-*")
    assert status == 130, stderr
    assert "Traceback" not in stderr
