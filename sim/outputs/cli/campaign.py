"""``durable-sim campaign``: a sweep as a plan of units (``sim.explore.campaign``), run on this
machine's cores or a Dask cluster, into a directory of unit files that resumes, shards and merges
(docs/campaigns.md). A complete campaign writes the same report as ``durable-sim sweep``.

Also the pieces ``merge`` shares: the report of a complete campaign, the exit status, and the
GitHub Actions output (``::error`` annotations naming the scenario file, a step summary).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.explore import interrupts
from sim.explore.parallel import default_jobs
from sim.explore.progress import Progress
from sim.explore.results import results_document
from sim.outputs import options
from sim.outputs.cli.common import (
    EXIT,
    add_crash_option,
    add_stores_option,
    check_out_dir,
    determinism_of,
    exit_for,
    jobs_arg,
    seed_arg,
    text_arg,
)
from sim.outputs.report import write_report, write_sarif
from sim.outputs.report.markdown import code, text
from sim.outputs.report.sarif import SARIF_HELP
from sim.world import scenario as scenarios
from sim.world.seeded import SEED_MAX
from sim.world.stores import StoreKind

#: A campaign forks every sweep (its units are ranges of a forked sweep's crash points).
FORKED_STORES: tuple[StoreKind, ...] = tuple(kind for kind in StoreKind if kind.forks)
FAILURES_SHOWN = 5  # per scenario and store, in the summary and as annotations
DEFAULT_OUT = "reports/campaign"


def add_parsers(sub: Any) -> None:
    """``campaign``: the sweep as units, resumable, sharded, on local cores or Dask."""
    cp = sub.add_parser(
        "campaign",
        help="a sweep as a plan of units: resumable, sharded, on local cores or a Dask cluster",
        description=(
            "Plan every crash schedule of each scenario and store as units (ranges of crash "
            "points), run the units not yet done into --out (one checksummed file each; "
            "run again to resume), and once every unit is done write the report `durable-sim "
            "sweep` would write. --shard K/N runs one share of the units (balanced by "
            "estimated cost) for a CI matrix; `durable-sim merge` joins the shards' directories."
        ),
    )
    cp.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="default: all bundled")
    add_stores_option(
        cp,
        command="campaign",
        supported=FORKED_STORES,
        note="Postgres is never forked, so it is not campaigned (sweep it by name)",
    )
    add_crash_option(cp, note="As in `durable-sim sweep`")
    cp.add_argument(
        "--seed",
        type=seed_arg,
        default=options.DEFAULT_SEED,
        help=f"world seed, 0..{SEED_MAX} (default {options.DEFAULT_SEED})",
    )
    cp.add_argument(
        "--determinism",
        choices=("full", "sample", "off"),
        default="sample",
        help="I10 as in `durable-sim sweep` (default sample)",
    )
    cp.add_argument("--no-determinism-check", action="store_true", help="--determinism off")
    cp.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"the campaign directory (default {DEFAULT_OUT})",
    )
    add_execution_options(cp)
    split = cp.add_mutually_exclusive_group()
    split.add_argument(
        "--points-per-unit",
        type=count_arg,
        default=None,
        metavar="N",
        help="at most N crash points per unit (a boundary's points are never split)",
    )
    split.add_argument(
        "--unit-cost",
        type=options.arg_type(options.number, 0.0, MAX_UNIT_COST),
        default=None,
        metavar="C",
        help="at most C estimated cost per unit, in boundaries run (default 200000: "
        "long_horizon ~25 units per store, every other bundled scenario one)",
    )
    cp.add_argument("--shard", default=None, metavar="K/N", help="run shard K of N only")
    cp.set_defaults(handler=run_campaign_command)


def add_execution_options(p: argparse.ArgumentParser) -> None:
    """What ``campaign`` and its reports share with ``merge``: output and CI options, and the
    engine options."""
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="local: this machine's cores (default); dask: a Dask cluster (the [dask] extra)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDR",
        help="with --engine dask: a running scheduler (tcp://HOST:PORT); default: a local "
        "cluster of --jobs worker processes",
    )
    p.add_argument(
        "--jobs",
        type=jobs_arg,
        default=None,
        help="units run at once (local), or local Dask workers (default: the machine's cores)",
    )
    add_output_options(p)


def add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the results document on stdout")
    p.add_argument("--sarif", type=text_arg, default=None, metavar="FILE", help=SARIF_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--github",
        action="store_true",
        help="failures as GitHub Actions annotations and a step summary (on by itself when "
        "GITHUB_ACTIONS=true)",
    )


def run_campaign_command(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.explore.campaign.engines import engine_named
    from sim.explore.campaign.plan import Split, parse_shard, plan_sweeps
    from sim.explore.campaign.run import run_campaign

    kinds = args.crash
    scenarios = options.load_scenarios(args.scenarios)
    stores = [str(kind) for kind in args.store]
    out_dir = Path(args.out)
    jobs = args.jobs or default_jobs()
    shard = parse_shard(args.shard) if args.shard else None
    split = Split(points=args.points_per_unit, cost=None) if args.points_per_unit else None
    if args.unit_cost is not None:
        split = Split(cost=args.unit_cost)
    # An engine that cannot run here (a missing extra, a malformed or unreachable
    # scheduler) is refused before anything is planned or written, --out included.
    engine = engine_named(args.engine, jobs=jobs, scheduler=args.scheduler, progress=None)
    check_out_dir(out_dir)
    if args.sarif:  # refused now, not after the units ran
        check_out_dir(Path(args.sarif).parent)
    plan = plan_sweeps(
        scenarios,
        stores=stores,
        crash_kinds=kinds,
        seed=args.seed,
        determinism=determinism_of(args),
        split=split,
        jobs=jobs,
    )
    with Progress(command="campaign", unit="schedules", enabled=not args.quiet) as progress:
        engine.progress = progress
        _note(args, f"{len(plan.units)} units planned ({_share(shard)})")
        result = run_campaign(
            plan, out_dir, engine=engine, shard=shard, notice=lambda t: _note(args, t)
        )
    return finish(args, result, out_dir, shard=shard)


def _share(shard: tuple[int, int] | None) -> str:
    return f"shard {shard[0]}/{shard[1]}" if shard else "every unit"


def _note(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(f"campaign: {text}", file=sys.stderr, flush=True)


def finish(
    args: argparse.Namespace,
    result: Any,
    out_dir: Path,
    *,
    shard: tuple[int, int] | None = None,
) -> int:
    """Report what a campaign or merge found: the report once complete, the errors and
    conflicts always, the GitHub output when asked; the exit status. Nothing once a stop was
    requested (``sim.explore.interrupts``): the command stops with 130 instead."""
    interrupts.stop_if_requested()
    for label, error in result.errors:
        print(f"durable-sim: unit {label} failed: {error.strip()}", file=sys.stderr)
    for conflict in result.conflicts:
        print(f"durable-sim: nondeterminism: {conflict}", file=sys.stderr)
    if result.merged is None:
        sweeps = _share_sweeps(result)
        total = len(result.plan.units)
        ran = f"{len(result.ran)} units run, {result.skipped} were done already; "
        print(
            f"{args.command}: {ran if args.command == 'campaign' else ''}"
            f"{total - len(result.missing)} of {total} units of the plan are in {out_dir} "
            "(join shards' directories with `durable-sim merge DIR... --out DIR`; run the "
            "campaign again to run what is missing)"
        )
        document = None
    else:
        sweeps = result.merged.sweeps
        document = _write_report(result, out_dir)
    verdicts = _verdicts(sweeps)
    verdicts["nondeterminism"] += len(result.conflicts)
    verdicts["error"] += len(result.errors)
    if args.sarif:  # a shard's too: its own units' failures, for its own upload
        write_sarif(Path(args.sarif), sweeps)
    if _github(args):
        annotate(sweeps)
        step_summary(
            sweeps, verdicts, complete=document is not None, shard=shard, unit_s=_unit_s(result)
        )
    if document is not None and args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    elif document is not None:
        _summary(sweeps, verdicts)
        print(f"report: {out_dir / 'index.html'}")
    refused = any(one.reference.failed for one in sweeps)
    return exit_for(verdicts, refused=refused)


def _write_report(result: Any, out_dir: Path) -> dict[str, Any]:
    # The campaign's time, as each sweep's is (docs/campaigns.md): its units' wall times summed,
    # wherever and whenever they ran -- not the seconds of the command that merged them.
    document = results_document(result.merged.sweeps, wall_s=result.merged.wall_s, fast=True)
    write_report(out_dir, document)
    return document


def _unit_s(result: Any) -> float:
    """The wall time of the units a report covers: every unit of a merged campaign, else the
    share this command ran or found."""
    if result.merged is not None:
        return float(result.merged.wall_s)
    chosen = {unit.address for unit in result.selected}
    docs = [doc for address, doc in result.results.items() if address in chosen]
    return float(sum(doc["result"].get("wall_s", 0.0) for doc in docs))


def _share_sweeps(result: Any) -> list[Any]:
    """An incomplete campaign (a shard): each of its units' outcomes recorded on their own."""
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.explore.campaign.merge import unit_failures

    chosen = {unit.address for unit in result.selected}
    return [
        unit_failures(result.results[unit.address])
        for unit in result.plan.units
        if unit.address in chosen and unit.address in result.results
    ]


def _verdicts(sweeps: list[Any]) -> dict[str, int]:
    counts = dict.fromkeys(EXIT, 0)
    for one in sweeps:
        for verdict, n in one.verdicts.items():
            counts[verdict] += n
    return counts


_VERDICTS = ("pass", "safety", "liveness", "nondeterminism", "error")


def _summary(sweeps: list[Any], verdicts: dict[str, int]) -> None:
    shown = ", ".join(f"{v} {verdicts[v]}" for v in _VERDICTS if verdicts.get(v))
    print(f"campaign: {sum(s.schedules for s in sweeps)} schedules: {shown or 'none'}")
    for one in sweeps:
        for failure in one.failures[:FAILURES_SHOWN]:
            print(
                f"{failure.verdict} {failure.invariant} {one.name}[{one.store}] "
                f"{failure.schedule}: {failure.explanation}"
            )
            print(f"  repro: {failure.repro}")
        if len(one.failures) > FAILURES_SHOWN:
            more = len(one.failures) - FAILURES_SHOWN
            print(f"  ... and {more} more failures of {one.name}[{one.store}] (see the report)")


# -- GitHub Actions ------------------------------------------------------------------------------


def _github(args: argparse.Namespace) -> bool:
    return bool(args.github) or os.environ.get("GITHUB_ACTIONS") == "true"


def _escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (GitHub's toolkit rules)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value: also ``:`` and ``,``."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def scenario_file(ref: str) -> str:
    """The file a scenario came from, relative to the current directory (a CI job's checkout):
    the path given, or the bundled scenario's file."""
    if ref.endswith(".json") or "/" in ref:
        return ref

    directory = getattr(scenarios, "SCENARIO_DIR", None)
    if directory is None:
        return ref
    return os.path.relpath(Path(directory) / f"{ref}.json")


#: Where an annotation points: a file, and a line when one is known.
Locate = Callable[[Any, Any], tuple[str, int | None]]


def annotate(sweeps: list[Any], *, locate: Locate | None = None) -> None:
    """One ``::error`` line per failure (the first ``FAILURES_SHOWN`` per scenario x store),
    naming the scenario's file, the schedule and the repro line; past the cap, one ``::notice``
    says how many more there are, so a capped list is never read as the whole. ``locate``
    (sweep, failure) -> (file, line; "" and 0 for none) points each elsewhere: the GitHub
    Action (``sim.outputs.action``) points a sweep's failures where its SARIF log does."""
    for one in sweeps:
        path = _escape_property(scenario_file(one.ref or one.name))
        for failure in one.failures[:FAILURES_SHOWN]:
            where = f"file={path},"
            if locate is not None:  # no file: an annotation of the run, not of a file
                file, line = locate(one, failure)
                where = f"file={_escape_property(file)}," if file else ""
                where += f"line={line}," if file and line else ""
            title = _escape_property(
                f"{failure.verdict} {failure.invariant} {one.name}[{one.store}] {failure.schedule}"
            )
            message = _escape_data(f"{failure.explanation}\nrepro: {failure.repro}")
            print(f"::error {where}title={title}::{message}")
        more = _more_failures(one)
        if more:
            title = _escape_property(f"{more} more failures of {one.name}[{one.store}]")
            message = _escape_data(f"only the first {FAILURES_SHOWN} are annotated; {_SEE_ALL}")
            print(f"::notice file={path},title={title}::{message}")


_SEE_ALL = "the report (report.md, index.html, results.json) lists every one"


def _more_failures(one: Any) -> int:
    return max(0, len(one.failures) - FAILURES_SHOWN)


def step_summary(
    sweeps: list[Any],
    verdicts: dict[str, int],
    *,
    complete: bool,
    shard: tuple[int, int] | None,
    unit_s: float = 0.0,
    command: str = "",
) -> None:
    """Append a short Markdown summary to ``$GITHUB_STEP_SUMMARY`` when it is set: a header
    naming what it covers (the campaign, or one shard of it) with its schedules and its time --
    the units' wall times summed, as the report's (``_write_report``), not the seconds of the
    command that merged them --, the verdicts, and, only where something failed, a row per
    failing scenario x store and the first failures' repro lines (with how many more).
    ``command``: another command's complete report (``sweep``, ``target sweep``: the GitHub
    Action's, ``sim.outputs.action``), its time the sweeps' wall time."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return

    if command:
        what = command
    elif complete:
        what = "campaign"
    elif shard is not None:
        what = f"campaign, shard {shard[0]}/{shard[1]}"
    else:
        what = "campaign, incomplete"
    schedules = sum(one.schedules for one in sweeps)
    took = f"{unit_s:.1f} s" + ("" if command else " of unit time")
    lines = [f"## durable-sim {text(what)}: {schedules} schedules, {took}"]
    lines += ["", " · ".join(f"{v} {verdicts.get(v, 0)}" for v in _VERDICTS)]
    failing = [one for one in sweeps if one.failures]
    if not failing:
        lines += ["", "No failures." if complete else "No failures in these units."]
    else:
        lines += ["", "| scenario | store | schedules | failures |", "| --- | --- | ---: | ---: |"]
        for one in failing:
            lines.append(
                f"| {text(one.name)} | {text(one.store)} | {one.schedules} | {len(one.failures)} |"
            )
        lines.append("")
    for one in failing:
        for failure in one.failures[:FAILURES_SHOWN]:
            what = f"{text(failure.verdict)} {text(failure.invariant)}"
            lines.append(f"- {what}: {code(failure.repro)}")
        if _more_failures(one):
            lines.append(
                f"- {_more_failures(one)} more failures of {text(one.name)} "
                f"\\[{text(one.store)}\\]: {_SEE_ALL}"
            )
    with open(target, "a", encoding="utf-8") as summary:
        summary.write("\n".join(lines) + "\n")


# -- fuzz --budget -------------------------------------------------------------------------------

#: Bounds of the unit-size options: a unit of more points than any trace has, or of more
#: examples than a fuzzer may run, is a typo.
MAX_POINTS_PER_UNIT = 10_000_000
MAX_UNIT_COST = 1e12
count_arg = options.arg_type(options.integer, 1, MAX_POINTS_PER_UNIT)
examples_arg = options.arg_type(options.integer, 1, options.MAX_EXAMPLES)


def add_budget_options(p: argparse.ArgumentParser) -> None:
    """``fuzz --budget``: fuzzing as campaign units on an engine, for a time."""
    group = p.add_argument_group("a time budget, as campaign units (docs/campaigns.md)")
    group.add_argument(
        "--budget",
        type=options.arg_type(options.duration_s),
        default=None,
        metavar="DURATION",
        help="fuzz for this long (90s, 15m, 1h30m): every fuzzer again and again with the "
        "next seed, as units of --unit-examples examples, on --engine",
    )
    group.add_argument("--engine", choices=("local", "dask"), default="local")
    group.add_argument("--scheduler", default=None, metavar="ADDR", help="with --engine dask")
    group.add_argument(
        "--unit-examples",
        type=examples_arg,
        default=None,
        metavar="N",
        help="examples per unit with --budget (default 50)",
    )


def run_fuzz_budget(args: argparse.Namespace, scenarios: list[Any], corpus: Path) -> int:
    """``fuzz --budget``: units until the budget is spent; every failure saved to the corpus."""
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.explore.campaign.engines import engine_named
    from sim.explore.campaign.fuzz_budget import UNIT_EXAMPLES, WAVE_PER_JOB, fuzz_for, fuzzers_of
    from sim.explore.fuzz import save_case

    jobs = args.jobs or default_jobs()
    engine = engine_named(args.engine, jobs=jobs, scheduler=args.scheduler, progress=None)
    fuzzers = fuzzers_of(scenarios, machine=not args.no_machine)
    with Progress(command="fuzz", unit="examples") as progress:
        engine.progress = progress
        run = fuzz_for(
            fuzzers,
            budget_s=args.budget,
            engine=engine,
            store=args.store,
            examples=args.unit_examples or UNIT_EXAMPLES,
            seed=args.seed,
            wave=jobs * WAVE_PER_JOB,
        )
    for label, error in run.errors:
        print(f"durable-sim: unit {label} failed: {error.strip()}", file=sys.stderr)
    for finding in run.findings:
        path = save_case(finding, corpus)
        print("\n".join(finding.describe()))
        print(f"saved: {path}")
        print(f"repro: {finding.repro(str(path))}")
    rate = run.examples / run.wall_s if run.wall_s else 0.0
    print(
        f"fuzz: {run.examples} examples in {run.units} units, {run.wall_s:.1f}s ({rate:.1f}/s), "
        f"{len(run.findings)} failure(s)"
    )
    if run.findings:
        return EXIT["safety"]
    return EXIT["error"] if run.errors else EXIT["pass"]
