"""The fast (forking) sweep gives the same verdict for every schedule as the naive sweep, and so
does a fast sweep of a short run, which splits the naive path over workers instead of forking.

The forking tests pass ``fork_from=0``: every scenario is forked whatever its length. Each
family keeps its cheapest case in the fast tier and sweeps the rest with ``--run-slow``
(tests/tiers.py).

Per scenario, the fast side sweeps every crash point; the naive side, which re-runs each schedule
from the start (a sweep's cost squared), runs the CI tier's stratified sample of them
(``sim.explore.tier``: a point of every stratum and every recovery class, the storage faults,
then seeded others, ``NAIVE_POINTS`` in all), and every point it ran must have the fast side's
verdict. The sample draws folded points as well as their roots, so a wrong fold can show. The
mutant and split comparisons below stay exhaustive. ``DURABLE_SIM_NAIVE_POINTS=all`` makes
every naive side exhaustive (a release check: CONTRIBUTING.md, "Release checks"); a number
sets the sample."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from tiers import tiered

from sim.explore import forking, tier
from sim.explore.plan import SweepPlan
from sim.explore.recording import ScenarioSweep
from sim.explore.sweep import FORK_FROM_BOUNDARIES, sweep
from sim.world.faults import CrashKind
from sim.world.scenario import bundled_names, load_scenario
from sim.world.stores import StoreKind

# long_horizon's naive sweep alone takes many minutes; a 4-turn cut of it is compared instead.
# Every other scenario on the file store, and on SQLite too: the two with several processes or a
# base crash -- where forking is trickiest -- and the one without a sync per commit
# (FileStore(fsync=False); SQLite's synchronous=NORMAL, judged by its own promise). SQLite's
# naive sweeps cost more than the file store's (more crash points, its pages read through the
# simulated VFS); the split path on SQLite is compared below on its own scenarios, and the
# forking path on SQLite mutants.
NAMES = [n for n in bundled_names() if n != "long_horizon"]
# The inbox-mode scenarios (steer, reject) are compared on their own below.
INBOX = (
    "reject_while_busy",
    "steer_and_follow_up_queued",
    "steer_mid_tools",
    "steer_misses_the_run",
)
# The compensation scenarios likewise, compared on their own below.
COMPENSATION = ("abandon_refunds_charge", "abandon_restores_files", "operator_rejects_edit")
# The agent-state scenario likewise (the verifier's hash check after a fork is what it adds).
OWN = (*INBOX, "plan_edit_validate")
BOTH = ("lease_takeover", "crash_during_recovery", "weak_durability_nofsync")
CASES = [
    (name, store)
    for name in NAMES
    if name not in OWN + COMPENSATION
    for store in ("file", "sqlite")
    if name in BOTH or store == "file"
]


def _verdicts(result: ScenarioSweep) -> list[tuple[int, str, str, str]]:
    return [(m["index"], m["when"], m["kind"], m["verdict"]) for m in result.matrix]


#: The naive side's sample per trace: more than the CI tier's ``SAMPLE_POINTS`` (the strata,
#: classes and storage faults leave room for seeded others), as the comparison was sized.
NAIVE_POINTS = 80


def _naive_points() -> int | None:
    """The naive side's sample per sweep (module docstring); None: every point."""
    value = os.environ.get("DURABLE_SIM_NAIVE_POINTS", str(NAIVE_POINTS))
    return None if value == "all" else int(value)


Naive = Callable[..., ScenarioSweep]


@pytest.fixture
def naive(monkeypatch: pytest.MonkeyPatch) -> Naive:
    """``sweep(SweepPlan(scenario=scenario, **options), fast=False)`` on the naive side's sample
    of the points."""
    points = _naive_points()

    def run(scenario: Any, **options: Any) -> ScenarioSweep:
        if points is None:
            return sweep(SweepPlan(scenario=scenario, **options), fast=False)
        # Every trace longer than the sample is sampled, as the CI tier samples long traces.
        monkeypatch.setattr(tier, "EXHAUSTIVE_POINTS_MAX", points)
        monkeypatch.setattr(tier, "SAMPLE_POINTS", points)
        return sweep(SweepPlan(scenario=scenario, exhaustive=False, **options), fast=False)

    return run


def _agree(fast: ScenarioSweep, naive: ScenarioSweep) -> None:
    """Every matrix cell the naive side ran (a crash point; a power loss's tears share one)
    has the fast side's verdict, out of the same points."""
    every = {cell[:3]: cell[3] for cell in _verdicts(fast)}
    assert len(every) == len(fast.matrix)  # one cell per point
    ran = _verdicts(naive)
    assert [every.get(cell[:3]) for cell in ran] == [cell[3] for cell in ran]
    assert fast.sample.points_total == naive.sample.points_total
    if naive.sample.sampled:
        assert len(ran) <= naive.sample.points_run < fast.sample.points_total
    else:
        assert naive.sample.points_run == fast.sample.points_total


def _swept(cells: list[tuple[int, str]], *, total: int, sampled: bool) -> ScenarioSweep:
    out = ScenarioSweep("s", "file", 0, 1, ["process"])
    out.matrix = [{"index": i, "when": "after", "kind": "process", "verdict": v} for i, v in cells]
    out.sample.points_total, out.sample.points_run, out.sample.sampled = total, len(cells), sampled
    return out


def test_the_comparison_fails_on_a_differing_verdict_or_a_point_the_fast_side_lacks() -> None:
    fast = _swept([(0, "pass"), (1, "pass"), (2, "safety")], total=3, sampled=False)
    _agree(fast, _swept([(2, "safety")], total=3, sampled=True))
    for cells in ([(2, "pass")], [(3, "pass")], [(0, "pass"), (1, "pass"), (2, "safety")]):
        with pytest.raises(AssertionError):
            _agree(fast, _swept(cells, total=3, sampled=True))
    with pytest.raises(AssertionError):  # an unsampled naive side runs every point
        _agree(fast, _swept([(0, "pass"), (1, "pass")], total=3, sampled=False))


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.parametrize(
    ("name", "store"), tiered(CASES, fast=[("abort_with_queued_input", "file")])
)
def test_fast_and_naive_sweeps_agree(name: str, store: str, naive: Naive) -> None:
    scenario = load_scenario(name)
    slow = naive(scenario, store=store, determinism=False)
    fast = sweep(
        SweepPlan(scenario=scenario, store=StoreKind(store), determinism="off"),
        fast=True,
        fork_from=0,
    )
    _agree(fast, slow)
    assert slow.failures == [], slow.failures[0].repro  # every bundled scenario passes
    assert fast.failures == []


@pytest.mark.slow
@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
def test_fast_and_naive_agree_on_a_short_long_horizon(naive: Naive) -> None:
    scenario = load_scenario("long_horizon")
    script = [scenario.script[0][:4] + scenario.script[0][-1:]]
    short = scenario.model_copy(update={"script": script})
    slow = naive(short, store="file", determinism=False)
    fast = sweep(
        SweepPlan(scenario=short, store=StoreKind.FILE, determinism="off"), fast=True, fork_from=0
    )
    _agree(fast, slow)


# A runtime mutant, and the SQLite ones: two of them change which syncs happen inside SQLite, and
# one holds a sync back across VFS calls (state a fork must carry into its children).
FORKED_MUTANTS = (
    "key-per-attempt",
    "sqlite-off-as-full",
    "vfs-sync-noop",
    "checkpoint-without-wal-sync",
)


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.slow  # the fast tier compares a mutant's sweeps below (sampled determinism)
@pytest.mark.parametrize("mutant_name", FORKED_MUTANTS)
def test_fast_sweep_catches_a_mutant_like_the_naive_one(mutant_name: str) -> None:
    from sim.explore.mutants import mutant_named, planted

    mutant = mutant_named(mutant_name)
    scenario, store = load_scenario(mutant.scenario), mutant.store
    with planted(mutant):
        naive = sweep(SweepPlan(scenario=scenario, store=store, determinism="off"), fast=False)
        fast = sweep(
            SweepPlan(scenario=scenario, store=StoreKind(store), determinism="off"),
            fast=True,
            fork_from=0,
        )
    assert naive.failures and _verdicts(fast) == _verdicts(naive)
    assert [f.invariants for f in fast.failures] == [f.invariants for f in naive.failures]
    # A schedule that inherits an equivalent one's verdict still shows its own crash and run.
    assert [(f.schedule, f.crash_labels) for f in fast.failures] == [
        (f.schedule, f.crash_labels) for f in naive.failures
    ]
    assert [f.timeline for f in fast.failures] == [f.timeline for f in naive.failures]


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.parametrize("name", tiered(OWN + COMPENSATION, fast=["steer_misses_the_run"]))
def test_fast_and_naive_agree_on_inbox_modes_agent_state_and_compensation(
    name: str, naive: Naive
) -> None:
    """A forked child inherits the client's record of rejections, the queue of steering
    inputs, the workspace a verifier hashes, and the services' record of applied compensation
    keys (what dedupes a re-run undo) and workspace history (what I17 reads): its verdicts
    must be the naive sweep's. Power losses too: a folded power loss must leave the same
    workspace and rejections as its twin's."""
    scenario = load_scenario(name)
    kinds = (CrashKind.PROCESS, CrashKind.POWER)
    slow = naive(scenario, store="file", crash_kinds=kinds, determinism=False)
    fast = sweep(
        SweepPlan(scenario=scenario, store=StoreKind.FILE, crash_kinds=kinds, determinism="off"),
        fast=True,
        fork_from=0,
    )
    assert fast.schedules > 1
    _agree(fast, slow)
    assert slow.failures == fast.failures == []


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.parametrize(
    "name", tiered(NAMES, fast=["verify_then_continue_edit", "steer_misses_the_run"])
)
def test_fast_and_naive_agree_on_storage_faults(name: str, naive: Naive) -> None:
    scenario = load_scenario(name)
    kinds = (CrashKind.STORAGE,)
    slow = naive(scenario, store="file", crash_kinds=kinds, determinism=False)
    fast = sweep(
        SweepPlan(scenario=scenario, store=StoreKind.FILE, crash_kinds=kinds, determinism="off"),
        fast=True,
        fork_from=0,
    )
    assert fast.schedules > 1
    _agree(fast, slow)
    # ``make sweep`` runs these: a bundled scenario keeps the store's damage promise.
    assert slow.failures == [], slow.failures[0].repro
    assert fast.failures == []


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.parametrize("mutant_name", ["damage-as-torn-tail", "repair-before-refusing"])
def test_fast_sweep_catches_a_storage_mutant_like_the_naive_one(mutant_name: str) -> None:
    from sim.explore.mutants import mutant_named, planted

    mutant = mutant_named(mutant_name)
    kinds = (CrashKind.STORAGE,)
    with planted(mutant):
        scenario = load_scenario(mutant.scenario)
        naive = sweep(
            SweepPlan(
                scenario=scenario, store=StoreKind.FILE, crash_kinds=kinds, determinism="off"
            ),
            fast=False,
        )
        fast = sweep(
            SweepPlan(
                scenario=scenario, store=StoreKind.FILE, crash_kinds=kinds, determinism="off"
            ),
            fast=True,
            fork_from=0,
        )
    assert naive.failures and _verdicts(fast) == _verdicts(naive)
    assert [f.invariants for f in fast.failures] == [f.invariants for f in naive.failures]


def test_the_determinism_sample_is_seeded_and_about_one_in_sixteen() -> None:
    from sim.explore.sweep import DETERMINISM_SAMPLE_EVERY, wants_rerun

    texts = [f"{i}:{w}:process" for i in range(800) for w in ("before", "after")]
    picked = [t for t in texts if wants_rerun("sample", 0, t)]
    assert 0.5 < len(picked) * DETERMINISM_SAMPLE_EVERY / len(texts) < 1.5
    assert picked == [t for t in texts if wants_rerun("sample", 0, t)]  # no hidden state
    assert picked != [t for t in texts if wants_rerun("sample", 1, t)]  # the seed chooses
    assert all(wants_rerun("full", 0, t) for t in texts[:5])
    assert not any(wants_rerun("off", 0, t) for t in texts[:5])


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
def test_sampled_determinism_twins_every_failing_schedule_fast_and_naive_alike() -> None:
    """With ``sample``, a failing schedule is re-run even when the sample skipped it: the
    fast path (a late twin in the parent) and the naive path give the same verdicts, and a
    nondeterministic runtime is still reported."""
    from sim.explore.mutants import mutant_named, planted

    key = mutant_named("key-per-attempt")
    with planted(key):
        scenario = load_scenario(key.scenario)
        naive = sweep(
            SweepPlan(scenario=scenario, store=StoreKind.FILE, determinism="sample"), fast=False
        )
        fast = sweep(
            SweepPlan(scenario=scenario, store=StoreKind.FILE, determinism="sample"),
            fast=True,
            fork_from=0,
        )
    assert naive.failures and _verdicts(fast) == _verdicts(naive)
    assert fast.determinism == naive.determinism == "sample"
    leaky = mutant_named("leaky-counter")
    with planted(leaky):
        result = sweep(
            SweepPlan(
                scenario=load_scenario(leaky.scenario), store=StoreKind.FILE, determinism="sample"
            )
        )
    assert result.verdicts["nondeterminism"] > 0


SPLIT = ("read_edit_answer", "lease_takeover", "crash_during_recovery", "idempotent_payment")


def _document(result: ScenarioSweep) -> dict[str, object]:
    doc = result.to_json()
    doc.pop("wall_s")
    doc.pop("folded")  # the naive path folds nothing; every other figure must agree
    return doc


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.slow  # the fast tier compares a split sweep on a mutant below
@pytest.mark.parametrize("name", SPLIT)
@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_a_split_sweep_records_exactly_what_the_naive_one_does(name: str, store: str) -> None:
    scenario = load_scenario(name)
    kinds = (CrashKind.PROCESS, CrashKind.POWER, CrashKind.STORAGE)
    plan = SweepPlan(scenario=scenario, store=StoreKind(store), crash_kinds=kinds)
    naive = sweep(plan, fast=False)
    split = sweep(plan, jobs=2)
    assert split.reference.boundaries < FORK_FROM_BOUNDARIES  # the split path, not the forking one
    assert split.expansion.folded > 0  # folded schedules inherit verdicts: that is what is compared
    assert _document(split) == _document(naive)


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
@pytest.mark.parametrize(
    ("mutant_name", "jobs"),
    tiered([("key-per-attempt", 3), ("damage-as-torn-tail", 1)], fast=[("key-per-attempt", 3)]),
)
def test_a_split_sweep_fails_a_mutant_exactly_as_the_naive_one(mutant_name: str, jobs: int) -> None:
    from sim.explore.mutants import mutant_named, planted

    mutant = mutant_named(mutant_name)
    with planted(mutant):
        scenario = load_scenario(mutant.scenario)
        kinds = mutant.crash_kinds
        naive = sweep(
            SweepPlan(scenario=scenario, store=StoreKind.FILE, crash_kinds=kinds), fast=False
        )
        split = sweep(
            SweepPlan(scenario=scenario, store=StoreKind.FILE, crash_kinds=kinds), jobs=jobs
        )
    assert naive.failures
    assert _document(split) == _document(naive)  # every failure, its timeline and repro line
