"""``durable-sim coverage``: which recovery branches of durable/ the sweep reaches
(``sim.explore.reach``)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from sim.errors import UsageError
from sim.outputs import options
from sim.outputs.cli.common import (
    EXIT,
    add_crash_option,
    add_stores_option,
    seed_arg,
    text_arg,
    wide_console,
)

#: The stores ``coverage`` measures: the default sweep's (Postgres needs a server, and the
#: recovery branches it reaches are the store-independent ones the file kinds reach too).
STORES = options.FILE_STORES


def add_parsers(sub: Any) -> None:
    """``coverage``: which recovery branches of durable/ the sweep and fuzzer reach."""
    cv = sub.add_parser(
        "coverage",
        help="measure which lines and recovery branches of durable/ the sweep and fuzzer reach",
        description=(
            "Run the default sweep (every bundled scenario, both stores, process and power "
            "crashes) and the fuzzer under coverage.py, print line and branch coverage of each "
            "file of durable/, and list the recovery branches (sim/explore/reach/regions.py: "
            "RECOVERY_REGIONS) "
            "that nothing reached, as FILE:LINE->LINE with the function. Exit 1 if one is not in "
            "the allowed list (ALLOWED_UNREACHED, each with its reason). The whole measurement "
            "takes many minutes; --scenario, --store and --no-fuzz narrow it, and CI replays the "
            "small reach corpus instead (--from-corpus; tests/sim/explore/test_reach.py)."
        ),
    )
    cv.add_argument(
        "--scenario",
        action="append",
        type=text_arg,
        default=[],
        metavar="NAME",
        help="sweep only this bundled scenario (repeatable; default: all)",
    )
    add_stores_option(cv, command="coverage", supported=STORES, note="Swept and fuzzed")
    add_crash_option(
        cv,
        note="The sweep's, as for sweep --crash: add storage to see which allowed branches "
        "storage faults reach",
    )
    cv.add_argument("--no-fuzz", action="store_true", help="skip the fuzzer (the sweep only)")
    cv.add_argument(
        "--examples",
        type=options.arg_type(options.integer, 1, options.MAX_EXAMPLES),
        default=300,
        help=f"fuzzer examples per scenario, 1..{options.MAX_EXAMPLES} (default 300)",
    )
    cv.add_argument(
        "--seed",
        type=seed_arg,
        default=options.DEFAULT_SEED,
        help="world and Hypothesis seed, 0..2**64-1 (default 0)",
    )
    cv.add_argument(
        "--json", type=text_arg, metavar="PATH", help="also write the full report as JSON to PATH"
    )
    cv.add_argument(
        "--write-corpus",
        type=text_arg,
        metavar="PATH",
        help=(
            "write the reach corpus (a small set of schedules that reaches every recovery branch "
            "the measurement reached; CI replays it) to PATH, e.g. tests/reach_corpus.json"
        ),
    )
    cv.add_argument(
        "--from-corpus",
        type=text_arg,
        metavar="PATH",
        help="instead of sweeping, replay the cases of a reach corpus (what CI does)",
    )
    cv.add_argument("--quiet", action="store_true", help="no progress on stderr")
    cv.set_defaults(handler=run_coverage)


def run_coverage(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.explore import reach

    reach.require_coverage()
    if args.from_corpus and args.write_corpus:
        raise UsageError("--write-corpus needs a measurement, not a corpus replay (--from-corpus)")
    if args.scenario:
        options.load_scenarios(args.scenario)  # unknown names fail here, as a usage error
    if args.from_corpus:
        reach.load_corpus(args.from_corpus)
    measurement = reach.Options(
        scenarios=tuple(args.scenario),
        stores=args.store,
        crash_kinds=args.crash,
        fuzz_examples=0 if args.no_fuzz else args.examples,
        seed=args.seed,
        corpus=args.from_corpus,
        quiet=args.quiet,
    )
    try:
        raw = reach.run_measurement(measurement)
        report = reach.analyze(raw)
    except reach.ReachError as exc:
        print(f"durable-sim: {exc}", file=sys.stderr)
        return EXIT["error"]
    if args.write_corpus:
        corpus = reach.build_corpus(raw, report, seed=args.seed)
        Path(args.write_corpus).write_text(json.dumps(corpus, indent=1) + "\n", encoding="utf-8")
        # What CI will see: replay the corpus just written (a forked child can take a path its
        # plain replay does not, so the credit the corpus was built on is checked here).
        check = reach.analyze(reach.run_measurement(replace(measurement, corpus=args.write_corpus)))
        allowed = {b["branch"] for b in report["reached_allowed"]}
        missed = set(report["reached_keys"]) - set(check["reached_keys"]) - allowed
        report["corpus"] = {
            "path": args.write_corpus,
            "cases": len(corpus["cases"]),
            "uncovered": sorted(missed | set(corpus["uncovered"])),
        }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    _coverage_summary(report)
    failing = report["recovery"]["unreached_failing"] or report["stale_allowances"]
    incomplete = report.get("corpus", {}).get("uncovered")
    return 1 if failing or incomplete or _boundaries_moved(report) else 0


def _boundaries_moved(report: dict[str, Any]) -> bool:
    return any(
        note.startswith("boundary numbering changed") for note in report["measurement"]["notes"]
    )


def _coverage_summary(report: dict[str, Any]) -> None:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from rich.table import Table

    table = Table(title="durable-sim coverage of durable/")
    for col in ("file", "lines", "lines %", "branches", "branches %"):
        table.add_column(col, justify="left" if col == "file" else "right")
    for row in [*report["files"], {"file": "TOTAL", **report["totals"]}]:
        lines, branches = row["lines"], row["branches"]
        table.add_row(
            row["file"],
            f"{lines['covered']}/{lines['total']}",
            f"{row['lines_percent']:.1f}",
            f"{branches['covered']}/{branches['total']}",
            f"{row['branches_percent']:.1f}",
        )
    console = wide_console()
    console.print(table)
    recovery = report["recovery"]
    print(
        f"recovery branches: {recovery['reached']} of {recovery['branches']} reached in "
        f"{recovery['regions']} regions; {recovery['unreached']} unreached "
        f"({recovery['unreached_allowed']} allowed, {recovery['unreached_failing']} not)"
    )
    for branch in report["unreached"]:
        why = f"allowed: {branch['allowed']}" if branch["allowed"] else "UNREACHED"
        print(f"  {branch['branch']:44} {branch['function']:36} {why}")
        print(f"      {branch['from']}  ->  {branch['to']}")
    for stale in report["stale_allowances"]:
        print(
            "stale allowance (matches no branch; remove it from sim/explore/reach/regions.py): "
            f"{stale}"
        )
    for branch in report["reached_allowed"]:
        where = "its allowance in sim/explore/reach/regions.py is wrong"
        print(f"allowed but reached ({where}): {branch['branch']}")
    for note in report["measurement"]["notes"]:
        print(f"note: {note}")
    corpus = report.get("corpus")
    if corpus:
        print(f"reach corpus: {corpus['cases']} cases written to {corpus['path']}")
        for key in corpus["uncovered"]:
            print(
                f"  not reached by the corpus's replay (only by the fuzzer or in a forked "
                f"child; add a scenario that reaches it): {key}"
            )
