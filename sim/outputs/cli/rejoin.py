"""``durable-sim rejoin``: how many crashed runs go back to doing what the fault-free run does
(``sim.explore.rejoin``; the measurement a pruned sweep would rest on)."""

from __future__ import annotations

import argparse
import json
from functools import partial
from typing import Any

from sim.errors import UsageError
from sim.explore import rejoin
from sim.explore.parallel import Step, default_jobs, estimated_cost, run_steps
from sim.explore.progress import Progress
from sim.explore.rejoin import DEFAULT_POINTS, MAX_POINTS, measure
from sim.outputs import options
from sim.outputs.cli.common import SEED_HELP, add_stores_option, jobs_arg, seed_arg, text_arg
from sim.world.stores import StoreKind

#: The stores it measures: the simulated ones (a canonical view reads the simulated disk).
STORES = options.FILE_STORES


def add_parsers(sub: Any) -> None:
    """``rejoin``: how many of each scenario's depth-1 crashes rejoin the fault-free run."""
    rj = sub.add_parser(
        "rejoin",
        help="measure how many crashed runs rejoin the fault-free run (canonical views)",
        description=(
            "For each scenario and store: run the fault-free run and a sample of its depth-1 "
            "crashes naively, take a canonical view of the world at every commit's end "
            "(sequences and epochs by rank, ids by role, times relative to now) and count the "
            "crashed runs that meet the fault-free run's view at a commit ending after the "
            "crash, and those that rejoin it (every later view equal to the fault-free run's "
            "from there). "
            "Four views, each leaving out more: strict (everything), renamed (not trio's "
            "scheduler RNG), judged (nor the oracles' history), aligned (nor the lease's phase "
            "and the checkpoint cadence). Nothing is pruned on it: it measures."
        ),
    )
    rj.add_argument(
        "scenarios", nargs="*", type=text_arg, metavar="SCENARIO", help="default: all bundled"
    )
    add_stores_option(rj, command="rejoin", supported=STORES, note="")
    rj.add_argument(
        "--crash",
        type=options.arg_type(options.crash_kinds),
        default=("process",),
        metavar="KINDS",
        help="crash kinds, comma-separated: process, power (default process)",
    )
    rj.add_argument(
        "--points",
        type=options.arg_type(options.integer, 1, MAX_POINTS),
        default=DEFAULT_POINTS,
        help=f"crash points per scenario and store, spread evenly over its depth-1 points, "
        f"1..{MAX_POINTS} (default {DEFAULT_POINTS}: each is a whole run viewed at every commit)",
    )
    rj.add_argument("--seed", type=seed_arg, default=options.DEFAULT_SEED, help=SEED_HELP)
    rj.add_argument("--jobs", type=jobs_arg, default=None, help="scenarios measured at once")
    rj.add_argument("--json", action="store_true", help="print the measurement as JSON")
    rj.set_defaults(handler=run_rejoin)


def run_rejoin(args: argparse.Namespace) -> int:
    """Measure each scenario x store as a step (``--jobs`` at once) and print the table or
    the JSON document."""
    if not set(args.crash) <= rejoin.MEASURED_KINDS:
        others = ",".join(k for k in args.crash if k not in rejoin.MEASURED_KINDS)
        raise UsageError(f"rejoin measures process and power crashes, not {others}")
    scenarios = options.load_scenarios(args.scenarios)
    steps = [
        Step(
            f"{scenario.name}[{store}]",
            partial(
                _measure,
                scenario,
                store=store,
                seed=args.seed,
                kinds=args.crash,
                points=args.points,
            ),
            estimated_cost(scenario, store, args.crash),
        )
        for _, scenario in scenarios
        for store in args.store
    ]
    with Progress(command="rejoin", unit="crash points") as progress:
        measures: list[rejoin.ScenarioRejoin] = run_steps(
            steps,
            jobs=args.jobs or default_jobs(),
            progress=progress,
            finished=lambda step, m: f"{m.fraction('renamed'):.1%} rejoin (renamed view)",
        )
    if args.json:
        document = {
            "scenarios": [m.document() for m in measures],
            "rejoin_fraction": rejoin.overall(measures),
        }
        print(json.dumps(document, indent=2, sort_keys=True))
        return 0
    for line in rejoin.rows_of(measures):
        print(line)
    fractions = rejoin.overall(measures)
    print("overall: " + ", ".join(f"{view} {f:.1%}" for view, f in fractions.items()))
    return 0


def _measure(
    scenario: Any,
    *,
    store: StoreKind,
    seed: int,
    kinds: tuple[str, ...],
    points: int,
    progress: Any,
) -> Any:
    """One step: imported in the worker, so the command's parser does not load the sweep."""

    return measure(
        scenario,
        store=store,
        seed=seed,
        crash_kinds=kinds,
        points=points,
        progress=progress,
    )
