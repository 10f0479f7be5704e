"""``durable-sim bench --targets``: what one real-process crash point costs per target, forked
from a warm zygote and in fresh interpreters (``sim.targets.zygote``), on the same points.

Why a bench and not a test: the figures depend on the machine and its load; the verdicts do
not, and ``tests/sim/targets/test_zygote.py`` checks those. Each target runs its demo's as-is
options (``Target.demo``) at up to ``POINTS_MAX`` crash points spread over its fault-free trace,
once forked and once fresh, point by point in turn so that a burst of load hits both alike;
the figures are medians per point.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.targets.host import Crash, run_point, run_recovery, target_service
from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import Target, TargetOptions, installed
from sim.targets.recovery_only import refusal, snapshot_dirs
from sim.targets.registry import get_target
from sim.targets.snapshots import snapshots_in
from sim.targets.sweep import all_crashes, reference_run, warm

#: Crash points timed per target at most: a fresh LangGraph point costs seconds, a Temporal one
#: more, and the machine has two cores.
POINTS_MAX = 8
#: Seconds one child may run (as a sweep's default).
CHILD_TIMEOUT_S = 120.0


def spread(crashes: list[Crash], count: int) -> list[Crash]:
    """``count`` crash points spread evenly over the trace (all of them if there are fewer)."""
    if len(crashes) <= count:
        return crashes
    step = len(crashes) / count
    return [crashes[int(i * step)] for i in range(count)]


#: The checkout's examples (absent from an installed wheel: their rows are then left out).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: Apps timed besides the targets' demos, keyed by target: (row key, the library the app
#: imports, its ``--app``, its ``--effect``s; the app's directory is its working directory).
APP_RUNS: dict[str, tuple[tuple[str, str, str, tuple[str, ...]], ...]] = {
    "python": (
        (
            "python --app examples/langgraph_job",
            "langgraph.graph",
            "langgraph_job/job.py:main",
            ("services:PAYMENTS.refund", "services:MAILER.send"),
        ),
    ),
}


def timed_runs(name: str) -> list[tuple[str, TargetOptions]]:
    """What the bench times of one target: its demo's as-is options (keyed by its name), the
    as-is variant on each durability that runs on an engine of its own (keyed ``NAME
    --durability D``: pydantic-ai's Prefect, whose children serve their own API), and each app
    of ``APP_RUNS`` whose file and library are here."""
    target = get_target(name)
    runs = [(name, check_options(target, target.demo().as_is))]
    for durability in target.timed_durabilities:
        given = TargetOptions(durability=durability)
        runs.append((f"{name} --durability {durability}", check_options(target, given)))
    for key, library, app, effects in APP_RUNS.get(name, ()):
        path = EXAMPLES / app.split(":", 1)[0]
        if not path.is_file() or not installed(library):
            continue
        args = AppArgs(app=str(EXAMPLES / app), effects=effects, workdir=str(path.parent))
        runs.append((key, check_options(target, TargetOptions(app=parse_app(name, args)))))
    return runs


def target_speeds(
    names: list[str], note: Callable[[str], None], *, points_max: int = POINTS_MAX
) -> dict[str, Any]:
    """Per installed target (and each run ``timed_runs`` names): seconds per point forked and
    fresh, their ratio, and recovery only where the target allows it
    (``sim.targets.recovery_only``); how its children ran; the names of targets whose extra is
    not installed."""
    forked: dict[str, float] = {}
    fresh: dict[str, float] = {}
    recovery: dict[str, float] = {}
    children: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        if get_target(name).missing() is not None:
            missing.append(name)
            continue
        for key, options in timed_runs(name):
            times, why = _time_points(get_target(name), options, points_max)
            forked[key] = round(statistics.median(times["forked"]), 3)
            fresh[key] = round(statistics.median(times["fresh"]), 3)
            said = f"{key}: {forked[key]:.2f} s/point forked, {fresh[key]:.2f} s fresh"
            if times.get("recovery_only"):
                recovery[key] = round(statistics.median(times["recovery_only"]), 3)
                said += f", {recovery[key]:.2f} s recovery only"
            children[key] = why
            note(f"{said} ({why})")
    return {
        "target_s_per_point": forked,
        "target_fresh_s_per_point": fresh,
        "target_recovery_only_s_per_point": recovery,
        "target_zygote_speedup": {
            n: round(fresh[n] / forked[n], 1) for n in forked if forked[n] > 0
        },
        "target_children": children,
        "target_missing": missing,
    }


def _time_points(
    target: Target, options: TargetOptions, points_max: int
) -> tuple[dict[str, list[float]], str]:
    """Seconds of each point -- forked, fresh, and forked from its snapshot (recovery only,
    where the target allows it) -- taken in turn point by point, so a burst of load hits each
    alike; and what the report says of the forked children."""
    modes = ["forked", "fresh"]
    if refusal(target, options) is None:
        modes.append("recovery_only")
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    with (
        snapshot_dirs() as (point_dir, into),  # removed after the zygote and its children
        target_service(target, options),
        warm(target, options) as (zygote, why),
    ):
        reference = reference_run(
            target,
            options,
            timeout_s=CHILD_TIMEOUT_S,
            zygote=zygote,
            keep=point_dir,
            snapshot_to=into if "recovery_only" in modes else None,
        )
        copies, _ = snapshots_in(into)
        for crash in spread(all_crashes(reference), points_max):
            for mode in modes:
                started = time.perf_counter()
                copy = copies.get((crash.label, str(crash.when)))
                if mode == "recovery_only" and copy is not None:
                    run_recovery(
                        target,
                        options,
                        crash,
                        copy,
                        point_dir,
                        timeout_s=CHILD_TIMEOUT_S,
                        zygote=zygote,
                    )
                else:  # past where the snapshots stopped, recovery only runs the real way too
                    child = None if mode == "fresh" else zygote
                    run_point(target, options, crash, timeout_s=CHILD_TIMEOUT_S, zygote=child)
                times[mode].append(time.perf_counter() - started)
    return times, why
