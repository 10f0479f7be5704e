"""``durable-sim realcrash``: kill real processes at the simulator's crash points and check that
reality and the simulator agree.

For each process-kill crash point ``(boundary index, before|after)`` of a scenario, a real run
(``sim.run.realrun``) runs the world in child Python processes on real files or a real SQLite
database with a real (sped-up) wall clock, each SIGKILLed at that boundary (and at the
scenario's timed process crashes); a fresh child is then started to resume, as the simulator
restarts a process. The world is the simulator's own code (``sim.world.session``: the client
session, the runtime's wiring and configuration, the model, the tools' operations); only its
host differs (``sim.world.realhost``). The parent reads the store through a fresh store object,
the ledger and the point's record into a ``sim.run.runner.RunResult`` and judges it with the
simulator's oracles against a real fault-free run; and it runs the simulator on the same
schedule ``INDEX:WHEN:process`` and judges that too. Agreement is the fraction of points whose
verdicts are equal; any disagreement is listed with both sides' violations and witnesses.

A scenario the real host cannot run as the simulator does is refused up front with one line
naming the feature (``refusal``): never run with the feature silently dropped.

Boundaries line up by construction (one world code, the simulator's ``Machine`` numbering them
across the children), and by check:
the real fault-free label sequence is compared with the simulator's, and every point's real trace
up to its crash with the simulated reference (a point whose crash hit another label is a
disagreement, whatever the verdicts say).

Time is the simulator's by default (``--clock virtual``): each child runs under trio's
``MockClock`` with autojump, restarted at the crash instant, with SQLite's calls inline, so
timers fire in the simulator's order (a lease heartbeat and a client step due at the same
instant tie the same way) and a host stall costs no scenario time. What is real: the processes,
the files or SQLite database they write, the SIGKILL and the next interpreter's start.

``--clock scaled`` runs the children on the wall clock sped up ``speedup`` times instead
(default 50: the fake model's 1 s latency is 20 ms, the 30 s lease TTL 0.6 s), with SQLite's
calls on worker threads as in production. Real work then takes scenario time (1 ms of I/O is
50 ms at x50), so timers the simulator fires at the same instant may fire in another order: the
affected points are re-run (``ALIGN_ATTEMPTS``) and, if still misaligned, reported as
disagreements rather than compared. It stands still between a kill and the next child's start,
since the simulator restarts a process at the crash instant.

Power loss and storage faults are out of reach for real processes (the page cache survives a
kill; the disk is not ours to damage) and are not faked: only ``process`` crash points are run,
and a scenario whose own crashes are power losses is refused.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sim.explore.sweep import ScheduleOutcome, base_schedule, depth1_schedules, judge
from sim.judgement.oracles import Violation
from sim.run.realrun import (
    BLOCKING_MODES,
    CLOCKS,
    DEFAULT_SPEEDUP,
    RealOptions,
    RealRun,
    run_real,
    timed_points,
)
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import Schedule, boundary_kind
from sim.world.model import MODEL_LATENCY_S
from sim.world.scenario import Scenario, load_scenario
from sim.world.seams import NAMES as SEAM_NAMES
from sim.world.seams import REFERENCE as REFERENCE_SEAMS
from sim.world.seams import current as current_seams
from sim.world.seams import spec_of
from sim.world.stores import FILE_KINDS, StoreKind

# Real runs of one point at most, until its boundary trace lines up (see ``_run_lined_up``).
ALIGN_ATTEMPTS = 3
# Boundary kinds in the order ``--points`` covers them: the most telling crash points first.
KIND_PRIORITY = ("tool", "model", "commit", "checkpoint", "lease")
ProgressFn = Callable[[dict[str, Any]], None]


class RealcrashError(ValueError):
    """A scenario or option realcrash cannot run (one line; a usage error)."""


# -- choosing points ---------------------------------------------------------------------------


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


def _violations(violations: list[Violation]) -> list[dict[str, Any]]:
    return [v.to_json() for v in violations]


def _side(outcome: ScheduleOutcome | None, error: str | None = None) -> dict[str, Any]:
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


def observables(result: RunResult) -> dict[str, Any]:
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


def _diff(real: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    return {k: {"real": real[k], "sim": sim[k]} for k in real if real[k] != sim[k]}


def _first_mismatch(real: list[str], sim: list[str]) -> dict[str, Any] | None:
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


def seam_specs() -> tuple[tuple[str, str], ...]:
    """The swapped seams as (name, SPEC) pairs the child processes load (``RealcrashError`` for
    one that cannot be named: the children would run the reference instead)."""
    out: list[tuple[str, str]] = []
    for name in SEAM_NAMES:
        value = getattr(current_seams(), name)
        if value == getattr(REFERENCE_SEAMS, name):
            continue
        spec = spec_of(value)
        if spec is None:
            raise RealcrashError(
                f"the {name} seam cannot be named as FILE.py:NAME or MODULE:NAME, so the real "
                "processes could not load it (define it at module level)"
            )
        out.append((name, spec))
    return tuple(out)


def _options(
    store: str,
    points: int | None,
    clock: str,
    speedup: float | None,
    blocking: str | None,
    workdir: str | None,
) -> RealOptions:
    """The real runs' hosting, validated eagerly (one line per bad option): ``speedup`` and
    threaded blocking need the scaled clock; each defaults to what its clock needs."""
    if store not in FILE_KINDS:
        kinds = " or ".join(FILE_KINDS)
        raise RealcrashError(f"--store must be {kinds}, not {store!r}")
    if clock not in CLOCKS:
        raise RealcrashError(f"--clock must be virtual or scaled, not {clock!r}")
    if blocking is not None and blocking not in BLOCKING_MODES:
        raise RealcrashError(f"blocking must be thread or inline, not {blocking!r}")
    if points is not None and points < 1:
        raise RealcrashError(f"--points must be at least 1, got {points}")
    if speedup is not None and not speedup > 0:
        raise RealcrashError(f"--speedup must be positive, got {speedup}")
    if clock == "virtual" and speedup is not None:
        raise RealcrashError("--speedup scales the wall clock: it needs --clock scaled")
    if clock == "virtual" and blocking == "thread":
        raise RealcrashError(
            "--blocking thread needs --clock scaled (virtual time would jump while a thread works)"
        )
    return RealOptions(
        clock=clock,
        speedup=DEFAULT_SPEEDUP if speedup is None else speedup,
        blocking=blocking or ("inline" if clock == "virtual" else "thread"),
        workdir=workdir,
        seams=seam_specs(),
    )


@dataclass(frozen=True)
class _Pair:
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


def _reference(pair: _Pair, base: Schedule) -> tuple[RealRun, int, dict[str, Any]]:
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
    doc = {
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


def _compare_point(
    pair: _Pair, schedule: Schedule, real_ref: RunResult, real_labels: list[str]
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """Run one schedule in both worlds: the row, the disagreement (None: they agree) and the
    divergence of observables (None: the same)."""
    point = schedule.points[-1]
    t0 = time.perf_counter()
    sim_result = run_scenario(pair.scenario, seed=pair.seed, store=pair.kind, schedule=schedule)
    sim_outcome = judge(sim_result, pair.sim_ref, determinism=False)
    sim_s = time.perf_counter() - t0
    sim_crashes = [c.label for c in sim_result.trace.crashes]
    lined_up = partial(
        _lines_up, sim_labels=pair.sim_labels, upto=point.index + 1, sim_crashes=sim_crashes
    )
    run, attempts = _run_lined_up(partial(pair.real, schedule, sim_result), lined_up)
    aligned = lined_up(run)
    real_outcome, real_error = _judge_real(run, real_ref)
    real_side, sim_side = _side(real_outcome, real_error), _side(sim_outcome)
    label = real_labels[point.index] if point.index < len(real_labels) else "?"
    agree = aligned and real_side["verdict"] == sim_side["verdict"]
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
    divergence = None
    if differences:
        divergence = {"point": schedule.text(), "label": label, "differences": differences}
    if agree:
        return row, None, divergence
    entry: dict[str, Any] = {"point": schedule.text(), "label": label, "aligned": aligned}
    entry["real"], entry["sim"] = real_side, sim_side
    if not aligned:
        real_trace = [b.label for b in run.result.trace.boundaries[: point.index + 1]]
        sim_trace = pair.sim_labels[: point.index + 1]
        entry["first_divergence"] = _first_mismatch(real_trace, sim_trace)
        entry["real_trace"] = real_trace[-5:]
        entry["sim_trace"] = sim_trace[-5:]
        entry["real_crashes"] = [c.label for c in run.result.trace.crashes]
        entry["sim_crashes"] = sim_crashes
    return row, entry, divergence


def realcrash(
    scenario_name: str,
    *,
    store: str,
    points: int | None,
    seed: int = 0,
    clock: str = "virtual",
    speedup: float | None = None,
    blocking: str | None = None,
    workdir: str | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Kill real processes at the scenario's process-kill crash points (at most ``points`` of
    them, see ``select_points``) and compare each verdict with the simulator's for the same
    schedule. Returns the JSON document (``points``, ``agreement``, ``disagreements``,
    ``per_point_s`` = median real wall seconds per crash point, ...).

    Raises ``ScenarioError`` for an unknown or invalid scenario and ``RealcrashError`` for one
    realcrash cannot run (``refusal`` names the feature) or a bad option.
    """
    options = _options(store, points, clock, speedup, blocking, workdir)
    scenario = load_scenario(scenario_name)
    reason = refusal(scenario)
    if reason is not None:
        raise RealcrashError(f"{scenario.name}: {reason}")
    kind = StoreKind(store)
    started = time.perf_counter()
    base = base_schedule(scenario, seed=seed, store=kind)
    sim_ref = run_scenario(scenario, seed=seed, store=kind, schedule=base)
    pair = _Pair(scenario, kind, seed, options, sim_ref)
    real_ref_run, ref_attempts, reference = _reference(pair, base)
    real_labels = [b.label for b in real_ref_run.result.trace.boundaries]
    schedules = select_points(
        real_labels, depth1_schedules(real_labels, ["process"], base=base), points
    )
    rows: list[dict[str, Any]] = []
    disagreements: list[dict[str, Any]] = []
    divergences: list[dict[str, Any]] = []
    for schedule in schedules:
        row, disagreement, divergence = _compare_point(
            pair, schedule, real_ref_run.result, real_labels
        )
        rows.append(row)
        disagreements += [disagreement] if disagreement is not None else []
        divergences += [divergence] if divergence is not None else []
        if progress is not None:
            progress(row)
    doc = _document(pair, real_labels, rows, options)
    mismatch = _first_mismatch(real_labels, pair.sim_labels)
    doc.update(
        labels_match=mismatch is None,
        label_mismatch=mismatch,
        reference_attempts=ref_attempts,
        reference=reference,
        total_points=2 * max(0, len(real_labels) - (base.last_index + 1)),
        disagreements=disagreements,
        divergences=divergences,
        wall_s=round(time.perf_counter() - started, 3),
    )
    return doc


def _document(
    pair: _Pair, real_labels: list[str], rows: list[dict[str, Any]], options: RealOptions
) -> dict[str, Any]:
    """The document's figures over the points run (``realcrash`` adds the rest)."""
    scenario = pair.scenario
    real_times = [r["real_s"] for r in rows]
    sim_times = [r["sim_s"] for r in rows]
    agreed = sum(1 for r in rows if r["agree"])
    same = sum(1 for r in rows if r["same_observables"])
    return {
        "scenario": scenario.name,
        "store": str(pair.kind),
        "seed": pair.seed,
        "crash_kind": "process",
        "blocking": options.blocking,
        "clock": options.clock,
        "time_scale": None
        if options.clock == "virtual"
        else {
            "speedup": options.speedup,
            "model_latency_real_s": MODEL_LATENCY_S / options.speedup,
            "lease_ttl_real_s": scenario.lease_ttl_s / options.speedup,
            "heartbeat_real_s": scenario.heartbeat_s / options.speedup,
        },
        "boundaries": len(real_labels),
        "sim_boundaries": len(pair.sim_labels),
        "retried_points": sum(1 for r in rows if r["attempts"] > 1),
        "points": rows,
        "agreement": (agreed / len(rows)) if rows else 1.0,
        "observables_match": (same / len(rows)) if rows else 1.0,
        "per_point_s": round(statistics.median(real_times), 4) if real_times else 0.0,
        "sim_per_point_s": round(statistics.median(sim_times), 5) if sim_times else 0.0,
    }
