"""``durable-sim realcrash``: the simulator's crash points, with real processes killed.

The command line only: parsing, the live table and the summary. The results document is
``sim.outputs.realcrash``'s; what a point is and how the real and simulated sides are compared
lives in ``sim.explore.realcrash``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from sim.outputs import options
from sim.outputs.cli.common import SEED_HELP, seed_arg, text_arg
from sim.outputs.realcrash import realcrash
from sim.run.realrun import BLOCKING_MODES, DEFAULT_SPEEDUP, MAX_GRACE_S
from sim.world.realhost import CLOCKS

#: The stores ``realcrash`` takes: those whose store lives in files beside a real process.
STORES = options.FILE_STORES
MAX_POINTS = 100_000


def add_parsers(sub: Any) -> None:
    """``realcrash``: kill real processes at the crash points and compare with the simulator."""
    rc = sub.add_parser(
        "realcrash",
        help="kill real processes at every crash point and compare with the simulator",
        description=(
            "For each process-kill crash point, run the runtime in a child Python process on real "
            "files or a real SQLite database (on the simulator's virtual clock, or a sped-up wall "
            "clock with --clock scaled), SIGKILL it at that "
            "boundary, restart a child to resume, judge with the same oracles, and compare each "
            "verdict with the simulator's for the same point. Power loss is not faked here."
        ),
    )
    add_realcrash_arguments(rc)
    rc.set_defaults(handler=main_realcrash)


def add_realcrash_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``realcrash`` subcommand's arguments."""
    parser.add_argument("scenario", type=text_arg, help="a bundled scenario name or a .json path")
    parser.add_argument(
        "--store",
        type=options.arg_type(options.store, command="realcrash", supported=STORES),
        default=options.DEFAULT_STORE,
        help=f"{options.store_help(STORES, options.DEFAULT_STORE)} (one store)",
    )
    parser.add_argument(
        "--points",
        type=options.arg_type(options.integer, 1, MAX_POINTS),
        default=None,
        metavar="N",
        help=(
            f"run at most N crash points, 1..{MAX_POINTS}, covering every boundary kind first "
            "(default: all)"
        ),
    )
    parser.add_argument("--seed", type=seed_arg, default=options.DEFAULT_SEED, help=SEED_HELP)
    parser.add_argument(
        "--clock",
        choices=CLOCKS,
        default="virtual",
        help=(
            "virtual (default): the simulator's clock in every child, so timers fire in the "
            "simulator's order and a loaded host changes nothing; scaled: the wall clock sped up "
            "--speedup times, with real work taking scenario time"
        ),
    )
    parser.add_argument(
        "--speedup",
        type=float,
        default=None,
        help=(
            "with --clock scaled: scenario seconds per real second, a number > 0 (default "
            f"{DEFAULT_SPEEDUP:g})"
        ),
    )
    parser.add_argument(
        "--blocking",
        choices=BLOCKING_MODES,
        default=None,
        help=(
            "SQLite calls inline (the default, and the only choice on the virtual clock) or on "
            "worker threads as in production (default with --clock scaled)"
        ),
    )
    parser.add_argument(
        "--preempt",
        type=options.arg_type(options.number, 0.0, MAX_GRACE_S),
        default=0.0,
        metavar="GRACE_S",
        help=(
            "preempt instead of kill: SIGTERM at each point, the runtime's graceful shutdown, "
            f"SIGKILL GRACE_S wall seconds later if still alive (0 < GRACE_S <= {MAX_GRACE_S:g}); "
            "each preempted run must pass, and the table shows the simulator's verdict for a "
            "kill at the same point beside it"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the JSON document on stdout")


def main_realcrash(args: argparse.Namespace) -> int:
    """Run ``realcrash`` from parsed arguments (see ``add_realcrash_arguments``). Exit 0: total
    agreement (and identical fault-free label sequences), 1: any disagreement. Bad input raises
    ``UserError`` (``main`` prints it: one line on stderr, exit 2)."""
    live = not args.json
    shown: list[dict[str, Any]] = []

    def show(row: dict[str, Any]) -> None:
        if not shown:
            print(
                f"{'index':>5} {'when':6} {'label':46} {'real':9} {'sim':9} {'agree':5} {'wall':>8}"
            )
        shown.append(row)
        mark = "yes" if row["agree"] else "NO" + ("" if row["aligned"] else " (misaligned)")
        print(
            f"{row['index']:5d} {row['when']:6} {row['label'][:46]:46} "
            f"{row['real']:9} {row['sim']:9} {mark:5} {row['real_s']:7.2f}s",
            flush=True,
        )

    doc = realcrash(
        args.scenario,
        store=args.store,
        points=args.points,
        seed=args.seed,
        clock=args.clock,
        speedup=args.speedup,
        blocking=args.blocking,
        preempt_s=args.preempt,
        progress=show if live else None,
    )
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        _summary(doc)
    return 0 if doc["agreement"] == 1.0 and doc["labels_match"] else 1


def _summary(doc: dict[str, Any]) -> None:
    scale = doc["time_scale"]
    ref = doc["reference"]
    time_text = (
        "the simulator's virtual time"
        if scale is None
        else f"time x{scale['speedup']:g} (model call {scale['model_latency_real_s'] * 1000:.0f} "
        f"ms, lease TTL {scale['lease_ttl_real_s']:.2f} s)"
    )
    print(
        f"{doc['scenario']} [{doc['store']}]: {doc['boundaries']} boundaries, "
        f"{len(doc['points'])} of {doc['total_points']} process-kill points run; {time_text}"
    )
    if doc["labels_match"]:
        print(f"fault-free labels: identical to the simulator's ({doc['boundaries']} boundaries)")
    else:
        m = doc["label_mismatch"]
        print(
            f"fault-free labels DIFFER from the simulator's at index {m['index']}: "
            f"real {m['real']!r}, simulated {m['sim']!r}"
        )
    print(f"fault-free verdicts: real {ref['real']['verdict']}, simulated {ref['sim']['verdict']}")
    for d in doc["disagreements"]:
        print(f"disagreement at {d['point']} ({d['label']}):")
        if not d["aligned"]:
            first = d["first_divergence"]
            where = f" first at index {first['index']}" if first else ""
            print(
                f"  misaligned: the real run reached this index through other boundaries{where} "
                f"(real {first and first['real']!r}, simulated {first and first['sim']!r}); "
                f"crashed at {d['real_crashes']} vs {d['sim_crashes']}"
            )
        for side in ("real", "sim"):
            info = d[side]
            print(f"  {side:4} {info['verdict']}")
            if info.get("error"):
                print(f"       {info['error']}")
            for v in info["violations"][:3]:
                print(f"       {v['invariant']}: {v['explanation']}")
                for w in v["witness"][:3]:
                    print(f"         {w}")
    agreed = sum(1 for r in doc["points"] if r["agree"])
    total = len(doc["points"])
    if doc["retried_points"] or doc["reference_attempts"] > 1:
        print(
            f"re-run until the real trace lined up with the simulator's (a child the host "
            f"stalled runs on in scenario time): {doc['retried_points']} point(s); fault-free "
            f"run {doc['reference_attempts']} attempt(s)"
        )
    same = sum(1 for r in doc["points"] if r["same_observables"])
    print(
        f"observables (outcome, ledger, final log's event kinds, model calls, processes) "
        f"identical at {same}/{total} points"
    )
    for d in doc["divergences"][:10]:
        keys = ", ".join(sorted(d["differences"]))
        print(f"  {d['point']} ({d['label']}): {keys} differ")
    ratio = doc["per_point_s"] / doc["sim_per_point_s"] if doc["sim_per_point_s"] else 0.0
    print(
        f"agreement {agreed}/{total} = {doc['agreement']:.1%}; median per crash point: real "
        f"{doc['per_point_s']:.2f} s, simulated {doc['sim_per_point_s'] * 1000:.1f} ms "
        f"(x{ratio:.0f}); wall {doc['wall_s']:.1f} s"
    )
