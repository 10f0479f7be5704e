"""A sweep's two entry points: ``sweep`` (every schedule of a scenario on one store, recorded)
and ``sweep_part`` (a fast sweep's work for the points one run owns, unrecorded: a campaign
unit's, or the whole sweep's). Both take what is swept as one ``SweepPlan``
(``sim.explore.plan``); their keyword arguments say only how it is executed (progress, forking,
workers), which changes no verdict."""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial

from sim.explore import folding, forking, interrupts, parallel, tier
from sim.explore.plan import SweepPlan
from sim.explore.recording import Judged, ScenarioSweep
from sim.explore.sweep.fast import FastRun
from sim.explore.sweep.modes import FORK_FROM_BOUNDARIES
from sim.explore.sweep.naive import NaiveRun, ProgressFn, record_reference
from sim.explore.sweep.parts import SweepPart, account, record_part
from sim.explore.sweep.prepare import depth1_schedules, describe, described, traced_runs
from sim.judgement.judge import judge
from sim.judgement.oracles import Verdict
from sim.world import tempdirs


def sweep(
    plan: SweepPlan,
    *,
    progress: ProgressFn | None = None,
    fast: bool = True,
    jobs: int | None = None,
    fork_from: int = FORK_FROM_BOUNDARIES,
) -> ScenarioSweep:
    """Run every schedule of ``plan.depth`` and judge each (without ``plan.exhaustive``, a
    depth-1 sweep of a long trace runs the CI tier's sample of them: ``sim.explore.tier``).
    ``fast`` (the default where ``os.fork`` exists) shares the fault-free prefix by forking (see
    ``sim.explore.forking``); the naive path re-runs every schedule from scratch. Both give the
    same verdict for every schedule. A fast sweep of a short run (fewer than ``fork_from``
    boundaries) splits the naive path over ``jobs`` workers instead: there a fork costs more
    than the prefix it saves. A sampled naive sweep runs the chosen points only (no fold plan
    there to add their classes).

    ``plan.determinism`` (I10): ``"full"`` runs every schedule twice, ``"sample"`` a seeded 1
    in ``DETERMINISM_SAMPLE_EVERY`` plus every failing one, ``"off"`` none; the fault-free run
    is always checked unless off. A store that cannot be forked (``StoreKind.forks``:
    Postgres, whose state is on the server) always takes the naive path, one schedule after
    another, each in a fresh schema; so does a depth-2 plan, which must then own every point
    (``plan.roots``: a range of them is ``sweep_part``'s).

    ``plan.stop_at_first_failure``: the schedules up to the first failure, on either path
    alike."""
    started = time.perf_counter()
    if fast and forking.AVAILABLE and plan.depth == 1 and plan.store.forks:
        part = sweep_part(
            plan, progress=progress, jobs=jobs or parallel.default_jobs(), fork_from=fork_from
        )
        out = part.sweep
        record_part(out, part)
        out.wall_s = time.perf_counter() - started
        return out
    if not plan.roots.every:
        raise ValueError("a naive sweep runs every crash point: a plan's roots are sweep_part's")
    out = _naive(plan, progress)
    out.wall_s = time.perf_counter() - started
    return out


def _naive(plan: SweepPlan, progress: ProgressFn | None) -> ScenarioSweep:
    """``sweep``'s naive path: every schedule from scratch, in this process, recorded."""
    scenario, store, seed, depth = plan.scenario, plan.store, plan.seed, plan.depth
    mode = plan.determinism
    tempdirs.remove_all_stale()  # what killed sweeps left behind
    out, kinds, base = described(scenario, store, seed, depth, plan.crash_kinds, mode, plan.ref)
    reference, traced = traced_runs(scenario, seed=seed, store=store, base=base)
    describe(out, reference, traced, base, kinds)
    record_reference(out, reference, mode)
    interrupts.stop_if_requested()  # a dropped interrupt (``record_dropped``): not a verdict
    if progress:
        progress(1)
    if out.failures:
        # Every crash schedule is judged against the fault-free run: when that run itself fails
        # (never settles, breaks an invariant), the schedules would say nothing. Stop here.
        out.reference.failed = True
        return out
    schedules = depth1_schedules(
        out.reference.labels, kinds, base=base, tears=traced.trace.tear_counts
    )
    total = len(schedules)
    if depth == 1 and tier.sampled(total, exhaustive=plan.exhaustive):
        out.sample.sampled = True
        chosen = tier.select(schedules, out.reference.labels, seed=seed, salt=f"{out.name}|{store}")
        schedules = [s for s in schedules if s.text() in chosen]
    stop = plan.stop_at_first_failure
    run = NaiveRun(out, scenario, reference, kinds, mode, progress, stop)
    run.all(schedules, depth)
    account(out, total, [s.text() for s in schedules])
    return out


def sweep_part(
    plan: SweepPlan,
    *,
    reference: bool = True,
    progress: ProgressFn | None = None,
    jobs: int = 1,
    fork_from: int = FORK_FROM_BOUNDARIES,
) -> SweepPart:
    """The depth-1 fast sweep's work for the points ``plan.roots`` owns (``record_part``
    records it; ``sweep`` is this with every point); without ``plan.exhaustive``, of those only
    the CI tier's sample of a long trace and their fold classes (``sim.explore.tier``). With
    ``reference``, the part carries the fault-free run's outcome, judged with I10 as
    ``plan.determinism`` says; without, that run is judged without I10 and only to know whether
    the crash schedules are worth running. ``plan.stop_at_first_failure``: the outcomes end at
    the first failure in the sweep's order (what the naive path records when it stops there);
    later points are skipped where they can be (a forking run forks none after a failure it
    has seen). A depth-2 plan is refused (``ValueError``): only the naive path crashes twice."""
    if plan.depth != 1:
        raise ValueError("sweep_part sweeps depth 1: a second crash is the naive path's")
    scenario, store, seed, mode = plan.scenario, plan.store, plan.seed, plan.determinism
    tempdirs.remove_all_stale()  # what killed sweeps left behind
    out, kinds, base = described(scenario, store, seed, 1, plan.crash_kinds, mode, plan.ref)
    fold = folding.FoldPlan(base, tuple(kinds))
    reference_run, traced = traced_runs(scenario, seed=seed, store=store, base=base, fold=fold)
    describe(out, reference_run, traced, base, kinds)
    checked = judge(reference_run, reference_run, determinism=reference and mode != "off")
    interrupts.stop_if_requested()  # as in ``sweep``: a stop is never the second run's verdict
    part = SweepPart(out)
    first = Judged.of_run(checked, reference_run)
    if reference:
        part.reference = first
        if progress:
            progress(1)
    if first.verdict is not Verdict.PASS:
        # Every crash schedule is judged against the fault-free run: when that run itself fails
        # (never settles, breaks an invariant), the schedules would say nothing. Stop here.
        return part
    out.expansion.folded = len(fold.twin_of)
    schedules = depth1_schedules(
        out.reference.labels, kinds, base=base, tears=traced.trace.tear_counts
    )
    part.total = len(schedules)
    roots = plan.roots
    if tier.sampled(part.total, exhaustive=plan.exhaustive):
        out.sample.sampled = True
        chosen = tier.select(schedules, out.reference.labels, seed=seed, salt=f"{out.name}|{store}")
        roots = replace(roots, picked=frozenset(fold.twin_of.get(t, t) for t in chosen))
    owns = partial(roots.owns, twin_of=fold.twin_of)
    if out.sample.sampled:  # the folded points it judges, as an exhaustive sweep counts all of them
        out.expansion.folded = sum(1 for text in fold.twin_of if owns(text))
    stop = plan.stop_at_first_failure
    run = FastRun(out, scenario, reference_run, mode, progress, jobs, fold.twin_of, owns, stop)
    if len(out.reference.labels) >= fork_from:
        part.prefix, part.outcomes = run.forked(traced, base, kinds)
    else:
        part.outcomes = run.split([s for s in schedules if owns(s.text())])
    return part
