"""The naive path: every schedule run from scratch in the sweep's own process, in the sweep's
order (and, at depth 2, each followed by its second crashes) -- or split over forked workers
(``naive_parts``), each taking its share of the schedules in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.explore.recording import Judged, ScenarioSweep, record_outcome
from sim.explore.sweep.modes import Determinism, judge_as
from sim.judgement.judge import judge
from sim.judgement.oracles import Verdict
from sim.run import collector
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When, tries_kind
from sim.world.scenario import Scenario

ProgressFn = Callable[[int], None]


@dataclass
class NaiveRun:
    """The naive path in this process, recording as it goes."""

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
        result, judged = run_judged(self.scenario, self.out, self.reference, self.mode, schedule)
        record_outcome(self.out, schedule, judged)
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


def run_judged(
    scenario: Scenario,
    out: ScenarioSweep,
    reference: RunResult,
    mode: Determinism,
    schedule: Schedule,
) -> tuple[RunResult, Judged]:
    """One schedule of ``out``'s sweep (its seed and store) run from scratch and judged as the
    naive path judges it (I10 as ``mode`` asks): every path that runs a schedule alone."""
    result = run_scenario(scenario, seed=out.seed, store=out.store, schedule=schedule)
    return result, Judged.of_run(judge_as(result, reference, mode), result)


def record_reference(out: ScenarioSweep, reference: RunResult, mode: Determinism) -> None:
    """The fault-free run, judged against itself (with I10 unless ``mode`` is off) and recorded
    first: every crash schedule is judged against it."""
    checked = judge(reference, reference, determinism=mode != "off")
    record_outcome(out, checked.schedule, Judged.of_run(checked, reference))


def naive_parts(
    scenario: Scenario,
    out: ScenarioSweep,
    reference: RunResult,
    schedules: list[Schedule],
    mode: Determinism,
    stop: bool,
    *,
    progress: ProgressFn,
) -> list[Judged]:
    """In a worker: run and judge each schedule as the naive path does. With ``stop``, none
    after the first failure: the schedules come in the sweep's order, so the sweep's first
    failure is the earliest of the workers' first ones."""
    judged: list[Judged] = []
    with collector.between_runs():
        for schedule in schedules:
            judged.append(run_judged(scenario, out, reference, mode, schedule)[1])
            progress(1)
            if stop and judged[-1].verdict is not Verdict.PASS:
                break
    return judged
