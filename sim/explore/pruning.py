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
schedules (every one with ``--prune-check full``) the child is also run to its end (a forked
child forks that run at its rejoin, ``PruneForkPlan``), and its verdict and its canonical views
from the rejoin on must equal the pruned verdict and the fault-free run's views. A mismatch
(a runtime that branches on an absolute sequence number, epoch or time; a view that misses what
decides the future) is a harness error (``RejoinBroken``) naming the first commit where they
differ, and the sweep of that scenario is run again without pruning, so every verdict it
reports is the exact one.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast

from sim.explore import folding, forking, interrupts, parallel
from sim.explore import sweep as exact
from sim.explore.plan import SweepPlan
from sim.explore.recording import Judged, ScenarioSweep, record_outcome
from sim.explore.rejoin import (
    COMPONENTS,
    MEASURED_KINDS,
    SKETCHED,
    VIEWED,
    VIEWS,
    CanonicalProbe,
    Row,
    sketch,
)
from sim.explore.sweep import naive, parts, prepare
from sim.explore.sweep.fast import FastRun, merged, outcome_doc
from sim.judgement.invariants import invariant
from sim.judgement.judge import ScheduleOutcome, judge
from sim.judgement.oracles import Verdict, Violation, check, check_determinism, verdict_of
from sim.run import collector
from sim.run.runner import RunResult, run_scenario
from sim.world import tempdirs
from sim.world.faults import Schedule, When, parse_schedule
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
assert not VIEWS[PRUNED_VIEW] & SKETCHED, "a child's sketch must be a function of its view"


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

    def sketches_after(self, crashed_at: int) -> frozenset[str]:
        """The sketches of the commits that ended after boundary ``crashed_at``."""
        return frozenset(row.sketch for row in self.rows if row.stamp > crashed_at)

    def probe(self, schedule: Schedule, *, in_child: bool = False) -> PruneProbe:
        """The probe of a child crashed by ``schedule``."""
        crashed_at = schedule.last_index
        return PruneProbe(
            schedule,
            in_child=in_child,
            lookup=self.after(crashed_at),
            sketches=self.sketches_after(crashed_at),
        )


@dataclass
class PruneProbe(CanonicalProbe):
    """A ``CanonicalProbe`` that ends the world at the first commit where the child's renamed
    view equals the fault-free run's at a commit that ended after the crash (``lookup``:
    ``Reference.after``). ``met`` is then (the child's commit, the reference's), the child's
    counted from its crash. A commit whose ``sketch`` is none of the fault-free run's there
    (``sketches``) cannot meet it: its full view is not taken (nor a row kept)."""

    lookup: dict[str, int] = field(default_factory=dict)
    sketches: frozenset[str] = frozenset()
    met: tuple[int, int] | None = None
    commits: int = 0  # the commits viewed or sketched since the crash
    # Called at the rejoin: True in a process that runs on to the end instead of stopping
    # there (``PruneForkPlan``'s full-suffix check), which then views every later commit.
    on_meet: Callable[[], bool] | None = None
    following: bool = False
    met_row: int = 0  # the rejoin's row in ``rows``

    def fork_at(
        self, injector: Injector, process: Victim, index: int, when: When, label: str
    ) -> None:
        if self.following:
            super().fork_at(injector, process, index, when, label)
            return
        if self.met is not None or when != "after" or not label.startswith(VIEWED):
            return
        if not injector.crashed_at(self.base.points[-1]):
            return
        self.commits += 1
        if sketch(injector, when, label) not in self.sketches:
            return
        viewed = len(self.rows)
        super().fork_at(injector, process, index, when, label)
        assert len(self.rows) == viewed + 1, "a sketched commit is viewed"
        position = self.lookup.get(self.rows[-1].key(PRUNED_VIEW))
        if position is not None:
            self.met = (self.commits - 1, position)
            self.met_row = len(self.rows) - 1
            if self.on_meet is not None and self.on_meet():
                self.following = True
                return
            injector.stop_world()


@dataclass
class PruneForkPlan(forking.ForkPlan):
    """The forking run of a pruned sweep: a child forks at its crash point as the exact
    sweep's do (``sim.explore.forking``: the prefix is run once, not once per schedule). A
    child of a process or power crash then runs under a ``PruneProbe``: it ends its world at
    its rejoin and is judged on its window (``window_outcome``), and its outcome says where
    it met the fault-free run (``met``: its commit, the fault-free run's). Any other child
    runs to its end and is judged as the exact sweep's."""

    views: Reference | None = None  # the fault-free run's views (the parent's, inherited)
    probe: PruneProbe | None = None  # a child's, once its crash has happened
    checks: Callable[[str], bool] = field(default=lambda text: False)  # ``wants_check``
    checker_pid: int = 0  # in a pruned child: its full-suffix check's process

    def fork_at(
        self, injector: Injector, process: Victim, index: int, when: When, label: str
    ) -> None:
        if not self.in_child:
            super().fork_at(injector, process, index, when, label)
            return
        if self.probe is None:
            schedule = self.child_schedule
            if schedule.points[-1].kind not in MEASURED_KINDS:
                return
            assert self.views is not None
            self.probe = self.views.probe(schedule, in_child=True)
            if self.child_copy == 0 and self.checks(schedule.text()):
                self.probe.on_meet = self._fork_check
        self.probe.fork_at(injector, process, index, when, label)

    def _fork_check(self) -> bool:
        """At a checked child's rejoin: fork its full-suffix check, which runs on to the end
        from here (True in it) while the child stops. The check then costs the suffix alone,
        beside the other children, not a whole run from scratch in the parent."""
        pid = forking.fork_within_child()
        if pid == 0:
            self.child_out = f"{self.child_out}.check"
            return True
        self.checker_pid = pid
        return False

    def finish_child(self, result: RunResult) -> None:
        probe = self.probe
        if probe is not None and probe.following:  # this process is a full-suffix check
            self._leave(self._check_doc(result), 0)
        if probe is None or probe.met is None:
            super().finish_child(result)
            return
        try:
            judged = Judged.of_run(window_outcome(result, self.reference), result)
            doc: dict[str, object] = {
                "schedule": result.schedule.text(),
                "fingerprint": result.trace.fingerprint,
                "met": list(probe.met),
                **judged.to_json(),
            }
            if self.checker_pid:
                doc["check"] = self._checked()
        except BaseException as exc:  # the child must always report and exit
            doc = {"error": f"{type(exc).__name__}: {exc}"}
        self._leave(doc, 0)

    def _check_doc(self, result: RunResult) -> dict[str, object]:
        """What a full-suffix check reports: its whole run's verdict, and where its views leave
        the fault-free run's after the rejoin (``suffix_mismatch``)."""
        probe = self.probe
        try:
            assert probe is not None and probe.met is not None and self.views is not None
            whole = judge(result, self.reference, determinism=False)
            return {
                "verdict": str(whole.verdict),
                "codes": _verdict_codes(whole.violations),
                "mismatch": rows_mismatch(probe.rows[probe.met_row :], self.views, probe.met[1]),
            }
        except BaseException as exc:  # the check must always report and exit
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _checked(self) -> dict[str, object]:
        """The check's report, once its process has ended (killed if it overruns the bound a
        child has: an error, and the parent then runs the check from scratch)."""
        pid, deadline = self.checker_pid, time.monotonic() + self.child_timeout_s
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() >= deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"error": f"the check did not end within {self.child_timeout_s:g} s"}
            forking.wait_for_exit([pid], deadline - time.monotonic())
        return outcome_doc(f"{self.child_out}.check")


def window_violations(result: RunResult, reference: RunResult) -> list[Violation]:
    """The oracles' violations on a pruned run (``Trace.halted_at``): all but those of the
    invariants judged at a run's end, which the fault-free run's pass stands for."""
    assert result.trace.halted_at is not None
    return [v for v in check(result, reference) if not invariant(v.invariant).judged_at_end]


def window_outcome(
    result: RunResult, reference: RunResult, again: RunResult | None = None
) -> ScheduleOutcome:
    """A pruned run's outcome: its window's violations (``window_violations``), and I10 against
    ``again`` (the same schedule pruned a second time) if given."""
    violations = window_violations(result, reference)
    if again is not None:
        violations += check_determinism(result, again)
    labels = tuple(c.label for c in result.trace.crashes)
    fingerprint = result.trace.fingerprint
    return ScheduleOutcome(result.schedule, verdict_of(violations), violations, fingerprint, labels)


def _verdict_codes(violations: tuple[Violation, ...] | list[Violation]) -> list[str]:
    return [v.invariant for v in violations if v.invariant != "I10"]


def suffix_mismatch(met: tuple[int, int], full: CanonicalProbe, reference: Reference) -> str | None:
    """Where a child run to its end (``full``) leaves the fault-free run after the commit its
    pruned run rejoined at (``met``): None if every later view equals the reference's."""
    child_at, reference_at = met
    return rows_mismatch(full.rows[child_at:], reference, reference_at)


def rows_mismatch(ours: list[Row], reference: Reference, reference_at: int) -> str | None:
    """``suffix_mismatch`` of a child's rows from its rejoin on (``ours``), the fault-free
    run's from its commit ``reference_at`` on."""
    theirs = reference.rows[reference_at:]
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
        probe = self.views.probe(schedule)
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
            self.check_suffix(schedule, probe.met, outcome.violations)
        if outcome.verdict != "pass":
            return self.whole(schedule)
        return outcome, result

    def whole(self, schedule: Schedule) -> tuple[ScheduleOutcome, RunResult]:
        """A failing pruned schedule, reported as the exact sweep reports it: every violation
        of the whole run, its timeline and recovery paths, and I10 on it whatever the sample
        drew, as ``exact.judge_as`` does (failures are few; this costs little)."""
        whole = self.run(schedule)
        return exact.judge_as(whole, self.reference, self.determinism), whole

    def settle(
        self,
        schedule: Schedule,
        met: tuple[int, int],
        pruned: Judged,
        check: dict[str, object] | None = None,
    ) -> Judged:
        """What the forked path records of a child pruned at its rejoin (``met``), judged on
        its window as ``pruned``: checked to its end when ``wants_check`` says so (by the
        ``check`` its child forked at the rejoin, ``PruneForkPlan``; from scratch here if that
        check failed to report), a failure run whole, as ``judge`` does for the naive path."""
        stats = self.out.prune
        assert stats is not None
        stats["pruned"] += 1
        if wants_check(self.check_mode, self.out.seed, schedule.text()):
            stats["checked"] += 1
            codes = check.get("codes") if check is not None else None
            if check is None or "error" in check or not isinstance(codes, list):
                self.check_suffix(schedule, met, pruned.violations)
            else:
                mismatch = check.get("mismatch")
                shown = None if mismatch is None else str(mismatch)
                whole = (str(check.get("verdict")), [str(c) for c in codes])
                self.judge_check(schedule, pruned.violations, whole, shown)
        if pruned.verdict is not Verdict.PASS:
            return Judged.of_run(*self.whole(schedule))
        return pruned

    def pruned_outcome(self, result: RunResult, rerun: bool) -> ScheduleOutcome:
        again = self.probed(result.schedule)[0] if rerun else None
        return window_outcome(result, self.reference, again)

    def check_suffix(
        self,
        schedule: Schedule,
        met: tuple[int, int],
        pruned: tuple[Violation, ...] | list[Violation],
    ) -> None:
        """Run the child to its end: its verdict and its views from the rejoin on must be the
        pruned verdict and the fault-free run's views, else ``RejoinBroken``."""
        probe = CanonicalProbe(schedule)
        full = self.run(schedule, probe)
        whole = judge(full, self.reference, determinism=False)
        codes = _verdict_codes(whole.violations)
        mismatch = suffix_mismatch(met, probe, self.views)
        self.judge_check(schedule, pruned, (str(whole.verdict), codes), mismatch)

    def judge_check(
        self,
        schedule: Schedule,
        pruned: tuple[Violation, ...] | list[Violation],
        whole: tuple[str, list[str]],
        mismatch: str | None,
    ) -> None:
        """``RejoinBroken`` unless the whole run's verdict (``whole``: its name and codes) is
        the pruned one and its views never left the fault-free run's (``mismatch`` is None)."""
        where = f"{self.out.name}/{self.out.store} {schedule.text()}"
        verdict, codes = whole
        if codes != _verdict_codes(pruned):
            raise RejoinBroken(
                f"{where}: run to its end it is {verdict} {codes}, pruned at its rejoin "
                f"{verdict_of(list(pruned))} {_verdict_codes(pruned)}"
            )
        if mismatch is not None:
            raise RejoinBroken(f"{where}: rejoined the fault-free run, then left it: {mismatch}")


def sweep(
    plan: SweepPlan,
    *,
    check_mode: PruneCheck | str = "sample",
    progress: Callable[[int], None] | None = None,
    fast: bool = True,
    jobs: int | None = None,
) -> ScenarioSweep:
    """The depth-1 sweep of ``--prune rejoin``: every schedule of the exact sweep, each stopped
    where it rejoins the fault-free run (see the module's docstring). ``fast`` (where
    ``os.fork`` exists) forks each child at its crash point from one run of the fault-free
    schedule, ``jobs`` at once (``PruneForkPlan``); the naive path runs each from scratch.
    Both give every schedule the same verdict.
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
    forked = fast and forking.AVAILABLE
    fold = folding.FoldPlan(base, tuple(kinds)) if forked else None
    reference, traced = prepare.traced_runs(scenario, seed=seed, store=kind, base=base, fold=fold)
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
        if fold is not None:
            out.expansion.folded = len(fold.twin_of)
            listed = _forked(pruner, traced, fold, jobs or parallel.default_jobs(), plan, progress)
            for text, judged in listed:
                record_outcome(out, parse_schedule(text), judged)
        else:
            _judge_all(pruner, schedules, plan.stop_at_first_failure, progress)
    except RejoinBroken as broken:
        again = exact.sweep(plan)
        again.prune = {**stats, "broken": str(broken)}
        again.wall_s = time.perf_counter() - started
        return again
    parts.account(out, len(schedules), [s.text() for s in schedules])
    out.wall_s = time.perf_counter() - started
    return out


def _forked(
    pruner: _Pruner,
    traced: RunResult,
    fold: folding.FoldPlan,
    jobs: int,
    plan: SweepPlan,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[str, Judged]]:
    """The forking run of a pruned sweep (``PruneForkPlan``) and each schedule's outcome in
    the sweep's order: a pruned child's settled here (``_Pruner.settle``), any other's as the
    exact sweep reads it (``FastRun.children``; a folded point inherits its twin's outcome,
    ``sim.explore.folding``). A forking run whose fingerprint is not the traced run's is I10
    on the fault-free prefix, recorded as the exact sweep records it."""
    out, mode, stop = pruner.out, pruner.determinism, plan.stop_at_first_failure
    workdir = tempdirs.make("prune")
    forks = PruneForkPlan(
        twin_of=fold.twin_of,
        base=fold.base,
        kinds=fold.kinds,
        reference=pruner.reference,
        reruns=lambda text: exact.wants_rerun(mode, out.seed, text),
        tears=traced.trace.tear_counts,
        jobs=jobs,
        workdir=workdir,
        progress=progress,
        stop_at_first_failure=stop,
        views=pruner.views,
        checks=lambda text: wants_check(pruner.check_mode, out.seed, text),
    )
    try:
        parent = pruner.run(fold.base, forks)
        forks.wait_all()
        if mode != "off" and parent.trace.fingerprint != traced.trace.fingerprint:
            prefix = check_determinism(traced, parent)
            record_outcome(out, fold.base, Judged.of_violations(prefix))
        twins = fold.twin_of
        run = FastRun(out, pruner.scenario, pruner.reference, mode, None, jobs, twins, _every, stop)
        unpruned = run.children(forks)
        docs: dict[str, list[dict[str, object]]] = {}
        for text, path in forks.done:
            docs.setdefault(text, []).append(outcome_doc(path))

        def outcome_of(text: str) -> Judged:
            if text not in docs:  # folded: its twin's outcome (``FastRun.children``)
                return unpruned(text)
            met = docs[text][0].get("met")
            if not isinstance(met, list) or any("error" in doc for doc in docs[text]):
                return unpruned(text)
            checks = [d["check"] for d in docs[text] if isinstance(d.get("check"), dict)]
            check = cast("dict[str, object]", checks[0]) if checks else None
            judged = merged(docs[text])
            return pruner.settle(parse_schedule(text), (met[0], met[1]), judged, check)

        return run.listed(forks.ordered(), outcome_of)
    finally:
        forks.kill_running()
        shutil.rmtree(workdir, ignore_errors=True)


def _every(text: str) -> bool:
    """A pruned sweep owns every point (``_check_plan``)."""
    return True


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
