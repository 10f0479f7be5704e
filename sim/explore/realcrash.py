"""The comparison behind ``durable-sim realcrash``: real processes killed at the simulator's crash
points, point by point against the simulator's run of the same schedule.

Which scenarios a real host can run as the simulator does (``refusal``), which crash points a
limited run covers (``select_points``), and for each point (``compare_point``; the fault-free base
schedule: ``compare_reference``) a real run (``sim.run.realrun``) re-run until its boundary trace
lines up with the simulator's, both sides judged by the same oracles, their verdicts and
observables compared. The command line, its live table and the results document are
``sim.outputs.realcrash`` and ``sim.outputs.cli.realcrash``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NotRequired, TypedDict

from sim.judgement.judge import ScheduleOutcome, judge
from sim.judgement.oracles import Violation
from sim.run.realrun import RealOptions, RealRun, run_real, timed_points
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import Schedule, boundary_kind
from sim.world.scenario import Scenario
from sim.world.stores import StoreKind

# Real runs of one point at most, until its boundary trace lines up (see ``_run_lined_up``).
ALIGN_ATTEMPTS = 3
# Boundary kinds in the order ``--points`` covers them: the most telling crash points first.
KIND_PRIORITY = ("tool", "model", "commit", "checkpoint", "lease")
ProgressFn = Callable[[dict[str, Any]], None]  # a point's row, as sim.outputs.realcrash reads it


class Side(TypedDict):
    """One world's verdict on a point: its invariants and violations, or the harness's error."""

    verdict: str
    invariants: list[str]
    violations: list[dict[str, object]]
    error: NotRequired[str | None]


class Mismatch(TypedDict):
    """Where two label sequences first differ, and each side's label there (None: it ended)."""

    index: int
    real: str | None
    sim: str | None


class ReferenceDoc(TypedDict):
    """The document's ``reference`` section: the fault-free runs in both worlds."""

    schedule: str
    real: Side
    sim: Side
    real_s: float
    real_outcome: dict[str, object]
    sim_outcome: dict[str, object]
    same_observables: bool
    real_virtual_time_s: float
    sim_virtual_time_s: float


class Disagreement(TypedDict):
    """A point whose verdicts differ, or whose real trace never lined up with the simulator's
    (then with where and how the traces part)."""

    point: str
    label: str
    aligned: bool
    real: Side
    sim: Side
    first_divergence: NotRequired[Mismatch | None]
    real_trace: NotRequired[list[str]]
    sim_trace: NotRequired[list[str]]
    real_crashes: NotRequired[list[str]]
    sim_crashes: NotRequired[list[str]]


class Divergence(TypedDict):
    """A point whose observables (``observables``) differ, each side's value by name."""

    point: str
    label: str
    differences: dict[str, dict[str, object]]


# -- choosing points ---------------------------------------------------------------------------


def refusal(scenario: Scenario) -> str | None:
    """Why the real-process host cannot run ``scenario`` as the simulator does, naming the
    feature (None: it can). Refused up front, never ignored: a feature the real run dropped
    would make it diverge from the simulator in silence. Every other feature of a scenario
    (client re-sends, aborts, timed process crashes, an operator, verifiers that cannot tell,
    fsync off, a process base crash, swapped seams that can be named) runs on the same world
    code as in the simulator (``sim.world.session``)."""
    two_workers = (
        "is not run with real processes: two processes alive at once would have to share one "
        "boundary numbering and clock, which the real host keeps per process"
    )
    if scenario.takeover is not None:
        return f"lease takeover (takeover: a paused worker and a second one) {two_workers}"
    if scenario.shutdown is not None:
        return f"a graceful shutdown with a standby worker (shutdown) {two_workers}"
    if scenario.delegates():
        return (
            "sub-agents (an agent.delegate tool) are not run with real processes: the real host "
            "does not carry a child conversation's commits across its processes for I20"
        )
    page_cache = "out of reach for real processes (a kill keeps the page cache)"
    if scenario.base_crash is not None and scenario.base_crash.kind != "process":
        return f"its base crash is a power loss (base_crash.kind), {page_cache}"
    if any(c.kind != "process" for c in scenario.timed_crashes):
        return f"a timed power loss (timed_crashes[].kind), {page_cache}"
    return None


def select_points(
    labels: list[str], schedules: list[Schedule], limit: int | None
) -> list[Schedule]:
    """At most ``limit`` of ``schedules`` (all if None), covering every boundary kind first: one
    boundary (before, then after) of each kind in turn, tool effects, model calls, commits,
    checkpoints and leases first, then file operations; within a kind, in trace order."""
    if limit is None or limit >= len(schedules):
        return schedules
    by_boundary: dict[int, list[Schedule]] = {}
    for schedule in schedules:
        by_boundary.setdefault(schedule.points[-1].index, []).append(schedule)
    kinds: dict[str, list[int]] = {}
    for index in sorted(by_boundary):
        kinds.setdefault(boundary_kind(labels[index]), []).append(index)
    order = sorted(
        kinds,
        key=lambda k: KIND_PRIORITY.index(k) if k in KIND_PRIORITY else len(KIND_PRIORITY),
    )
    queues = {k: list(kinds[k]) for k in order}
    chosen: list[Schedule] = []
    while len(chosen) < limit and any(queues.values()):
        for kind in order:
            if queues[kind] and len(chosen) < limit:
                index = queues[kind].pop(0)
                chosen += by_boundary[index][: limit - len(chosen)]
    return sorted(chosen, key=lambda s: (s.points[-1].index, s.points[-1].when != "before"))


# -- comparing with the simulator --------------------------------------------------------------


def _violations(violations: list[Violation]) -> list[dict[str, object]]:
    return [v.to_json() for v in violations]


def _side(outcome: ScheduleOutcome | None, error: str | None = None) -> Side:
    if outcome is None:
        return {"verdict": "error", "invariants": [], "violations": [], "error": error}
    return {
        "verdict": outcome.verdict,
        "invariants": sorted({v.invariant for v in outcome.violations}),
        "violations": _violations(outcome.violations),
    }


def _judge_real(run: RealRun, reference: RunResult) -> tuple[ScheduleOutcome | None, str | None]:
    if run.harness_error is not None:
        return None, run.harness_error
    return judge(run.result, reference, determinism=False), None


def _lines_up(
    run: RealRun, *, sim_labels: list[str], upto: int | None, sim_crashes: list[str]
) -> bool:
    """Whether the real run's trace (through index ``upto - 1``; all of it if None) and its
    crashes are the simulator's."""
    real = [b.label for b in run.result.trace.boundaries]
    if upto is not None:
        real, sim_labels = real[:upto], sim_labels[:upto]
    return real == sim_labels and [c.label for c in run.result.trace.crashes] == sim_crashes


def _run_lined_up(
    run_once: Callable[[], RealRun], lined_up: Callable[[RealRun], bool]
) -> tuple[RealRun, int]:
    """Run until the real trace lines up with the simulator's, at most ``ALIGN_ATTEMPTS`` times.

    A real run that reaches the crash index through other boundaries did not crash at the point
    being compared: the host stalled the child and scenario time ran on (a lease renewal came
    due, a timed client step came early). Such a run is not a comparison, so it is run again; a
    point that never lines up stays a disagreement ("misaligned"). Runs that line up are never
    re-run, whatever their verdict. Returns the last run and the number of attempts."""
    attempts = 1
    run = run_once()
    while not lined_up(run) and attempts < ALIGN_ATTEMPTS:
        attempts += 1
        run = run_once()
    return run, attempts


def observables(result: RunResult) -> dict[str, object]:
    """What a run did, as far as the world can see (for a finer comparison than the verdict):
    the client's outcome, the ledger, the final log's event kinds, model calls and processes."""
    return {
        "outcome": result.outcome,
        "effects": [
            f"{e.service}.{e.op}#{e.call_id}:{e.note or 'applied'}" for e in result.outside.ledger
        ],
        "events": [r.event.type for r in result.durable.records],
        "model_calls": len(result.outside.model_calls),
        "processes": result.trace.processes,
        "settled": result.trace.settled,
    }


def _diff(real: dict[str, object], sim: dict[str, object]) -> dict[str, dict[str, object]]:
    return {k: {"real": real[k], "sim": sim[k]} for k in real if real[k] != sim[k]}


def first_mismatch(real: list[str], sim: list[str]) -> Mismatch | None:
    """Where two label sequences first differ, with each side's label there (None: equal)."""
    for i, (a, b) in enumerate(zip(real, sim, strict=False)):
        if a != b:
            return {"index": i, "real": a, "sim": b}
    if len(real) != len(sim):
        i = min(len(real), len(sim))
        return {
            "index": i,
            "real": real[i] if i < len(real) else None,
            "sim": sim[i] if i < len(sim) else None,
        }
    return None


@dataclass(frozen=True)
class Pair:
    """What every point of one comparison shares: the scenario on one store and seed, how the
    real runs are hosted, and the simulator's fault-free (base-schedule) reference run."""

    scenario: Scenario
    kind: StoreKind
    seed: int
    options: RealOptions
    sim_ref: RunResult

    @property
    def sim_labels(self) -> list[str]:
        return [b.label for b in self.sim_ref.trace.boundaries]

    def real(self, schedule: Schedule, sim_result: RunResult) -> RealRun:
        """A real run of ``schedule``, its timed crashes where ``sim_result`` (the simulator's
        run of the same schedule) had them."""
        return run_real(
            self.scenario,
            store=self.kind,
            seed=self.seed,
            schedule=schedule,
            options=self.options,
            timed=timed_points(sim_result),
        )


def compare_reference(pair: Pair, base: Schedule) -> tuple[RealRun, int, ReferenceDoc]:
    """The real fault-free run (re-run until its trace lines up, see ``_run_lined_up``), its
    attempts, and the document's ``reference`` section."""
    sim_ref = pair.sim_ref
    sim_crashes = [c.label for c in sim_ref.trace.crashes]
    run, attempts = _run_lined_up(
        partial(pair.real, base, sim_ref),
        partial(_lines_up, sim_labels=pair.sim_labels, upto=None, sim_crashes=sim_crashes),
    )
    real_ref = run.result
    real_outcome, real_error = _judge_real(run, real_ref)
    doc: ReferenceDoc = {
        "schedule": base.text(),
        "real": _side(real_outcome, real_error),
        "sim": _side(judge(sim_ref, sim_ref, determinism=False)),
        "real_s": round(run.wall_s, 3),
        "real_outcome": real_ref.outcome,
        "sim_outcome": sim_ref.outcome,
        "same_observables": observables(real_ref) == observables(sim_ref),
        "real_virtual_time_s": round(real_ref.trace.virtual_time_s, 3),
        "sim_virtual_time_s": round(sim_ref.trace.virtual_time_s, 3),
    }
    return run, attempts, doc


def compare_point(
    pair: Pair, schedule: Schedule, real_ref: RunResult, real_labels: list[str]
) -> tuple[dict[str, Any], Disagreement | None, Divergence | None]:
    """Run one schedule in both worlds: the row, the disagreement (None: they agree) and the
    divergence of observables (None: the same)."""
    point = schedule.points[-1]
    t0 = time.perf_counter()
    sim_result = run_scenario(pair.scenario, seed=pair.seed, store=pair.kind, schedule=schedule)
    sim_outcome = judge(sim_result, pair.sim_ref, determinism=False)
    sim_s = time.perf_counter() - t0
    preempt = pair.options.preempt_s > 0
    # A preempted real run has no crash at the point itself: the simulator's kill there is
    # left out of the line-up (its verdict stays, as what a kill would have done).
    own = (point.index, point.when)
    sim_crashes = [
        c.label
        for c in sim_result.trace.crashes
        if not (preempt and (c.point.index, c.point.when) == own)
    ]
    lined_up = partial(
        _lines_up, sim_labels=pair.sim_labels, upto=point.index + 1, sim_crashes=sim_crashes
    )
    run, attempts = _run_lined_up(partial(pair.real, schedule, sim_result), lined_up)
    aligned = lined_up(run)
    real_outcome, real_error = _judge_real(run, real_ref)
    real_side, sim_side = _side(real_outcome, real_error), _side(sim_outcome)
    label = real_labels[point.index] if point.index < len(real_labels) else "?"
    # Preempted, the run must pass (a graceful shutdown may lose nothing); killed, it must
    # reach the simulator's verdict.
    expected = "pass" if preempt else sim_side["verdict"]
    agree = aligned and real_side["verdict"] == expected
    differences = _diff(observables(run.result), observables(sim_result))
    row = {
        "point": schedule.text(),
        "index": point.index,
        "when": point.when,
        "label": label,
        "real": real_side["verdict"],
        "sim": sim_side["verdict"],
        "agree": agree,
        "aligned": aligned,
        "same_observables": not differences,
        "real_s": round(run.wall_s, 4),
        "sim_s": round(sim_s, 4),
        "children": run.children,
        "attempts": attempts,
    }
    divergence: Divergence | None = None
    if differences:
        divergence = {"point": schedule.text(), "label": label, "differences": differences}
    if agree:
        return row, None, divergence
    entry: Disagreement = {
        "point": schedule.text(),
        "label": label,
        "aligned": aligned,
        "real": real_side,
        "sim": sim_side,
    }
    if not aligned:
        real_trace = [b.label for b in run.result.trace.boundaries[: point.index + 1]]
        sim_trace = pair.sim_labels[: point.index + 1]
        entry["first_divergence"] = first_mismatch(real_trace, sim_trace)
        entry["real_trace"] = real_trace[-5:]
        entry["sim_trace"] = sim_trace[-5:]
        entry["real_crashes"] = [c.label for c in run.result.trace.crashes]
        entry["sim_crashes"] = sim_crashes
    return row, entry, divergence


@dataclass
class Comparison:
    """The points compared, in order: a row each, the disagreements (verdicts that differ, or a
    real trace that never lined up) and the divergences of observables."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # sim.outputs.realcrash reads them
    disagreements: list[Disagreement] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)


def compare_points(
    pair: Pair,
    schedules: list[Schedule],
    real_ref: RunResult,
    real_labels: list[str],
    *,
    progress: ProgressFn | None = None,
) -> Comparison:
    """``compare_point`` for each of ``schedules``, in order; ``progress`` gets each row."""
    out = Comparison()
    for schedule in schedules:
        row, disagreement, divergence = compare_point(pair, schedule, real_ref, real_labels)
        out.rows.append(row)
        out.disagreements += [disagreement] if disagreement is not None else []
        out.divergences += [divergence] if divergence is not None else []
        if progress is not None:
            progress(row)
    return out
