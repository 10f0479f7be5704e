"""Rejoin pruning: a crashed run stops where it rejoins the fault-free run (architecture 2.5).

``sim.explore.rejoin`` measures how often a crashed child's canonical view equals the fault-free
run's at a later commit. ``--prune rejoin`` acts on it: each depth-1 child of a process or power
crash runs under a ``PruneProbe``, which ends the world (``Injector.stop_world``) at the first
commit whose renamed view equals the fault-free run's at a commit that ended after the crash.
The rest of the child is then, *by assumption*, the rest of the fault-free run renamed, and the
fault-free run passed every oracle. What happened between the crash and the rejoin (the window)
is judged on the stopped run by every oracle whose violation on a prefix is one on the whole
run; the ones that judge how a run ends (``Invariant.judged_at_end``; and the parts of I5 and I6
that need a settled world, which skip an unsettled run themselves) inherit the fault-free run's
pass. A schedule whose window fails is run to its end and judged as the exact sweep judges it,
so a failure's report is the exact one.

The assumption is checked, never trusted: on a seeded 1 in ``CHECK_EVERY`` of the pruned
schedules (every one with ``--prune-check full``) the child is also run to its end, and its
verdict and its canonical views from the rejoin on must equal the pruned verdict and the
fault-free run's views. A mismatch (a runtime that branches on an absolute sequence number,
epoch or time; a view that misses what decides the future) is a harness error
(``RejoinBroken``) naming the first commit where they differ, and the sweep of that scenario is
run again without pruning, so every verdict it reports is the exact one.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from sim.explore import interrupts
from sim.explore import sweep as exact
from sim.explore.plan import SweepPlan
from sim.explore.recording import Judged, ScenarioSweep, record_outcome
from sim.explore.rejoin import COMPONENTS, MEASURED_KINDS, VIEWS, CanonicalProbe, Row
from sim.explore.sweep import naive, parts, prepare
from sim.judgement.invariants import invariant
from sim.judgement.judge import ScheduleOutcome, judge
from sim.judgement.oracles import Violation, check, check_determinism, verdict_of
from sim.run import collector
from sim.run.runner import RunResult, run_scenario
from sim.world import tempdirs
from sim.world.faults import Schedule, When
from sim.world.injector import ForkHook, Injector, Victim
from sim.world.scenario import Scenario

PruneMode = Literal["off", "rejoin"]
PRUNE_MODES: tuple[PruneMode, ...] = ("off", "rejoin")
PruneCheck = Literal["sample", "full"]
PRUNE_CHECKS: tuple[PruneCheck, ...] = ("sample", "full")

#: With ``sample``, one pruned schedule in this many is also run to its end and compared.
CHECK_EVERY = 16

#: The view a child must rejoin in: everything but trio's scheduler RNG, which a process started
#: after a crash reseeds (``sim.explore.rejoin.VIEWS``); the full-suffix check covers the rest.
PRUNED_VIEW = "renamed"
assert PRUNED_VIEW in VIEWS


def prune_check(value: str) -> PruneCheck:
    """A ``--prune-check`` value, validated eagerly."""
    for mode in PRUNE_CHECKS:
        if value == mode:
            return mode
    raise ValueError(f"prune check must be one of {', '.join(PRUNE_CHECKS)}: {value!r}")


def wants_check(mode: PruneCheck, seed: int, schedule_text: str) -> bool:
    """Whether a pruned schedule is also run to its end: every one with ``full``; with
    ``sample`` a seeded 1 in ``CHECK_EVERY`` by a hash of (seed, schedule), stable across
    processes and hash seeds (as I10's sample, ``sim.explore.sweep.wants_rerun``)."""
    if mode == "full":
        return True
    return zlib.crc32(f"rejoin|{seed}|{schedule_text}".encode()) % CHECK_EVERY == 0


class RejoinBroken(Exception):
    """The full-suffix check found a pruned child whose whole run differs from what pruning
    assumed: a harness error, which turns pruning off for the scenario."""


@dataclass(frozen=True)
class Reference:
    """The fault-free run's views at the end of each commit (``Row``: the boundaries entered by
    then and each component's digest) and their keys in the pruned view."""

    rows: tuple[Row, ...]
    keys: tuple[str, ...]  # each row's, computed once: every schedule looks them up

    @classmethod
    def of(cls, probe: CanonicalProbe) -> Reference:
        rows = tuple(probe.rows)
        return cls(rows, tuple(r.key(PRUNED_VIEW) for r in rows))

    def after(self, crashed_at: int) -> dict[str, int]:
        """Each key's first commit that ended after boundary ``crashed_at`` (where a child
        crashed there may rejoin)."""
        out: dict[str, int] = {}
        for position, key in enumerate(self.keys):
            if self.rows[position].stamp > crashed_at:
                out.setdefault(key, position)
        return out


@dataclass
class PruneProbe(CanonicalProbe):
    """A ``CanonicalProbe`` that ends the world at the first commit where the child's renamed
    view equals the fault-free run's at a commit that ended after the crash (``lookup``:
    ``Reference.after``). ``met`` is then (the child's commit, the reference's)."""

    lookup: dict[str, int] = field(default_factory=dict)
    met: tuple[int, int] | None = None

    def fork_at(
        self, injector: Injector, process: Victim, index: int, when: When, label: str
    ) -> None:
        viewed = len(self.rows)
        super().fork_at(injector, process, index, when, label)
        if self.met is not None or len(self.rows) == viewed:
            return
        position = self.lookup.get(self.rows[-1].key(PRUNED_VIEW))
        if position is not None:
            self.met = (len(self.rows) - 1, position)
            injector.stop_world()


def window_violations(result: RunResult, reference: RunResult) -> list[Violation]:
    """The oracles' violations on a pruned run (``Trace.halted_at``): all but those of the
    invariants judged at a run's end, which the fault-free run's pass stands for."""
    assert result.trace.halted_at is not None
    return [v for v in check(result, reference) if not invariant(v.invariant).judged_at_end]


def _verdict_codes(outcome: ScheduleOutcome) -> list[str]:
    return [v.invariant for v in outcome.violations if v.invariant != "I10"]


def suffix_mismatch(met: tuple[int, int], full: CanonicalProbe, reference: Reference) -> str | None:
    """Where a child run to its end (``full``) leaves the fault-free run after the commit its
    pruned run rejoined at (``met``): None if every later view equals the reference's."""
    child_at, reference_at = met
    ours, theirs = full.rows[child_at:], reference.rows[reference_at:]
    for offset, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a.key(PRUNED_VIEW) != b.key(PRUNED_VIEW):
            left_out = VIEWS[PRUNED_VIEW]
            parts = [c for c in COMPONENTS if c not in left_out and a.digests[c] != b.digests[c]]
            return (
                f"{offset} commit(s) after the rejoin (the child's boundary {a.stamp}, the "
                f"fault-free run's {b.stamp}) the views differ in {', '.join(parts)}"
            )
    if len(ours) != len(theirs):
        return (
            f"the child ran {len(ours)} commits from the rejoin, the fault-free run {len(theirs)}"
        )
    return None


@dataclass
class _Pruner:
    """One scenario's pruned sweep: its fault-free run, and the views it is compared with."""

    scenario: Scenario
    out: ScenarioSweep
    reference: RunResult
    views: Reference
    determinism: exact.Determinism
    check_mode: PruneCheck

    def run(self, schedule: Schedule, fork: ForkHook | None = None) -> RunResult:
        out = self.out
        return run_scenario(
            self.scenario, seed=out.seed, store=out.store, schedule=schedule, fork=fork
        )

    def probed(self, schedule: Schedule) -> tuple[RunResult, PruneProbe]:
        probe = PruneProbe(schedule, lookup=self.views.after(schedule.last_index))
        return self.run(schedule, probe), probe

    def judge(self, schedule: Schedule) -> tuple[ScheduleOutcome, RunResult]:
        """One schedule's verdict: pruned where its child rejoins (checked to its end when
        ``wants_check`` says so), else judged on its whole run as an exact sweep does."""
        if schedule.points[-1].kind not in MEASURED_KINDS:  # not a crash of a process
            result = self.run(schedule)
            return exact.judge_as(result, self.reference, self.determinism), result
        result, probe = self.probed(schedule)
        if probe.met is None:
            return exact.judge_as(result, self.reference, self.determinism), result
        stats = self.out.prune
        assert stats is not None
        stats["pruned"] += 1
        seed, text = self.out.seed, schedule.text()
        outcome = self.pruned_outcome(result, exact.wants_rerun(self.determinism, seed, text))
        if wants_check(self.check_mode, seed, text):
            stats["checked"] += 1
            self.check_suffix(schedule, probe.met, outcome)
        if outcome.verdict != "pass":
            # A failure is reported as the exact sweep reports it: every violation of the
            # whole run, its timeline and recovery paths, and I10 on it whatever the sample
            # drew, as ``exact.judge_as`` does (failures are few; this costs little).
            whole = self.run(schedule)
            return exact.judge_as(whole, self.reference, self.determinism), whole
        return outcome, result

    def pruned_outcome(self, result: RunResult, rerun: bool) -> ScheduleOutcome:
        violations = window_violations(result, self.reference)
        if rerun:
            violations += check_determinism(result, self.probed(result.schedule)[0])
        labels = tuple(c.label for c in result.trace.crashes)
        fingerprint = result.trace.fingerprint
        return ScheduleOutcome(
            result.schedule, verdict_of(violations), violations, fingerprint, labels
        )

    def check_suffix(
        self, schedule: Schedule, met: tuple[int, int], pruned: ScheduleOutcome
    ) -> None:
        """Run the child to its end: its verdict and its views from the rejoin on must be the
        pruned verdict and the fault-free run's views, else ``RejoinBroken``."""
        probe = CanonicalProbe(schedule)
        full = self.run(schedule, probe)
        whole = judge(full, self.reference, determinism=False)
        where = f"{self.out.name}/{self.out.store} {schedule.text()}"
        if _verdict_codes(whole) != _verdict_codes(pruned):
            raise RejoinBroken(
                f"{where}: run to its end it is {whole.verdict} {_verdict_codes(whole)}, "
                f"pruned at its rejoin {pruned.verdict} {_verdict_codes(pruned)}"
            )
        mismatch = suffix_mismatch(met, probe, self.views)
        if mismatch is not None:
            raise RejoinBroken(f"{where}: rejoined the fault-free run, then left it: {mismatch}")


def sweep(
    plan: SweepPlan,
    *,
    check_mode: PruneCheck | str = "sample",
    progress: Callable[[int], None] | None = None,
) -> ScenarioSweep:
    """The depth-1 sweep of ``--prune rejoin``: every schedule of the exact sweep, each run
    from scratch and stopped where it rejoins the fault-free run (see the module's docstring).
    A ``RejoinBroken`` from the full-suffix check is recorded in ``prune`` and the scenario is
    swept again exactly (``sim.explore.sweep.sweep``): its verdicts are then the exact ones.
    ``plan.stop_at_first_failure`` as the exact sweep's: the same schedules, the same first
    failure. A plan it cannot run as asked is refused (``ValueError``): a server's store, timed
    crashes, depth 2, a range of roots or the CI tier's sample (it judges every point)."""
    checking = prune_check(check_mode)
    _check_plan(plan)
    scenario, kind, seed, mode = plan.scenario, plan.store, plan.seed, plan.determinism
    started = time.perf_counter()
    tempdirs.remove_all_stale()  # what killed sweeps left behind
    out, kinds, base = prepare.described(scenario, kind, seed, 1, plan.crash_kinds, mode, plan.ref)
    reference, traced = prepare.traced_runs(scenario, seed=seed, store=kind, base=base)
    prepare.describe(out, reference, traced, base, kinds)
    stats: dict[str, str | int] = {"mode": "rejoin", "check": checking, "pruned": 0, "checked": 0}
    out.prune = stats
    naive.record_reference(out, reference, mode)
    if progress:
        progress(1)
    if out.failures:
        out.reference.failed = True  # as an exact sweep: the crash schedules would say nothing
        out.wall_s = time.perf_counter() - started
        return out
    probe = CanonicalProbe(base)
    run_scenario(scenario, seed=seed, store=kind, schedule=base, fork=probe)
    pruner = _Pruner(scenario, out, reference, Reference.of(probe), mode, checking)
    schedules = exact.depth1_schedules(
        out.reference.labels, kinds, base=base, tears=traced.trace.tear_counts
    )
    try:
        _judge_all(pruner, schedules, plan.stop_at_first_failure, progress)
    except RejoinBroken as broken:
        again = exact.sweep(plan)
        again.prune = {**stats, "broken": str(broken)}
        again.wall_s = time.perf_counter() - started
        return again
    parts.account(out, len(schedules), [s.text() for s in schedules])
    out.wall_s = time.perf_counter() - started
    return out


def _check_plan(plan: SweepPlan) -> None:
    """Refuse what a pruned sweep does not run, before any run."""
    if not plan.store.forks:  # a server's store: no simulated file system to view
        raise ValueError(f"--prune rejoin runs on the simulated stores only, not {plan.store}")
    if plan.scenario.timed_crashes:  # due at absolute times, which the canonical view renames away
        raise ValueError(f"--prune rejoin cannot sweep {plan.scenario.name}: it has timed crashes")
    if plan.depth != 1:
        raise ValueError("--prune rejoin sweeps depth 1 only (a second crash is not pruned)")
    if not plan.roots.every or not plan.exhaustive:
        raise ValueError("--prune rejoin sweeps every crash point: no roots, no CI-tier sample")


def _judge_all(
    pruner: _Pruner,
    schedules: list[Schedule],
    stop_at_first_failure: bool,
    progress: Callable[[int], None] | None,
) -> None:
    """Judge and record each schedule in order (a ``RejoinBroken`` leaves ``pruner.out`` half
    recorded: the caller sweeps again)."""
    with collector.between_runs():
        for schedule in schedules:
            interrupts.stop_if_requested()
            outcome, result = pruner.judge(schedule)
            record_outcome(pruner.out, outcome.schedule, Judged.of_run(outcome, result))
            if progress:
                progress(1)
            if stop_at_first_failure and pruner.out.failures:
                return
