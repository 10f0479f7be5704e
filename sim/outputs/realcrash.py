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

This module checks the options, runs the comparison and assembles its results document; the
comparison itself -- which scenarios and points, each point's two runs lined up and judged --
is exploration, in ``sim.explore.realcrash``.

A scenario the real host cannot run as the simulator does is refused up front with one line
naming the feature (``sim.explore.realcrash.refusal``): never run with the feature silently
dropped.

Boundaries line up by construction (one world code, the simulator's ``Machine`` -- its injector
-- numbering them across the children), and by check:
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
affected points are re-run (``sim.explore.realcrash.ALIGN_ATTEMPTS``) and, if still
misaligned, reported as disagreements rather than compared. It stands still between a kill and
the next child's start, since the simulator restarts a process at the crash instant.

Power loss and storage faults are out of reach for real processes (the page cache survives a
kill; the disk is not ours to damage) and are not faked: only ``process`` crash points are run,
and a scenario whose own crashes are power losses is refused.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from sim.errors import UserError
from sim.explore.realcrash import (
    Pair,
    ProgressFn,
    compare_points,
    compare_reference,
    first_mismatch,
    refusal,
    select_points,
)
from sim.explore.sweep import base_schedule, depth1_schedules
from sim.run.realrun import BLOCKING_MODES, DEFAULT_SPEEDUP, MAX_GRACE_S, RealOptions
from sim.run.runner import run_scenario
from sim.world.faults import CrashKind
from sim.world.model import MODEL_LATENCY_S
from sim.world.realhost import CLOCKS
from sim.world.scenario import load_scenario
from sim.world.seams import NAMES as SEAM_NAMES
from sim.world.seams import REFERENCE as REFERENCE_SEAMS
from sim.world.seams import current as current_seams
from sim.world.seams import spec_of
from sim.world.stores import FILE_KINDS, StoreKind


class RealcrashError(UserError, ValueError):
    """A scenario or option realcrash cannot run (one line; a usage error)."""


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
    preempt_s: float,
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
    if not 0 <= preempt_s <= MAX_GRACE_S:
        raise RealcrashError(f"--preempt must be 0..{MAX_GRACE_S:g} seconds, got {preempt_s:g}")
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
        preempt_s=preempt_s,
    )


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
    preempt_s: float = 0.0,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Kill real processes at the scenario's process-kill crash points (at most ``points`` of
    them, see ``select_points``) and compare each verdict with the simulator's for the same
    schedule. Returns the JSON document (``points``, ``agreement``, ``disagreements``,
    ``per_point_s`` = median real wall seconds per crash point, ...).

    Raises ``ScenarioError`` for an unknown or invalid scenario and ``RealcrashError`` for one
    realcrash cannot run (``refusal`` names the feature) or a bad option.
    """
    options = _options(store, points, clock, speedup, blocking, workdir, preempt_s)
    scenario = load_scenario(scenario_name)
    reason = refusal(scenario)
    if reason is not None:
        raise RealcrashError(f"{scenario.name}: {reason}")
    kind = StoreKind(store)
    started = time.perf_counter()
    base = base_schedule(scenario, seed=seed, store=kind)
    sim_ref = run_scenario(scenario, seed=seed, store=kind, schedule=base)
    pair = Pair(scenario, kind, seed, options, sim_ref)
    real_ref_run, ref_attempts, reference = compare_reference(pair, base)
    real_labels = [b.label for b in real_ref_run.result.trace.boundaries]
    schedules = select_points(
        real_labels, depth1_schedules(real_labels, [CrashKind.PROCESS], base=base), points
    )
    compared = compare_points(pair, schedules, real_ref_run.result, real_labels, progress=progress)
    doc = _document(pair, real_labels, compared.rows, options)
    mismatch = first_mismatch(real_labels, pair.sim_labels)
    doc.update(
        labels_match=mismatch is None,
        label_mismatch=mismatch,
        reference_attempts=ref_attempts,
        reference=reference,
        total_points=2 * max(0, len(real_labels) - (base.last_index + 1)),
        disagreements=compared.disagreements,
        divergences=compared.divergences,
        wall_s=round(time.perf_counter() - started, 3),
    )
    return doc


def _document(
    pair: Pair, real_labels: list[str], rows: list[dict[str, Any]], options: RealOptions
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
        "crash_kind": "preempt" if options.preempt_s else "process",
        "preempt_s": options.preempt_s,
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
