"""``durable-sim sweep``: every crash schedule of each scenario and store, judged, written as a
report (``sim.outputs.report``) built from the library's results document
(``sim.explore.results``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.errors import UsageError
from sim.explore import interrupts, pruning
from sim.explore.parallel import Step, default_jobs, estimated_cost, run_steps
from sim.explore.plan import SweepPlan
from sim.explore.progress import Progress
from sim.explore.recording import ScenarioSweep
from sim.explore.results import DISPLAY_VERDICTS, results_document
from sim.explore.sweep import determinism_mode, sweep
from sim.explore.tier import EXHAUSTIVE_POINTS_MAX, SAMPLE_POINTS
from sim.outputs import options
from sim.outputs.cli.common import (
    SEED_HELP,
    add_crash_option,
    add_seam_options,
    add_stores_option,
    check_out_dir,
    check_stores,
    determinism_of,
    exit_for,
    jobs_arg,
    judged_invariants,
    seed_arg,
    text_arg,
    wide_console,
)
from sim.outputs.report import write_report, write_sarif
from sim.outputs.report.sarif import SARIF_HELP
from sim.world.pgserver import CONNINFO_ENV
from sim.world.stores import StoreKind

if TYPE_CHECKING:  # names for annotations only
    from sim.explore.plan import Determinism
    from sim.world.scenario import Scenario

#: The stores ``sweep`` takes: every kind (Postgres by name only, never through ``both``).
STORES = options.SWEEP_STORES


def add_parsers(sub: Any) -> None:
    """``sweep``: every crash schedule of each scenario, judged, written as a report."""
    sw = sub.add_parser(
        "sweep",
        help="crash every boundary of each scenario and check every invariant",
        description=(
            "For each scenario and store: record the fault-free boundary trace, then run every "
            "schedule (boundary x before/after x crash kind; depth 2 adds a second crash at every "
            f"boundary of the recovery), check the {judged_invariants()} and write a report."
        ),
    )
    sw.add_argument(
        "scenarios", nargs="*", type=text_arg, metavar="SCENARIO", help="default: all bundled"
    )
    _add_fault_options(sw)
    sw.add_argument(
        "--depth", type=int, choices=(1, 2), default=1, help="crashes per schedule, 1..2 (1)"
    )
    sw.add_argument("--seed", type=seed_arg, default=options.DEFAULT_SEED, help=SEED_HELP)
    sw.add_argument(
        "--out", type=text_arg, default="reports/latest", help="report directory (reports/latest)"
    )
    sw.add_argument("--json", action="store_true", help="print the results document on stdout")
    sw.add_argument("--sarif", type=text_arg, default=None, metavar="FILE", help=SARIF_HELP)
    sw.add_argument(
        "--exhaustive",
        action="store_true",
        help=(
            "every crash point of every trace, as campaigns run them; by default a trace of more "
            f"than {EXHAUSTIVE_POINTS_MAX} points is sampled (the CI tier: every stratum and "
            f"recovery class once, the storage faults, then seeded points up to {SAMPLE_POINTS}; "
            "docs/campaigns.md)"
        ),
    )
    sw.add_argument(
        "--naive",
        action="store_true",
        help="re-run every schedule from scratch instead of forking at each crash point",
    )
    add_seam_options(sw)
    sw.add_argument(
        "--quiet", action="store_true", help="no progress on stderr (errors are still printed)"
    )
    sw.add_argument(
        "--determinism",
        choices=("full", "sample", "off"),
        default="sample",
        help=(
            "I10, the determinism check (a second run of a schedule, fingerprints compared): "
            "full = every schedule (twice the cost); sample = a seeded 1 in 16 plus every "
            "failing schedule (default); off = none"
        ),
    )
    sw.add_argument(
        "--no-determinism-check",
        action="store_true",
        help="same as --determinism off",
    )
    _add_prune_options(sw)
    sw.add_argument(
        "--jobs",
        type=jobs_arg,
        default=None,
        help=options.jobs_help(
            "sweeps (scenario x store) run at once, each in a worker process; within a sweep, "
            "up to this many schedules run at once too. Results and reports do not depend on it"
        ),
    )
    sw.set_defaults(handler=run_sweep)


def _add_fault_options(sw: argparse.ArgumentParser) -> None:
    """``--store`` and ``--crash``: what is swept, and with which faults."""
    add_stores_option(
        sw,
        command="sweep",
        supported=STORES,
        note=(
            "file (FileStore), sqlite (SQLiteStore in WAL mode). A scenario's fsync picks the "
            "mode: true = fsync / synchronous=FULL, nothing acknowledged may be lost; false = no "
            "fsync / synchronous=NORMAL, power loss may lose a suffix. postgres, only by name: "
            f"PostgresStore on the server named by ${CONNINFO_ENV}, an empty schema per run; "
            "worker-process kills only (the server is the durable service: no power or storage "
            "faults), and never forked: every schedule runs from scratch, as with --naive"
        ),
    )
    add_crash_option(
        sw,
        note=(
            "process (kill -9), power (power loss: un-synced data lost or torn), storage (kill "
            "-9, then damage to synced data: a flipped bit, a zeroed or misdirected block, a "
            "truncated or deleted file; tried after every acknowledged store operation); "
            "`make sweep` adds storage"
        ),
    )


def _add_prune_options(sw: argparse.ArgumentParser) -> None:
    """``--prune`` and ``--prune-check`` (``sim.explore.pruning``)."""
    sw.add_argument(
        "--prune",
        choices=pruning.PRUNE_MODES,
        default="off",
        help=(
            "rejoin = stop each crashed run where its renamed view rejoins the fault-free run "
            "and judge only the window between (depth 1, file and sqlite; every point, each "
            "child forked at its crash point as the exact sweep's, from scratch with --naive; "
            "docs/architecture.md 2.5); off = run every schedule to its end (default)"
        ),
    )
    sw.add_argument(
        "--prune-check",
        choices=pruning.PRUNE_CHECKS,
        default="sample",
        help=(
            "with --prune rejoin, which stopped runs are also run to their end and compared "
            f"(verdict and views): sample = a seeded 1 in {pruning.CHECK_EVERY} (default); "
            "full = every one. A "
            "mismatch turns pruning off for the scenario, which is then swept exactly"
        ),
    )


def _check_prune(args: argparse.Namespace, scenarios: list[Any]) -> None:
    """One line for a ``--prune`` combination the pruned sweep does not run (as
    ``sim.explore.pruning.sweep`` refuses it, before any worker starts)."""
    if args.prune == "off":
        if args.prune_check != "sample":
            raise UsageError("--prune-check needs --prune rejoin")
        return
    if args.depth != 1:
        raise UsageError("--prune rejoin sweeps depth 1 only (a second crash is not pruned)")
    if not all(StoreKind(store).forks for store in args.store):
        raise UsageError("--prune rejoin runs on the simulated stores (file, sqlite) only")
    timed = [s.name for _, s in scenarios if s.timed_crashes]
    if timed:  # crashes due at absolute times: the view cannot rename them
        raise UsageError(f"--prune rejoin cannot sweep a scenario with timed crashes: {timed[0]}")


FAILURES_SHOWN = 5  # per scenario and store in the summary; the report has every failure


def _skipped(result: ScenarioSweep) -> str:
    """`` (no storage faults)``: the crash kinds asked for that the store could not be given."""
    skipped = [
        k
        for k, flag in (
            ("power", result.expansion.skipped_power),
            ("storage", result.expansion.skipped_storage),
        )
        if flag
    ]
    return f" (no {'/'.join(skipped)} faults)" if skipped else ""


def _swept(step: Any, result: ScenarioSweep) -> str:
    """A sweep's progress summary; a refused scenario (its fault-free run fails) says so.

    A sweep that ended after a stop was requested says nothing: an interrupt that a run could
    not raise (``interrupts.record_dropped``) may have changed that run, so its verdict -- an
    I10 of the fault-free run's second run, say -- is not a verdict. The command stops
    here with 130 instead."""
    interrupts.stop_if_requested()
    if result.reference.failed:
        first = result.failures[0]
        print(
            f"durable-sim: {step.label}: its fault-free run fails "
            f"({first.invariant}: {first.explanation}); no crash schedule was run",
            file=sys.stderr,
        )
    return (
        f"{result.schedules} schedules{_sampled(result)}{_pruned(step, result)}: "
        f"{result.verdict_counts()}"
    )


def _pruned(step: Any, result: ScenarioSweep) -> str:
    """`` (pruned 30, 2 checked to the end)`` for a ``--prune rejoin`` sweep; the harness error
    that turned pruning off, on stderr."""
    stats = result.prune
    if stats is None:
        return ""
    if "broken" in stats:
        print(
            f"durable-sim: {step.label}: rejoin pruning turned off, swept exactly: "
            f"{stats['broken']}",
            file=sys.stderr,
        )
        return " (exact: pruning turned off)"
    return f" (pruned {stats['pruned']}, {stats['checked']} checked to the end)"


def _sampled(result: ScenarioSweep) -> str:
    """`` (sampled: 600 of 6586 points)`` for a trace the CI tier sampled, else nothing."""
    if not result.sample.sampled:
        return ""
    return f" (sampled: {result.sample.points_run} of {result.sample.points_total} points)"


def run_sweep(args: argparse.Namespace) -> int:
    stores = args.store
    determinism = determinism_mode(determinism_of(args))
    scenarios = options.load_scenarios(args.scenarios)
    _check_prune(args, scenarios)
    check_stores(stores)
    out_dir = Path(args.out)
    check_out_dir(out_dir)
    if args.sarif:  # refused now, not after the sweep
        check_out_dir(Path(args.sarif).parent)
    started = time.perf_counter()
    jobs = args.jobs or default_jobs()
    if args.prune == "rejoin":
        # A pruned sweep judges every point (its own check: ``_check_prune``), at depth 1.
        plans = _plans(args, scenarios, determinism=determinism, depth=1, exhaustive=True)
        steps = _steps(
            plans, pruning.sweep, check_mode=args.prune_check, fast=not args.naive, jobs=jobs
        )
    else:
        plans = _plans(
            args, scenarios, determinism=determinism, depth=args.depth, exhaustive=args.exhaustive
        )
        steps = _steps(plans, sweep, fast=not args.naive, jobs=jobs)
    with Progress(command="sweep", unit="schedules", enabled=not args.quiet) as progress:
        results: list[ScenarioSweep] = run_steps(
            steps, jobs=jobs, progress=progress, finished=_swept
        )
    interrupts.stop_if_requested()  # no report of a sweep that was told to stop (``_swept``)

    # A store that cannot be forked (Postgres) is swept naively whatever --naive says.
    fast = not args.naive and all(store.forks for store in stores)
    document = results_document(results, wall_s=time.perf_counter() - started, fast=fast)

    written = write_report(out_dir, document)
    if args.sarif:
        write_sarif(Path(args.sarif), results)
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        _summary(results)
        print(f"report: {out_dir / 'index.html'} ({len(written)} files in {out_dir})")
    refused = any(r.reference.failed for r in results)
    return exit_for(document["totals"]["verdicts"], refused=refused)


def _plans(
    args: argparse.Namespace,
    scenarios: list[tuple[str, Scenario]],
    *,
    determinism: Determinism,
    depth: int,
    exhaustive: bool,
) -> list[SweepPlan]:
    """One plan per scenario and store, in the order the steps run and the report lists them."""

    return [
        SweepPlan(
            scenario=scenario,
            ref=ref,
            store=store,
            seed=args.seed,
            crash_kinds=args.crash,
            depth=depth,
            determinism=determinism,
            exhaustive=exhaustive,
        )
        for ref, scenario in scenarios
        for store in args.store
    ]


def _steps(plans: list[SweepPlan], run: Callable[..., Any], **options: Any) -> list[Any]:
    """One step per plan: ``run`` (``sim.explore.sweep.sweep``, or ``sim.explore.pruning.sweep``,
    serial within a scenario) with the execution ``options``."""
    return [
        Step(
            f"{plan.scenario.name}[{plan.store}]",
            partial(run, plan, **options),
            estimated_cost(plan.scenario, plan.store, plan.crash_kinds),
        )
        for plan in plans
    ]


def _summary(results: list[ScenarioSweep]) -> None:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from rich.table import Table

    table = Table(title="durable-sim sweep")
    console = wide_console()
    for col in ("scenario", "store", "boundaries", "schedules"):
        table.add_column(col, justify="left" if col in ("scenario", "store") else "right")
    for verdict in DISPLAY_VERDICTS:
        table.add_column("nondet." if verdict == "nondeterminism" else verdict, justify="right")
    table.add_column("wall s", justify="right")
    for r in results:
        table.add_row(
            r.name,
            r.store + _skipped(r),
            str(r.reference.boundaries),
            str(r.schedules) + (" sampled" if r.sample.sampled else ""),
            *(str(r.verdicts[verdict]) for verdict in DISPLAY_VERDICTS),
            f"{r.wall_s:.1f}",
        )
    console.print(table)
    for r in results:
        shown = r.failures[:FAILURES_SHOWN]
        for failure in shown:
            console.print(
                f"[red]{failure.verdict}[/red] {failure.invariant} {r.name}[{r.store}] "
                f"{failure.schedule}: {failure.explanation}",
                markup=True,
                highlight=False,
            )
            # One line, however long: soft_wrap leaves wrapping to the terminal, so the line
            # copied from a log or a pipe runs as printed.
            console.print(
                f"  repro: {failure.repro}", markup=False, highlight=False, soft_wrap=True
            )
        if len(r.failures) > len(shown):
            console.print(
                f"  ... and {len(r.failures) - len(shown)} more failures of {r.name}[{r.store}] "
                "(all of them are in the report)",
                markup=False,
                highlight=False,
            )
