"""Exhaustive crash sweeps (docs/architecture.md, 2.5).

A fault-free run of the scenario records its ordered boundary trace (N boundaries). Depth 1 runs
every schedule with one crash: each boundary x {before, after} x the chosen crash kinds. Depth 2
also crashes once more at every boundary that the depth-1 run reached after its first crash (the
recovery and everything after it). Every schedule gets every oracle, I10 included (the schedule is
run twice and the fingerprints compared).

SQLite files live on a real temporary directory with process-crash semantics only: power loss for
SQLite needs a VFS that buffers unsynced pages, which does not exist here, so power schedules are
not run on the SQLite store and the results say so (``skipped_power``); storage faults (damage to
synced data) likewise (``skipped_storage``).
"""

from __future__ import annotations

import json
import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal

from sim.explore import folding, forking, interrupts, parallel, tier
from sim.explore.recording import Failure as Failure
from sim.explore.recording import Outcome, record_outcome, record_parts
from sim.explore.recording import ScenarioSweep as ScenarioSweep
from sim.explore.recording import repro_command as repro_command
from sim.judgement.judge import ScheduleOutcome as ScheduleOutcome
from sim.judgement.judge import judge as judge
from sim.judgement.judge import recovery_paths as recovery_paths
from sim.judgement.judge import timeline as timeline
from sim.judgement.oracles import (
    Violation,
    check_determinism,
    compare_fingerprints,
    verdict_of,
)
from sim.run import collector
from sim.run.runner import RunResult, run_scenario
from sim.world import tempdirs
from sim.world.faults import (
    CrashKind,
    CrashPoint,
    Schedule,
    When,
    crash_points,
    parse_schedule,
    sweep_points,
    tries_kind,
)
from sim.world.scenario import Scenario, ScenarioError
from sim.world.stores import StoreKind

ProgressFn = Callable[[int], None]


# Below this many boundaries a fast sweep runs the naive path split over its jobs: a forked
# child costs ~4 ms of its own (copying the pages it touches), about a short run's whole prefix.
FORK_FROM_BOUNDARIES = 150

Determinism = Literal["full", "sample", "off"]
DETERMINISM_MODES: tuple[Determinism, ...] = ("full", "sample", "off")
# With ``sample``, one crash point in this many gets I10's second run (plus every failing one).
DETERMINISM_SAMPLE_EVERY = 16


def determinism_mode(value: bool | str) -> Determinism:
    """``True``/``False`` (the library's older form) or a mode name, validated eagerly."""
    if value is True:
        return "full"
    if value is False:
        return "off"
    if value not in DETERMINISM_MODES:
        raise ValueError(f"determinism must be one of {', '.join(DETERMINISM_MODES)}: {value!r}")
    return value


def wants_twin(mode: Determinism, seed: int, schedule_text: str) -> bool:
    """Whether I10 re-runs this schedule up front. ``sample`` picks a seeded 1 in
    ``DETERMINISM_SAMPLE_EVERY`` by a hash of (seed, schedule) -- stable across processes and
    hash seeds, unlike ``hash()`` -- as FoundationDB checks determinism on a sample of runs;
    failing schedules are re-run afterwards whatever the sample said."""
    if mode != "sample":
        return mode == "full"
    return zlib.crc32(f"{seed}|{schedule_text}".encode()) % DETERMINISM_SAMPLE_EVERY == 0


def _judged(result: RunResult, reference: RunResult, mode: Determinism) -> ScheduleOutcome:
    """``judge`` with I10 as ``mode`` asks: a sampled schedule is re-run up front; one that
    fails without having been sampled is re-run too (a failure must say if it reproduces)."""
    twin = wants_twin(mode, result.seed, result.schedule.text())
    outcome = judge(result, reference, determinism=twin)
    if mode == "sample" and not twin and outcome.verdict != "pass":
        outcome = judge(result, reference, determinism=True)
    return outcome


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


def twins(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process", "power"),
) -> dict[str, str]:
    """Which depth-1 schedules a fast sweep folds (``sim.explore.folding``): each schedule it
    does not run, mapped to the schedule whose verdict it inherits. A folded failure is judged
    on its own run, so a fast sweep reports the naive sweep's first failure exactly when that
    failure's twin (if it has one) fails too -- what the mutant tests check."""
    store = StoreKind(store)
    _, swept, base = _described(scenario, store, seed, 1, crash_kinds, "off", None)
    kinds = tuple(swept)
    fold = folding.FoldPlan(base, kinds)
    _traced_runs(scenario, seed=seed, store=store, base=base, fold=fold)
    return fold.twin_of


def depth1_schedules(
    labels: Sequence[str],
    kinds: Iterable[CrashKind],
    *,
    base: Schedule | None = None,
    tears: dict[tuple[int, str], int] | None = None,
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


def sweep(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process", "power"),
    depth: int = 1,
    determinism: bool | Determinism = "sample",
    progress: ProgressFn | None = None,
    stop_at_first_failure: bool = False,
    fast: bool = True,
    jobs: int | None = None,
    ref: str | None = None,
    fork_from: int = FORK_FROM_BOUNDARIES,
    exhaustive: bool = True,
) -> ScenarioSweep:
    """Run every schedule of ``depth`` and judge each (without ``exhaustive``, a depth-1 sweep
    of a long trace runs the CI tier's sample of them: ``sim.explore.tier``). ``fast`` (the
    default where ``os.fork`` exists) shares the fault-free prefix by forking (see
    ``sim.explore.forking``); the naive path re-runs every schedule from scratch. Both give the
    same verdict for every schedule. A fast sweep of a short run (fewer than ``fork_from``
    boundaries) splits the naive path over ``jobs`` workers instead: there a fork costs more
    than the prefix it saves. A sampled naive sweep runs the chosen points only (no fold plan
    there to add their classes).

    ``determinism`` (I10): ``"full"`` (or ``True``) runs every schedule twice, ``"sample"`` a
    seeded 1 in ``DETERMINISM_SAMPLE_EVERY`` plus every failing one, ``"off"`` (or ``False``)
    none; the fault-free run is always checked unless off. A store that cannot be forked
    (``StoreKind.forks``: Postgres, whose state is on the server) always takes the naive
    path, one schedule after another, each in a fresh schema.

    ``stop_at_first_failure``: the schedules up to the first failure, on either path alike."""
    if depth not in (1, 2):
        raise ValueError("depth must be 1 or 2")
    mode = determinism_mode(determinism)
    started = time.perf_counter()
    forks = StoreKind(store).forks
    fast = fast and forking.AVAILABLE and depth == 1 and forks
    if fast:
        part = sweep_part(
            scenario,
            store=store,
            seed=seed,
            crash_kinds=crash_kinds,
            determinism=mode,
            progress=progress,
            jobs=jobs or parallel.default_jobs(),
            ref=ref,
            fork_from=fork_from,
            exhaustive=exhaustive,
            stop_at_first_failure=stop_at_first_failure,
        )
        out = part.sweep
        record_part(out, part)
        out.wall_s = time.perf_counter() - started
        return out
    tempdirs.remove_all_stale()  # what killed sweeps left behind
    out, kinds, base = _described(scenario, store, seed, depth, crash_kinds, mode, ref)
    reference, traced = _traced_runs(scenario, seed=seed, store=store, base=base)
    _describe(out, reference, traced, base, kinds)
    _record(out, judge(reference, reference, determinism=mode != "off"), reference)
    interrupts.stop_if_requested()  # a dropped interrupt (``record_dropped``): not a verdict
    if progress:
        progress(1)
    if out.failures:
        # Every crash schedule is judged against the fault-free run: when that run itself fails
        # (never settles, breaks an invariant), the schedules would say nothing. Stop here.
        out.reference_failed = True
    else:
        schedules = depth1_schedules(out.labels, kinds, base=base, tears=traced.trace.tear_counts)
        total = len(schedules)
        if depth == 1 and tier.sampled(total, exhaustive=exhaustive):
            out.sampled = True
            chosen = tier.select(schedules, out.labels, seed=seed, salt=f"{out.name}|{store}")
            schedules = [s for s in schedules if s.text() in chosen]
        run = _NaiveRun(out, scenario, reference, kinds, mode, progress, stop_at_first_failure)
        run.all(schedules, depth)
        _account(out, total, [s.text() for s in schedules])
    out.wall_s = time.perf_counter() - started
    return out


@dataclass(frozen=True)
class Roots:
    """Which crash points of a depth-1 fast sweep one run takes: those whose *fold root* -- the
    first point of its fold class (``sim.explore.folding``), or the point itself when it has no
    twin -- lies at a boundary index in ``[first, stop)`` (``stop`` None: to the end). A
    campaign splits a sweep into units by these ranges (docs/campaigns.md): every unit
    recomputes the same fold plan from the same traced run, so every point has exactly one
    owner, and a folded point is owned with its root, whose outcome it inherits."""

    first: int = 0
    stop: int | None = None
    # The CI tier's sample (``sim.explore.tier``): the fold roots of the chosen points, or None
    # for every root. A point is owned with its root, so its fold class is judged as a whole.
    picked: frozenset[str] | None = None

    @property
    def every(self) -> bool:
        return self.first <= 0 and self.stop is None and self.picked is None

    def owns(self, text: str, twin_of: Mapping[str, str]) -> bool:
        """Whether the point of schedule ``text`` is this run's, by its root's boundary index."""
        if self.every:
            return True
        root = twin_of.get(text, text)
        if self.picked is not None and root not in self.picked:
            return False
        index = parse_schedule(root).points[-1].index
        return self.first <= index and (self.stop is None or index < self.stop)


EVERY_POINT = Roots()


@dataclass
class SweepPart:
    """What a fast sweep (or one campaign unit of it) computed, before anything is recorded:
    the sweep's description (nothing recorded yet), the fault-free run's outcome (when this part
    records it), the forking run's check of the shared prefix (violations if it differed from
    the traced run), and the outcomes of the schedules it owns, in sweep order. ``total`` is the
    number of crash schedules of the whole sweep, every part's together."""

    sweep: ScenarioSweep
    reference: Outcome | None = None
    prefix: list[Violation] = field(default_factory=list)
    outcomes: list[tuple[str, Outcome]] = field(default_factory=list)
    total: int = 0


def sweep_part(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process", "power"),
    determinism: bool | Determinism = "sample",
    roots: Roots = EVERY_POINT,
    reference: bool = True,
    progress: ProgressFn | None = None,
    jobs: int = 1,
    ref: str | None = None,
    fork_from: int = FORK_FROM_BOUNDARIES,
    exhaustive: bool = True,
    stop_at_first_failure: bool = False,
) -> SweepPart:
    """The depth-1 fast sweep's work for the points ``roots`` owns (``record_part`` records it;
    ``sweep`` is this with every point); without ``exhaustive``, of those only the CI tier's
    sample of a long trace and their fold classes (``sim.explore.tier``). With ``reference``,
    the part carries the fault-free run's outcome, judged with I10 as ``determinism`` says;
    without, that run is judged without I10 and only to know whether the crash schedules are
    worth running. ``stop_at_first_failure``: the outcomes end at the first failure in the
    sweep's order (what the naive path records when it stops there); later points are skipped
    where they can be (a forking run forks none after a failure it has seen)."""
    mode = determinism_mode(determinism)
    tempdirs.remove_all_stale()  # what killed sweeps left behind
    out, kinds, base = _described(scenario, store, seed, 1, crash_kinds, mode, ref)
    fold = folding.FoldPlan(base, tuple(kinds))
    reference_run, traced = _traced_runs(scenario, seed=seed, store=store, base=base, fold=fold)
    _describe(out, reference_run, traced, base, kinds)
    checked = judge(reference_run, reference_run, determinism=reference and mode != "off")
    interrupts.stop_if_requested()  # as in ``sweep``: a stop is never the twin's verdict
    part = SweepPart(out)
    first = _outcome_of(checked, reference_run)
    if reference:
        part.reference = first
        if progress:
            progress(1)
    if first[0] != "pass":
        # Every crash schedule is judged against the fault-free run: when that run itself fails
        # (never settles, breaks an invariant), the schedules would say nothing. Stop here.
        return part
    out.folded = len(fold.twin_of)
    schedules = depth1_schedules(out.labels, kinds, base=base, tears=traced.trace.tear_counts)
    part.total = len(schedules)
    if tier.sampled(part.total, exhaustive=exhaustive):
        out.sampled = True
        chosen = tier.select(schedules, out.labels, seed=seed, salt=f"{out.name}|{store}")
        roots = replace(roots, picked=frozenset(fold.twin_of.get(t, t) for t in chosen))
    owns = partial(roots.owns, twin_of=fold.twin_of)
    if out.sampled:  # the folded points it judges, as an exhaustive sweep counts all of them
        out.folded = sum(1 for text in fold.twin_of if owns(text))
    stop = stop_at_first_failure
    run = _FastRun(out, scenario, reference_run, mode, progress, jobs, fold.twin_of, owns, stop)
    if len(out.labels) >= fork_from:
        part.prefix, part.outcomes = run.forked(traced, base, kinds)
    else:
        part.outcomes = run.split([s for s in schedules if owns(s.text())])
    return part


def listed_schedules(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process", "power"),
) -> tuple[int, list[Schedule]]:
    """The traced run's boundary count and the depth-1 schedules a fast sweep lists from it,
    before folding: what a campaign's planner splits into units and estimates the cost of."""
    _, kinds, base = _described(scenario, store, seed, 1, crash_kinds, "off", None)
    _, traced = _traced_runs(scenario, seed=seed, store=store, base=base)
    labels = [b.label for b in traced.trace.boundaries]
    return len(labels), depth1_schedules(labels, kinds, base=base, tears=traced.trace.tear_counts)


def record_part(out: ScenarioSweep, part: SweepPart) -> None:
    """Record ``part`` into ``out`` as the one-process sweep records it: the fault-free run's
    outcome first (a failing one stops there), then the prefix check, then every schedule."""
    base = Schedule(tuple(out.base_points))
    if part.reference is not None:
        record_outcome(out, base, part.reference)
        if out.failures:
            out.reference_failed = True
            return
    if part.prefix:
        record_parts(out, base, "nondeterminism", part.prefix, [], [], lambda: [])
    for text, outcome in part.outcomes:
        record_outcome(out, parse_schedule(text), outcome)
    _account(out, part.total, [text for text, _ in part.outcomes])


def _account(out: ScenarioSweep, total: int, texts: list[str]) -> None:
    """The CI tier's counts (``sim.explore.tier``): crash points listed and judged, strata and
    recovery classes offered and covered. A sample that misses one is the harness's error: the
    tier promises each at least once, and a run that breaks the promise must not pass."""
    kinds = swept_kinds(out)
    base = Schedule(tuple(out.base_points))
    cover = tier.coverage(texts, out.labels, kinds, base)
    out.points_total, out.points_run = total, len(texts)
    out.strata_total, out.strata_covered = cover.strata_total, cover.strata_covered
    out.recovery_classes_total = cover.classes_total
    out.recovery_classes_covered = cover.classes_covered
    if out.sampled and not cover.complete:
        shown = ", ".join(cover.missing[:5])
        why = f"the CI tier's sample missed {len(cover.missing)} of its promised cells: {shown}"
        record_parts(out, base, "error", [Violation("I0", why)], [], [], lambda: [])


def _described(
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
    out.skipped_pause = CrashKind.PAUSE in out.crash_kinds and scenario.standby_at_s() is None
    out.ref = ref or scenario.name
    out.determinism = mode
    kinds = _store_kinds(out)
    base = base_schedule(scenario, seed=seed, store=store)
    out.base_points = list(base.points)
    return out, kinds, base


def _store_kinds(out: ScenarioSweep) -> list[CrashKind]:
    """The crash kinds the store is swept with: those the simulator can inject under it
    (``StoreKind.can_inject``: no power loss or storage faults on Postgres); the results say
    what was skipped."""
    store = StoreKind(out.store)
    kinds = out.crash_kinds
    out.skipped_power = "power" in kinds and not store.can_inject("power")
    out.skipped_storage = "storage" in kinds and not store.can_inject("storage")
    return swept_kinds(out)


def swept_kinds(out: ScenarioSweep) -> list[CrashKind]:
    """The crash kinds a sweep runs: those asked for that its store can take and, for a pause,
    that its scenario can (a standby): the one place that decides it."""
    store = StoreKind(out.store)
    return [
        CrashKind(k)
        for k in out.crash_kinds
        if store.can_inject(k) and not (CrashKind(k) is CrashKind.PAUSE and out.skipped_pause)
    ]


def _traced_runs(
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


def _describe(
    out: ScenarioSweep,
    reference: RunResult,
    traced: RunResult,
    base: Schedule,
    kinds: list[CrashKind],
) -> None:
    """What the results say about the runs before any schedule: boundaries, tears, outcome."""
    out.boundaries = len(traced.trace.boundaries)
    if "power" in kinds:
        out.tear_schedules = sum(
            len(crash_points(index, When(when), CrashKind.POWER, n)) - 1
            for (index, when), n in traced.trace.tear_counts.items()
            if index > base.last_index
        )
    out.labels = [b.label for b in traced.trace.boundaries]
    for b in traced.trace.boundaries:
        out.boundary_kinds[b.kind] = out.boundary_kinds.get(b.kind, 0) + 1
    out.reference_fingerprint = reference.trace.fingerprint
    out.reference_outcome = reference.outcome
    out.effects = _effect_summary(reference)


@dataclass
class _NaiveRun:
    """The naive path: every schedule run from scratch, in the sweep's order (and, at depth 2,
    each followed by its second crashes)."""

    out: ScenarioSweep
    scenario: Scenario
    reference: RunResult
    kinds: list[CrashKind]
    mode: Determinism
    progress: ProgressFn | None
    stop_at_first_failure: bool

    def all(self, schedules: list[Schedule], depth: int) -> None:
        with collector.between_runs():
            for schedule in schedules:
                result = self.one(schedule)
                if self.progress:
                    self.progress(1)
                if self.stopped():
                    return
                if depth == 2:
                    self.deeper(schedule, result)
                    if self.stopped():
                        return

    def one(self, schedule: Schedule) -> RunResult:
        out = self.out
        result = run_scenario(self.scenario, seed=out.seed, store=out.store, schedule=schedule)
        _record(out, _judged(result, self.reference, self.mode), result)
        return result

    def stopped(self) -> bool:
        return self.stop_at_first_failure and bool(self.out.failures)

    def deeper(self, schedule: Schedule, result: RunResult) -> None:
        """A second crash at every boundary after the first (each point's seeded draw only,
        no enumerated tears)."""
        first = schedule.points[-1]
        for j in range(first.index + 1, len(result.trace.boundaries)):
            for when in (When.BEFORE, When.AFTER):
                for kind in self.kinds:
                    if not tries_kind(kind, when, result.trace.boundaries[j].label):
                        continue
                    self.one(Schedule.of(*schedule.points, CrashPoint(j, when, kind)))
                    if self.stopped():
                        return


Parts = tuple[Schedule, str, list[Violation], list[str], list[str], list[str]]
Listed = tuple[str, Outcome]  # a schedule's text and its outcome, in the sweep's order


@dataclass
class _FastRun:
    """The two fast paths over the points ``owns`` takes (by schedule text; see ``Roots``):
    each returns the outcomes in the sweep's order, a folded schedule's inherited from its twin
    (``sim.explore.folding``), for ``record_part`` to record; with ``stop``, up to the first
    failure only (a folded schedule whose twin was skipped is run on its own)."""

    out: ScenarioSweep
    scenario: Scenario
    reference: RunResult
    mode: Determinism
    progress: ProgressFn | None
    jobs: int
    twin_of: dict[str, str]
    owns: Callable[[str], bool]
    stop: bool = False

    def listed(self, texts: list[str], outcome: Callable[[str], Outcome]) -> list[Listed]:
        """``(text, outcome(text))`` in order, up to the first failure if stopping: a stopped
        worker or forking run has no outcome for what comes later."""
        listed: list[Listed] = []
        for text in texts:
            listed.append((text, outcome(text)))
            if self.stop and listed[-1][1][0] != "pass":
                break
        return listed

    def split(self, schedules: list[Schedule]) -> list[tuple[str, Outcome]]:
        """The naive path over ``jobs`` forked workers, each taking every ``jobs``-th schedule
        that has no twin."""
        out, twin_of, jobs, progress = self.out, self.twin_of, self.jobs, self.progress
        texts = [s.text() for s in schedules]
        own = [s for s, text in zip(schedules, texts, strict=True) if text not in twin_of]
        chunks = [own[i::jobs] for i in range(jobs)]
        steps = [
            parallel.Step(
                f"{out.name}[{out.store}]/{i}",
                partial(
                    _naive_parts, self.scenario, out, self.reference, chunk, self.mode, self.stop
                ),
            )
            for i, chunk in enumerate(chunks)
            if chunk
        ]
        parts: list[list[Parts]] = parallel.run_steps(steps, jobs=jobs, advance=progress)
        outcomes: dict[str, Outcome] = {}
        for k, schedule in enumerate(own):
            if k // jobs < len(parts[k % jobs]):  # a stopping worker ends at its first failure
                _, verdict, violations, labels, paths, lines = parts[k % jobs][k // jobs]
                outcomes[schedule.text()] = (verdict, violations, labels, paths, lines)

        def outcome_of(text: str) -> Outcome:
            if text not in twin_of:
                return outcomes[text]
            if progress:
                progress(1)
            return self.inherited(outcomes.get(twin_of[text]), text)

        return self.listed(texts, outcome_of)

    def inherited(self, twin: Outcome | None, text: str) -> Outcome:
        return _inherited(twin, self.scenario, self.out, text, self.reference, self.mode)

    def forked(
        self, traced: RunResult, base: Schedule, kinds: list[CrashKind]
    ) -> tuple[list[Violation], list[tuple[str, Outcome]]]:
        """The forking run (``sim.explore.forking``) and, unless I10 is off, its fingerprint
        compared with the traced run's: the prefix check."""
        out, mode, scenario = self.out, self.mode, self.scenario
        workdir = tempdirs.make("fork")
        plan = forking.ForkPlan(
            twin_of=self.twin_of,
            base=base,
            kinds=tuple(kinds),
            reference=self.reference,
            twins=lambda text: wants_twin(mode, out.seed, text),
            tears=traced.trace.tear_counts,
            jobs=self.jobs,
            workdir=workdir,
            progress=self.progress,
            owns=self.owns,
            stop_at_first_failure=self.stop,
        )
        try:
            store = StoreKind(out.store)
            parent = run_scenario(scenario, seed=out.seed, store=store, schedule=base, fork=plan)
            plan.wait_all()
            prefix: list[Violation] = []
            if mode != "off" and parent.trace.fingerprint != traced.trace.fingerprint:
                prefix = check_determinism(traced, parent)
            children: dict[str, list[dict[str, Any]]] = {}
            for text, path in plan.done:
                children.setdefault(text, []).append(_outcome_doc(path))
            equivalent = dict(plan.equivalent)

            @cache
            def forked_outcome(text: str) -> Outcome | None:
                """A forked schedule's outcome (None: a stopping sweep skipped it)."""
                docs = children.get(text)
                if docs is None:
                    return None
                outcome = _merge_twins(docs)
                if mode == "sample" and len(docs) == 1 and outcome[0] not in ("pass", "error"):
                    outcome = _late_twin(outcome, docs[0]["fingerprint"], scenario, out, text)
                return outcome

            def outcome_of(text: str) -> Outcome:
                if text in equivalent:
                    return self.inherited(forked_outcome(equivalent[text]), text)
                outcome = forked_outcome(text)
                assert outcome is not None, f"{text} was listed, never forked"
                return outcome

            return prefix, self.listed(plan.ordered(), outcome_of)
        finally:
            plan.kill_running()
            shutil.rmtree(workdir, ignore_errors=True)


def _naive_parts(
    scenario: Scenario,
    out: ScenarioSweep,
    reference: RunResult,
    schedules: list[Schedule],
    mode: Determinism,
    stop: bool,
    *,
    progress: ProgressFn,
) -> list[Parts]:
    """In a worker: run and judge each schedule as the naive path does; what ``_record``
    would record of it (the timeline only for a failure, as a report shows only those). With
    ``stop``, none after the first failure: the schedules come in the sweep's order, so the
    sweep's first failure is the earliest of the workers' first ones."""
    parts: list[Parts] = []
    with collector.between_runs():
        for schedule in schedules:
            result = run_scenario(scenario, seed=out.seed, store=out.store, schedule=schedule)
            outcome = _judged(result, reference, mode)
            lines = timeline(result) if outcome.verdict != "pass" else []
            paths = sorted(recovery_paths(result))
            parts.append(
                (schedule, outcome.verdict, outcome.violations, list(outcome.labels), paths, lines)
            )
            progress(1)
            if stop and outcome.verdict != "pass":
                break
    return parts


def _inherited(
    twin: Outcome | None,
    scenario: Scenario,
    out: ScenarioSweep,
    text: str,
    reference: RunResult,
    mode: Determinism,
) -> Outcome:
    """The outcome of a schedule whose future is the same as ``twin``'s (``sim.explore.folding``):
    a pass is inherited as it is. A failure is run and judged again as the naive sweep would:
    its report must show *its* crash, timeline and witnesses (boundary numbers differ between
    the two), and I10 must say if it reproduces. An error is inherited too: re-running the
    harness's own failure here could raise or hang again. Without ``twin`` (a stopping sweep
    skipped it) it is run and judged on its own."""
    if twin is not None and twin[0] in ("pass", "error"):
        return twin
    result = run_scenario(scenario, seed=out.seed, store=out.store, schedule=parse_schedule(text))
    outcome = _judged(result, reference, mode)
    lines = timeline(result) if outcome.verdict != "pass" else []
    paths = sorted(recovery_paths(result))
    return outcome.verdict, outcome.violations, list(outcome.labels), paths, lines


def _late_twin(
    outcome: Outcome, fingerprint: str, scenario: Scenario, out: ScenarioSweep, text: str
) -> Outcome:
    """I10 for a failing schedule the sample did not twin: run it again here and compare."""
    again = run_scenario(scenario, seed=out.seed, store=out.store, schedule=parse_schedule(text))
    differs = compare_fingerprints(fingerprint, again.trace.fingerprint)
    if not differs:
        return outcome
    _, violations, labels, paths, lines = outcome
    violations = [*violations, *differs]
    return verdict_of(violations), violations, labels, paths, lines


def _outcome_doc(path: str) -> dict[str, Any]:
    """A child's outcome file; one that cannot be read is the harness's error, not a verdict."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"unreadable outcome {path}: {exc}"}
    return doc if isinstance(doc, dict) else {"error": f"malformed outcome {path}"}


def _merge_twins(docs: list[dict[str, Any]]) -> Outcome:
    """One schedule's outcome from its child (or twin children: I10 compares their prints)."""
    for doc in docs:
        if "error" in doc:
            return (
                "error",
                [Violation("I0", f"harness error in a forked child: {doc['error']}")],
                [],
                [],
                [],
            )
    first = docs[0]
    violations = [Violation.from_json(v) for v in first["violations"]]
    if len(docs) > 1:
        violations += compare_fingerprints(first["fingerprint"], docs[1]["fingerprint"])
    verdict = verdict_of(violations)
    return verdict, violations, first["labels"], first["paths"], first["timeline"]


def _record(out: ScenarioSweep, outcome: ScheduleOutcome, result: RunResult) -> None:
    record_parts(
        out,
        outcome.schedule,
        outcome.verdict,
        outcome.violations,
        list(outcome.labels),
        sorted(recovery_paths(result)),
        lambda: timeline(result),
    )


def _outcome_of(outcome: ScheduleOutcome, result: RunResult) -> Outcome:
    """What ``_record`` records of a judged run (its timeline only if it failed)."""
    lines = timeline(result) if outcome.verdict != "pass" else []
    paths = sorted(recovery_paths(result))
    return outcome.verdict, outcome.violations, list(outcome.labels), paths, lines


def _effect_summary(result: RunResult) -> dict[str, int]:
    summary: dict[str, int] = {}
    for effect in result.outside.ledger:
        if effect.applied:
            key = f"{effect.service}.{effect.op}"
            summary[key] = summary.get(key, 0) + 1
    return summary
