"""What a sweep knows before any crash schedule runs: its description, the crash kinds its store
takes, the scenario's own base crash, the fault-free reference run and the traced run that lists
the crash points (docs/architecture.md, 2.5)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sim.explore import folding
from sim.explore.recording import ScenarioSweep
from sim.explore.sweep.modes import Determinism
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import (
    CrashKind,
    CrashPoint,
    Schedule,
    When,
    crash_points,
    sweep_points,
)
from sim.world.scenario import Scenario, ScenarioError
from sim.world.stores import StoreKind


def base_schedule(scenario: Scenario, *, seed: int, store: StoreKind | str) -> Schedule:
    """The scenario's own crash (``base_crash``) resolved to a boundary index of its fault-free
    trace on this store; empty if it has none."""
    spec = scenario.base_crash
    if spec is None:
        return Schedule()
    plain = run_scenario(scenario.without_faults(), seed=seed, store=store)
    for boundary in plain.trace.boundaries:
        if boundary.label.startswith(spec.label_prefix):
            return Schedule.of(CrashPoint(boundary.index, When(spec.when), CrashKind(spec.kind)))
    raise ScenarioError(
        f"{scenario.name}: base_crash.label_prefix {spec.label_prefix!r} matches no boundary of "
        f"its fault-free run on the {store} store"
    )


def depth1_schedules(
    labels: Sequence[str],
    kinds: Iterable[CrashKind],
    *,
    base: Schedule | None = None,
    tears: dict[tuple[int, When], int] | None = None,
) -> list[Schedule]:
    """One more crash at every boundary (after the base schedule's own crash points, if any),
    of every kind the point is tried with (``sim.world.faults.tries_kind``); ``labels`` are the
    boundaries' labels in index order. A power crash also comes in every enumerated tear of
    its point (``tears``: the traced run's ``Trace.tear_counts``)."""
    kinds = list(kinds)
    base = base or Schedule()
    tears = tears or {}
    return [
        Schedule.of(*base.points, point)
        for i in range(base.last_index + 1, len(labels))
        for when in (When.BEFORE, When.AFTER)
        for point in sweep_points(i, when, labels[i], kinds, tears.get((i, when), 0))
    ]


def described(
    scenario: Scenario,
    store: StoreKind | str,
    seed: int,
    depth: int,
    crash_kinds: Iterable[CrashKind | str],
    mode: Determinism,
    ref: str | None,
) -> tuple[ScenarioSweep, list[CrashKind], Schedule]:
    """A sweep's result before any run: its configuration, the crash kinds the store takes and
    the scenario's base schedule."""
    out = ScenarioSweep(scenario.name, store, seed, depth, list(crash_kinds))
    # A pause needs a standby to take the lease over: a scenario without one has no pause
    # points. The kinds asked for stay the sweep's (every sweep of one command shares them).
    out.expansion.skipped_pause = (
        CrashKind.PAUSE in out.crash_kinds and scenario.standby_at_s() is None
    )
    out.ref = ref or scenario.name
    out.determinism = mode
    kinds = _store_kinds(out)
    base = base_schedule(scenario, seed=seed, store=store)
    out.reference.base_points = list(base.points)
    return out, kinds, base


def _store_kinds(out: ScenarioSweep) -> list[CrashKind]:
    """The crash kinds the store is swept with: those the simulator can inject under it
    (``StoreKind.can_inject``: no power loss or storage faults on Postgres); the results say
    what was skipped."""
    store = StoreKind(out.store)
    kinds = out.crash_kinds
    out.expansion.skipped_power = "power" in kinds and not store.can_inject("power")
    out.expansion.skipped_storage = "storage" in kinds and not store.can_inject("storage")
    return swept_kinds(out)


def swept_kinds(out: ScenarioSweep) -> list[CrashKind]:
    """The crash kinds a sweep runs: those asked for that its store can take and, for a pause,
    that its scenario can (a standby): the one place that decides it."""
    store = StoreKind(out.store)
    return [
        CrashKind(k)
        for k in out.crash_kinds
        if store.can_inject(k)
        and not (CrashKind(k) is CrashKind.PAUSE and out.expansion.skipped_pause)
    ]


def traced_runs(
    scenario: Scenario,
    *,
    seed: int,
    store: StoreKind | str,
    base: Schedule,
    fold: folding.FoldPlan | None = None,
) -> tuple[RunResult, RunResult]:
    """The fault-free reference run (the oracles compare with it) and the run the schedules
    extend, which lists the crash points: the same run, unless the scenario has timed crashes
    of its own. The traced run counts each point's enumerated tears; both paths list schedules
    from it. With ``fold``, the traced run also finds which schedules share a future."""
    timed = bool(scenario.timed_crashes)
    reference = run_scenario(
        scenario.without_faults(),
        seed=seed,
        store=store,
        schedule=base,
        count_tears=not timed,
        fork=None if timed else fold,
    )
    if not timed:
        return reference, reference
    traced = run_scenario(
        scenario, seed=seed, store=store, schedule=base, count_tears=True, fork=fold
    )
    return reference, traced


def describe(
    out: ScenarioSweep,
    reference: RunResult,
    traced: RunResult,
    base: Schedule,
    kinds: list[CrashKind],
) -> None:
    """What the results say about the runs before any schedule: boundaries, tears, outcome."""
    out.reference.boundaries = len(traced.trace.boundaries)
    if "power" in kinds:
        out.expansion.tear_schedules = sum(
            len(crash_points(index, When(when), CrashKind.POWER, n)) - 1
            for (index, when), n in traced.trace.tear_counts.items()
            if index > base.last_index
        )
    out.reference.labels = [b.label for b in traced.trace.boundaries]
    for b in traced.trace.boundaries:
        out.reference.boundary_kinds[b.kind] = out.reference.boundary_kinds.get(b.kind, 0) + 1
    out.reference.fingerprint = reference.trace.fingerprint
    out.reference.outcome = reference.outcome
    out.reference.effects = _effect_summary(reference)


def _effect_summary(result: RunResult) -> dict[str, int]:
    summary: dict[str, int] = {}
    for effect in result.outside.ledger:
        if effect.applied:
            key = f"{effect.service}.{effect.op}"
            summary[key] = summary.get(key, 0) + 1
    return summary


def listed_schedules(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process", "power"),
) -> tuple[int, list[Schedule]]:
    """The traced run's boundary count and the depth-1 schedules a fast sweep lists from it,
    before folding: what a campaign's planner splits into units and estimates the cost of."""
    _, kinds, base = described(scenario, store, seed, 1, crash_kinds, "off", None)
    _, traced = traced_runs(scenario, seed=seed, store=store, base=base)
    labels = [b.label for b in traced.trace.boundaries]
    return len(labels), depth1_schedules(labels, kinds, base=base, tears=traced.trace.tear_counts)


def twins(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process", "power"),
) -> dict[str, str]:
    """Which depth-1 schedules a fast sweep folds (``sim.explore.folding``): each schedule it
    does not run, mapped to the schedule whose verdict it inherits (its twin). A folded failure
    is judged on its own run, so a fast sweep reports the naive sweep's first failure exactly
    when that failure's twin (if it has one) fails too -- what the mutant tests check."""
    store = StoreKind(store)
    _, swept, base = described(scenario, store, seed, 1, crash_kinds, "off", None)
    fold = folding.FoldPlan(base, tuple(swept))
    traced_runs(scenario, seed=seed, store=store, base=base, fold=fold)
    return fold.twin_of
