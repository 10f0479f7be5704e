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
from typing import Any

from sim.targets.host import Crash, run_point, target_service
from sim.targets.kit.options import check_options
from sim.targets.registry import get_target
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


def target_speeds(
    names: list[str], note: Callable[[str], None], *, points_max: int = POINTS_MAX
) -> dict[str, Any]:
    """Per installed target: seconds per point forked and fresh, their ratio, and how its
    children ran; the names of targets whose extra is not installed."""
    forked: dict[str, float] = {}
    fresh: dict[str, float] = {}
    children: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        target = get_target(name)
        if target.missing() is not None:
            missing.append(name)
            continue
        options = check_options(target, target.demo().as_is)
        times: dict[bool, list[float]] = {True: [], False: []}
        with target_service(target, options), warm(target, options) as (zygote, why):
            reference = reference_run(target, options, timeout_s=CHILD_TIMEOUT_S, zygote=zygote)
            for crash in spread(all_crashes(reference), points_max):
                for fork in (True, False):
                    started = time.perf_counter()
                    run_point(
                        target,
                        options,
                        crash,
                        timeout_s=CHILD_TIMEOUT_S,
                        zygote=zygote if fork else None,
                    )
                    times[fork].append(time.perf_counter() - started)
        forked[name] = round(statistics.median(times[True]), 3)
        fresh[name] = round(statistics.median(times[False]), 3)
        children[name] = why
        note(f"{name}: {forked[name]:.2f} s/point forked, {fresh[name]:.2f} s fresh ({why})")
    return {
        "target_s_per_point": forked,
        "target_fresh_s_per_point": fresh,
        "target_zygote_speedup": {
            n: round(fresh[n] / forked[n], 1) for n in forked if forked[n] > 0
        },
        "target_children": children,
        "target_missing": missing,
    }
