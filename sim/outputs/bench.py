"""``durable-sim bench``: how fast the simulator explores crash schedules (docs/architecture.md, 3).

From one run it reports (a) schedules per second of the default depth-1 sweep per scenario and
store, (b) how a sweep's wall time grows with the number of boundaries N (``long_horizon`` cut
to 10, 25, 50, 100 and 200 tool turns, generated from it; the exponent is the slope of log(wall)
against log(N), and the largest cut's wall time is reported on its own), (c) the time per crash
point of the simulated sweep against ``realcrash`` killing real processes at the same points,
(d) the schedule fuzzer's examples per second, in one process and as ``durable-sim fuzz`` runs
it (one fuzzer per scenario, ``--jobs`` at the machine's cores), (e) peak memory, and (f) how
many crashed runs rejoin the fault-free run (``sim.explore.rejoin``): ``rejoin_fraction`` per
view; ``sweep_200_s`` is the exact 200-turn sweep's wall time (null unless ``growth_turns``
has 200), and the pruned sweep's growth (``sweep --prune rejoin``) on the shorter cuts, with
``rejoin_mode`` saying which were cut off and why. Timings
are medians over repeats; the machine is shared and noisy, so compare ratios from one run, never
absolute figures across runs.
"""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from sim.explore.parallel import default_jobs, run_steps
from sim.explore.sweep import SweepPlan, sweep
from sim.world.faults import CrashKind
from sim.world.scenario import Scenario, load_scenario
from sim.world.stores import StoreKind

DEFAULT_SCENARIOS = ("read_edit_answer", "idempotent_payment")
GROWTH_TURNS = (10, 25, 50, 100, 200)


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, last = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), last


def long_horizon_cut(turns: int) -> Scenario:
    """``long_horizon`` with ``turns`` tool turns and the final answer: its first ``turns`` when
    it has that many, else its turns repeated in order (a longer run of the same shape), with the
    budget raised to let every turn run. Generated here so the bench needs no scenario files."""
    scenario = load_scenario("long_horizon")
    script = scenario.script[0]
    tool_turns, answer = script[:-1], script[-1:]
    steps = [tool_turns[i % len(tool_turns)] for i in range(turns)]
    update: dict[str, Any] = {"script": [steps + answer]}
    budget = scenario.budget
    needed = turns + 1 + (budget.model_turns - len(script))  # keep the original headroom
    if needed > budget.model_turns or turns > budget.tool_calls:
        update["budget"] = budget.model_copy(
            update={
                "model_turns": max(budget.model_turns, needed),
                "tool_calls": max(budget.tool_calls, turns + budget.tool_calls - len(tool_turns)),
            }
        )
    return scenario.model_copy(update=update)


def growth_exponent(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(wall) on log(N)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def peak_rss_mb() -> float:
    """Peak resident memory of this process and, separately, of its largest child (forked
    sweep children, realcrash children): the larger of the two, in MB (Linux reports KB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def bench(
    *,
    scenarios: tuple[str, ...] = DEFAULT_SCENARIOS,
    repeats: int = 3,
    growth_turns: tuple[int, ...] = GROWTH_TURNS,
    realcrash_points: int = 6,
    fuzz_examples: int = 200,
    growth_repeats: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every figure of the module docstring, from one run. ``growth_repeats`` times each
    ``long_horizon`` cut that many times (default: ``repeats`` up to 50 turns, once beyond,
    where one sweep already takes minutes)."""
    note = progress or (lambda _: None)
    out: dict[str, Any] = {"repeats": repeats, "schedules_per_s": {}, "sweeps": {}}
    for name in scenarios:
        for store in ("file", "sqlite"):
            note(f"sweep {name}[{store}]")
            scenario = load_scenario(name)
            plan = SweepPlan(scenario=scenario, store=StoreKind(store))
            wall, result = _median_time(partial(sweep, plan), repeats)
            key = f"{name}/{store}"
            out["schedules_per_s"][key] = round(result.schedules / wall, 1)
            out["sweeps"][key] = {
                "schedules": result.schedules,
                "folded": result.expansion.folded,
                "boundaries": result.reference.boundaries,
                "median_wall_s": round(wall, 3),
                "verdicts": result.verdicts,
            }
    growth: list[tuple[int, float]] = []
    out["growth"] = []
    for turns in growth_turns:
        note(f"growth: long_horizon cut to {turns} turns")
        scenario = long_horizon_cut(turns)
        times = growth_repeats or (repeats if turns <= 50 else 1)
        plan = SweepPlan(scenario=scenario, store=StoreKind.FILE, crash_kinds=(CrashKind.PROCESS,))
        wall, result = _median_time(partial(sweep, plan), times)
        growth.append((result.reference.boundaries, wall))
        out["growth"].append(
            {
                "turns": turns,
                "boundaries": result.reference.boundaries,
                "schedules": result.schedules,
                "folded": result.expansion.folded,
                "median_wall_s": round(wall, 3),
            }
        )
    out["growth_exponent"] = round(growth_exponent(growth), 3) if len(growth) > 1 else None
    swept = [*out["sweeps"].values(), *out["growth"]]
    total, folded = sum(one["schedules"] for one in swept), sum(one["folded"] for one in swept)
    # The fraction of schedules not run because an earlier one leaves the same world.
    out["folded_fraction"] = round(folded / total, 3) if total else None
    largest = out["growth"][-1] if out["growth"] else None
    out["longest_sweep"] = largest  # e.g. the 200-turn sweep: its wall time is the goal's
    out.update(_rejoin(scenarios, growth_turns=growth_turns, growth=out["growth"], note=note))
    out["fuzz_examples_per_s"] = _fuzz_rate(["read_edit_answer"], fuzz_examples, 1, note)
    # As ``durable-sim fuzz`` runs by default: --jobs at the machine's cores, at least as many
    # fuzzers as cores, so every core has one.
    jobs = default_jobs()
    names = [scenarios[i % len(scenarios)] for i in range(max(jobs, len(scenarios)))]
    out["fuzz_jobs"] = jobs
    out["fuzz_parallel_examples_per_s"] = _fuzz_rate(names, fuzz_examples, jobs, note)
    out["sim_vs_real"] = _sim_vs_real(realcrash_points, note)
    out["sim_vs_real_ratio"] = out["sim_vs_real"]["ratio"] if out["sim_vs_real"] else None
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return out


#: The longest ``long_horizon`` cut the rejoin-mode growth sweeps: a pruned sweep forks its
#: children as the exact one does and stops each at its rejoin, but still views and judges each
#: stopped child's whole run, so its cost per child grows with the run (docs/performance.md,
#: "Rejoin"): the longer cuts are the exact sweep's to time.
REJOIN_GROWTH_TURNS_MAX = 50


def _rejoin(
    scenarios: tuple[str, ...],
    *,
    growth_turns: tuple[int, ...],
    growth: list[dict[str, Any]],
    note: Callable[[str], None],
) -> dict[str, Any]:
    """The rejoin fraction of each bench scenario and of the smallest ``long_horizon`` cut (file
    store, process crashes, ``sim.explore.rejoin``'s default sample), overall; the pruned
    sweep's growth on the cuts up to ``REJOIN_GROWTH_TURNS_MAX``; and the exact 200-turn sweep's
    wall time when ``growth_turns`` has it."""
    # this figure's modules, imported when it is measured (the bench's start imports none)
    from sim.explore import rejoin

    cuts = [(f"long_horizon/{min(growth_turns)}", long_horizon_cut(min(growth_turns)))]
    measured = []
    for key, scenario in [(name, load_scenario(name)) for name in scenarios] + cuts:
        note(f"rejoin {key}[file]")
        measured.append((key, rejoin.measure(scenario, store=StoreKind.FILE)))
    fractions: dict[str, Any] = {key: m.document()["rejoin_fraction"] for key, m in measured}
    fractions["overall"] = rejoin.overall([m for _, m in measured])
    longest = next((g for g in growth if g["turns"] == 200), None)
    pruned = _pruned_growth([t for t in growth_turns if t <= REJOIN_GROWTH_TURNS_MAX], note)
    points = [(g["boundaries"], g["median_wall_s"]) for g in pruned]
    return {
        "rejoin_fraction": fractions,
        "growth_rejoin": pruned,
        "growth_exponent_rejoin": round(growth_exponent(points), 3) if len(points) > 1 else None,
        "sweep_200_s_rejoin": None,
        "rejoin_mode": (
            f"sweep --prune rejoin, timed on the long_horizon cuts up to "
            f"{REJOIN_GROWTH_TURNS_MAX} turns (once each); longer ones are cut off: a stopped "
            "child's window is still judged by the whole-run oracles, and where the check finds "
            "a child leaving the fault-free run (growth_rejoin[].broken) the cut is swept again "
            "exactly (docs/performance.md, 'Rejoin')"
        ),
        "sweep_200_s": None if longest is None else longest["median_wall_s"],
    }


def _pruned_growth(turns: list[int], note: Callable[[str], None]) -> list[dict[str, Any]]:
    """``sweep --prune rejoin`` of each ``long_horizon`` cut (file store, process crashes)."""
    # this figure's modules, imported when it is measured (the bench's start imports none)
    from sim.explore import pruning

    out = []
    for cut in turns:
        note(f"growth, rejoin mode: long_horizon cut to {cut} turns")
        scenario = long_horizon_cut(cut)
        started = time.perf_counter()
        plan = SweepPlan(scenario=scenario, store=StoreKind.FILE, crash_kinds=(CrashKind.PROCESS,))
        result = pruning.sweep(plan)
        wall = time.perf_counter() - started
        stats = result.prune or {}
        out.append(
            {
                "turns": cut,
                "boundaries": result.reference.boundaries,
                "schedules": result.schedules,
                "pruned": stats.get("pruned", 0),
                "checked": stats.get("checked", 0),
                "broken": "broken" in stats,
                "median_wall_s": round(wall, 3),
            }
        )
    return out


def _fuzz_rate(
    names: list[str], examples: int, jobs: int, note: Callable[[str], None]
) -> float | None:
    """Examples per second of ``durable-sim fuzz --no-machine NAMES --jobs JOBS`` (file store):
    one schedule fuzzer per scenario, ``jobs`` side by side, each example one run judged by
    every oracle but I10."""
    if examples <= 0:
        return None
    # this figure's modules, imported when it is measured (the bench's start imports none)
    from sim.explore.fuzz import fuzz_steps

    note(f"fuzz {', '.join(names)} [file] ({examples} examples each, --jobs {jobs})")
    scenarios = [load_scenario(name) for name in names]
    steps = fuzz_steps(
        scenarios, store=StoreKind.FILE, examples=examples, fuzz_seed=0, machine=False
    )
    started = time.perf_counter()
    done = run_steps(steps, jobs=jobs, advance=lambda n: None)
    examples_run: int = sum(count for _, count in done)
    return round(examples_run / (time.perf_counter() - started), 1)


def _sim_vs_real(points: int, note: Callable[[str], None]) -> dict[str, Any] | None:
    """Per crash point: the real-process time over the simulated sweep's, on the same scenario."""
    if points <= 0:
        return None
    # this figure's modules, imported when it is measured (the bench's start imports none)
    from sim.outputs.realcrash import realcrash

    name, store = "idempotent_payment", "file"
    note(f"realcrash {name}[{store}] ({points} points)")
    real = realcrash(name, store=store, points=points)
    plan = SweepPlan(
        scenario=load_scenario(name), store=StoreKind(store), crash_kinds=(CrashKind.PROCESS,)
    )
    simulated = sweep(plan)
    # Per crash point of the default (forking) sweep: its wall time over the schedules it ran.
    sim_per_point = simulated.wall_s / simulated.schedules
    return {
        "scenario": f"{name}/{store}",
        "real_points": len(real["points"]),
        "real_per_point_s": round(real["per_point_s"], 4),
        "sim_per_point_s": round(sim_per_point, 5),
        "ratio": round(real["per_point_s"] / sim_per_point, 1),
        "agreement": real["agreement"],
    }
