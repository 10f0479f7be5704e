"""``durable-sim mutants``: plant each catalogued runtime bug and show which oracle kills it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from sim.errors import UsageError
from sim.explore.mutants import MUTANTS, kill, mutant_named
from sim.explore.progress import Progress
from sim.outputs.cli.common import (
    seed_arg,
    wide_console,
)
from sim.world.pgserver import CONNINFO_ENV
from sim.world.scenario import bundled_names
from sim.world.stores import StoreKind


def add_parsers(sub: Any) -> None:
    """``mutants``: the kill matrix of the mutant registry."""
    mu = sub.add_parser(
        "mutants",
        help="plant known recovery bugs one at a time and check the sweep catches each",
        description=(
            "For each registered mutant (a monkeypatch of one runtime function: a known "
            "bug class of durable runtimes; the SQLite ones also plant a sync SQLite or its disk "
            "skips), run the default sweep -- its own scenario first, then every bundled "
            "scenario, both stores (its own store first; a postgres mutant on a server named by "
            f"{CONNINFO_ENV}, skipped without one), process and power crashes (and storage "
            "faults for the mutants that mishandle damaged storage, pauses for the fencing "
            "ones) -- until the first failing "
            "schedule, and print the kill matrix. Exit 1 if any mutant survives."
        ),
    )
    mu.add_argument(
        "names", nargs="*", metavar="MUTANT", help="default: every mutant the sweep must kill"
    )
    mu.add_argument("--seed", type=seed_arg, default=0, help="world seed (default 0)")
    mu.add_argument("--json", action="store_true", help="print the kill matrix as JSON")

    mu.set_defaults(handler=run_mutants)


def run_mutants(args: argparse.Namespace) -> int:
    chosen = [_swept(name) for name in args.names] or [m for m in MUTANTS if m.swept]
    if not args.names and not os.environ.get(CONNINFO_ENV):
        # A postgres mutant is swept on a server only: said, not silently passed.
        serverless = [m for m in chosen if m.store != StoreKind.POSTGRES]
        if len(serverless) < len(chosen):
            print(
                f"mutants: {len(chosen) - len(serverless)} postgres mutant(s) skipped: "
                f"set {CONNINFO_ENV} to sweep them",
                file=sys.stderr,
            )
        chosen = serverless
    scenarios = bundled_names()
    results = []
    with Progress(command="mutants", unit="schedules") as progress:
        for mutant in chosen:
            progress.start(mutant.name)
            result = kill(mutant, scenarios=scenarios, seed=args.seed, progress=progress.advance)
            results.append(result)
            progress.finish(
                f"killed by {','.join(result.invariants)} on {result.scenario}[{result.store}]"
                if result.killed
                else "SURVIVED"
            )
    if args.json:
        print(json.dumps({"mutants": [r.to_json() for r in results]}, indent=2, sort_keys=True))
    else:
        _kill_matrix(results)
    return 0 if all(r.killed for r in results) else 1


def _swept(name: str) -> Any:
    """The registered mutant ``name``, if the depth-1 sweep kills it: naming another is a usage
    error (it would survive by design)."""
    mutant = mutant_named(name)
    if not mutant.swept:
        raise UsageError(
            f"mutant {name!r} needs {len(mutant.witness)} crashes: the depth-1 sweep does not "
            "kill it (the schedule fuzzer's test hunts it)"
        )
    return mutant


def _kill_matrix(results: list[Any]) -> None:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from rich.table import Table

    table = Table(title="durable-sim mutants: kill matrix")
    console = wide_console()
    for col in ("mutant", "killed", "by", "scenario", "first killing schedule", "runs", "wall s"):
        table.add_column(col, justify="right" if col in ("runs", "wall s") else "left")
    for r in results:
        table.add_row(
            r.name,
            "yes" if r.killed else "[red]NO[/red]",
            ",".join(r.invariants) if r.killed else "-",
            f"{r.scenario}[{r.store}]" if r.killed else "-",
            r.schedule or "-",
            str(r.schedules_to_kill),
            f"{r.wall_s:.2f}",
        )
    console.print(table)
    slowest = max(results, key=lambda r: r.wall_s, default=None)
    if slowest is not None:
        console.print(f"slowest kill: {slowest.name} ({slowest.wall_s:.2f}s)", highlight=False)
