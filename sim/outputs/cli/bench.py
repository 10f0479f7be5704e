"""``durable-sim bench``: the sweep's performance figures (never timed assertions in tests)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sim.errors import UsageError
from sim.outputs import options
from sim.outputs.cli.common import text_arg
from sim.targets.registry import target_names

MAX_REPEATS = 50
MAX_GROWTH_TURNS = 200  # long_horizon's tool turns
MAX_REALCRASH_POINTS = 1000


def add_parsers(sub: Any) -> None:
    """``bench``: the performance figures of the sweep."""
    bn = sub.add_parser(
        "bench",
        help="measure schedules/s, sweep growth with N, sim vs real-process cost, peak memory",
        description=(
            "From one run: schedules per second of the depth-1 sweep per scenario and store, the "
            "growth exponent of sweep wall time in the boundary count (long_horizon cut to "
            "--growth-turns sizes), the fuzzer's examples per second (one process, and --jobs at "
            "the machine's cores), the time per crash point of the simulated sweep against "
            "realcrash, peak memory, and the totals of the last make sweep (its results.json). "
            "Medians over --repeats. Quote ratios from one run: the machine is noisy. Progress "
            "goes to stderr, also with --json."
        ),
    )
    bn.add_argument(
        "--repeats",
        type=options.arg_type(options.integer, 1, MAX_REPEATS),
        default=3,
        help=f"runs each figure is the median of, 1..{MAX_REPEATS} (default 3)",
    )
    bn.add_argument(
        "--scenarios",
        type=options.arg_type(options.scenario_refs),
        default=("read_edit_answer", "idempotent_payment"),
        metavar="LIST",
        help="scenarios swept, comma-separated (default read_edit_answer,idempotent_payment)",
    )
    bn.add_argument(
        "--growth-turns",
        type=options.arg_type(options.integers, 1, MAX_GROWTH_TURNS),
        default=(10, 25, 50),
        metavar="LIST",
        help=(
            f"long_horizon cut to these tool turns, each 1..{MAX_GROWTH_TURNS} (default "
            "10,25,50; the issue's goal is fitted over 10,25,50,100,200, whose 200-turn sweep "
            "takes hours while the sweep stays quadratic)"
        ),
    )
    bn.add_argument(
        "--realcrash-points",
        type=options.arg_type(options.integer, 0, MAX_REALCRASH_POINTS),
        default=6,
        help=f"crash points of the realcrash comparison, 0..{MAX_REALCRASH_POINTS} (default 6; "
        "0 skips it)",
    )
    bn.add_argument(
        "--sweep-results",
        type=text_arg,
        default="reports/latest/results.json",
        metavar="PATH",
        help=(
            "the results.json of the last full sweep (make sweep writes "
            "reports/latest/results.json), whose totals are reported; not re-run here (it takes "
            "minutes). Reported as null if the file is absent"
        ),
    )
    bn.add_argument(
        "--targets",
        type=text_arg,
        default=None,
        metavar="LIST|all",
        help=(
            "instead of the figures above: seconds per real-process crash point of these "
            "targets (their demo, up to 8 points spread over the trace), forked from a warm "
            "zygote and in fresh interpreters, and the ratio"
        ),
    )
    bn.add_argument("--json", action="store_true")

    bn.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.outputs.bench import bench

    if args.targets is not None:
        return _bench_targets(_target_names(args.targets), as_json=args.json)
    names, turns = args.scenarios, args.growth_turns
    options.load_scenarios(names)  # unknown names fail here, as a usage error
    make_sweep = _sweep_totals(Path(args.sweep_results))  # eagerly: a bad file fails at once
    doc = bench(
        scenarios=names,
        repeats=args.repeats,
        growth_turns=turns,
        realcrash_points=args.realcrash_points,
        progress=lambda text: print(f"bench: {text}", file=sys.stderr, flush=True),
    )
    doc["make_sweep"] = make_sweep
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    print(f"schedules/s (median of {doc['repeats']}, default sweep: fast, I10 sampled)")
    for key, rate in doc["schedules_per_s"].items():
        sweep_doc = doc["sweeps"][key]
        print(
            f"  {key:40} {rate:8.1f}/s  ({sweep_doc['schedules']} schedules, "
            f"{sweep_doc['folded']} folded, {sweep_doc['median_wall_s']:.2f}s)"
        )
    print("growth (long_horizon cuts, process crashes):")
    for g in doc["growth"]:
        print(f"  {g['turns']:3d} turns  N={g['boundaries']:5d}  {g['median_wall_s']:8.2f}s")
    print(f"  growth exponent: {doc['growth_exponent']}")
    print(f"folded: {doc['folded_fraction']} of the schedules above (inherited, not run)")
    if doc.get("fuzz_examples_per_s") is not None:
        print(f"fuzz: {doc['fuzz_examples_per_s']} examples/s in one process")
    if doc.get("fuzz_parallel_examples_per_s") is not None:
        print(
            f"fuzz: {doc['fuzz_parallel_examples_per_s']} examples/s with --jobs {doc['fuzz_jobs']}"
        )
    if doc["sim_vs_real"]:
        r = doc["sim_vs_real"]
        print(
            f"sim vs real per crash point ({r['scenario']}): real {r['real_per_point_s']:.3f}s, "
            f"simulated {r['sim_per_point_s'] * 1000:.2f}ms, ratio x{r['ratio']}"
        )
    print(f"peak RSS: {doc['peak_rss_mb']} MB")
    full = doc["make_sweep"]
    if full is not None:
        print(
            f"last make sweep ({full['path']}): {full['schedules']} schedules "
            f"({full['folded'] if full['folded'] is not None else 'none'} folded), "
            f"{full['failures']} failing, {full['wall_s']:.0f} s"
        )
    return 0


def _target_names(text: str) -> list[str]:
    known = list(target_names())
    names = known if text.strip() == "all" else [n for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(
            f"--targets: unknown target(s) {', '.join(unknown) or '(none given)'} "
            f"(known: {', '.join(known)}, or all)"
        )
    return names


def _bench_targets(names: list[str], *, as_json: bool) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.outputs.bench_targets import target_speeds

    doc = target_speeds(names, lambda text: print(f"bench: {text}", file=sys.stderr, flush=True))
    if as_json:
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    forked, fresh = doc["target_s_per_point"], doc["target_fresh_s_per_point"]
    print("seconds per crash point (median), forked from a warm zygote / fresh interpreters:")
    recovery = doc["target_recovery_only_s_per_point"]
    for name, seconds in forked.items():
        line = f"  {name:32} {seconds:7.2f} s  {fresh[name]:7.2f} s  x{fresh[name] / seconds:.1f}"
        if name in recovery:
            line += f"  (recovery only {recovery[name]:.2f} s)"
        print(line)
    for name in doc["target_missing"]:
        print(f"  {name:32} not installed")
    return 0


def _sweep_totals(path: Path) -> dict[str, Any] | None:
    """The totals of a results document (``make sweep``'s), or None if there is none."""
    try:
        totals = json.loads(path.read_text(encoding="utf-8"))["totals"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a results document ({exc})") from exc
    keys = ("schedules", "failures", "wall_s")

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    if not isinstance(totals, dict) or not all(number(totals.get(key)) for key in keys):
        raise UsageError(f"{path}: its totals lack one of {', '.join(keys)}")
    # ``folded`` is absent from documents written before folding existed: None, not refused.
    folded = totals.get("folded")
    if folded is not None and not number(folded):
        raise UsageError(f"{path}: its totals' folded is not a number ({folded!r})")
    return {"path": str(path), **{key: totals[key] for key in keys}, "folded": folded}
