"""``durable-sim fuzz``: Hypothesis over crash schedules and world-machine programs; failures are
shrunk, printed and saved to the corpus."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from sim.errors import UsageError
from sim.explore import interrupts
from sim.explore.parallel import default_jobs, run_steps
from sim.explore.progress import Progress
from sim.outputs import options
from sim.outputs.cli.campaign import add_budget_options, run_fuzz_budget
from sim.outputs.cli.common import (
    jobs_arg,
    seed_arg,
    text_arg,
)

#: The stores ``fuzz`` takes: its fuzzers run thousands of short worlds on the simulated disk.
STORES = options.FILE_STORES
#: ``--examples`` when it is not given.
DEFAULT_EXAMPLES = 300


def add_parsers(sub: Any) -> None:
    """``fuzz``: Hypothesis over crash schedules and world-machine programs."""
    fz = sub.add_parser(
        "fuzz",
        help="search odd interleavings with Hypothesis; shrink and save what fails",
        description=(
            "Runs the schedule fuzzer (crash schedules of any depth over each scenario's "
            "boundary trace) and the world machine (programs of submits, re-sends, crashes, "
            "pauses past the lease, aborts and model errors). A failure is shrunk, printed in "
            "replay form and saved to the corpus directory, which the test suite replays."
        ),
    )
    fz.add_argument(
        "scenarios",
        nargs="*",
        type=text_arg,
        metavar="scenario",
        help="default: every bundled scenario",
    )
    fz.add_argument(
        "--examples",
        type=options.arg_type(options.integer, 1, options.MAX_EXAMPLES),
        default=None,
        help=f"examples per fuzzer and scenario, 1..{options.MAX_EXAMPLES} (default "
        f"{DEFAULT_EXAMPLES}); not with --budget, whose units run --unit-examples each",
    )
    fz.add_argument(
        "--seed",
        type=seed_arg,
        default=options.DEFAULT_SEED,
        help="Hypothesis seed (the world seed is 0); 0..2**64-1 (default 0)",
    )
    fz.add_argument(
        "--store",
        type=options.arg_type(options.store, command="fuzz", supported=STORES),
        default=options.DEFAULT_STORE,
        help=f"{options.store_help(STORES, options.DEFAULT_STORE)} (one store)",
    )
    fz.add_argument(
        "--corpus",
        type=text_arg,
        default=None,
        metavar="DIR",
        help=(
            "where failing cases are saved (created only when one is): default "
            "$DURABLE_SIM_CORPUS, else ./tests/corpus if that folder exists, else "
            "./durable-sim-corpus"
        ),
    )
    fz.add_argument(
        "--hypothesis-dir",
        type=text_arg,
        default=None,
        metavar="DIR",
        help=(
            "Hypothesis' own storage (caches; the fuzzers keep no example database): default "
            "$XDG_CACHE_HOME/durable-sim/hypothesis or ~/.cache/durable-sim/hypothesis"
        ),
    )
    fz.add_argument("--no-machine", action="store_true", help="only fuzz schedules")
    fz.add_argument(
        "--jobs",
        type=jobs_arg,
        default=None,
        help=options.jobs_help(
            "fuzzers (one per scenario, and the world machine) run at once, each in a worker "
            "process. Each fuzzer's search is its own seeded Hypothesis run, so what is found "
            "does not depend on it"
        ),
    )
    add_budget_options(fz)
    fz.set_defaults(handler=run_fuzz)


def run_fuzz(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from hypothesis.configuration import set_hypothesis_home_dir

    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.explore.fuzz import fuzz_steps, save_case

    _check_budget_options(args)
    named = options.load_scenarios(args.scenarios)
    scenarios = [scenario for _, scenario in named]
    corpus = _corpus_dir(args.corpus)
    set_hypothesis_home_dir(str(_hypothesis_dir(args.hypothesis_dir)))
    if args.budget is not None:  # docs/campaigns.md: fuzz units on an engine, for a time
        return run_fuzz_budget(args, list(named), corpus)
    started = time.perf_counter()
    examples_each = args.examples or DEFAULT_EXAMPLES
    steps = fuzz_steps(
        scenarios,
        store=args.store,
        examples=examples_each,
        fuzz_seed=args.seed,
        machine=not args.no_machine,
    )
    with Progress(command="fuzz", unit="examples") as progress:
        done = run_steps(
            steps,
            jobs=args.jobs or default_jobs(),
            progress=progress,
            finished=lambda step, result: _finding_line(result[0]),
        )
    # A fuzz told to stop saves nothing: an interrupt a run could not raise may have changed
    # that run (``sim.explore.interrupts.record_dropped``); its failure is no finding.
    interrupts.stop_if_requested()
    examples = sum(count for _, count in done)
    findings = [finding for finding, _ in done if finding is not None]
    wall_s = time.perf_counter() - started
    for finding in findings:
        path = save_case(finding, corpus)
        print("\n".join(finding.describe()))
        print(f"saved: {path}")
        print(f"repro: {finding.repro(str(path))}")
    # ``--examples`` is per fuzzer (each scenario's schedules, and the world machine): say so,
    # so the total is not read as the option's value gone wrong.
    print(
        f"fuzz: {examples} examples ({len(steps)} fuzzer{'s' * (len(steps) != 1)}, up to "
        f"{examples_each} each) in "
        f"{wall_s:.1f}s ({examples / wall_s:.1f}/s), {len(findings)} failure(s)"
    )
    return 1 if findings else 0


def _check_budget_options(args: argparse.Namespace) -> None:
    """``--examples`` sizes a fuzz run, ``--budget`` times one out of units of
    ``--unit-examples``: given together, one of them would be silently ignored."""
    if args.budget is not None and args.examples is not None:
        raise UsageError(
            "--examples and --budget do not go together: --budget runs units of "
            "--unit-examples examples each until its time is spent"
        )
    if args.budget is None and args.unit_examples is not None:
        raise UsageError("--unit-examples needs --budget (without it, say --examples)")


def _finding_line(finding: Any) -> str:
    if finding is None:
        return "no failure"
    first = finding.violations[0] if finding.violations else None
    return f"FAILED {first.invariant if first else '?'} (shrunk; details below)"


def _corpus_dir(given: str | None) -> Path:
    """Where fuzz saves failing cases; checked now, created only when a case is saved."""
    if given is None:
        given = os.environ.get("DURABLE_SIM_CORPUS") or (
            "tests/corpus" if Path("tests/corpus").is_dir() else "durable-sim-corpus"
        )
    path = Path(given)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--corpus {given}: not a directory")
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not os.access(existing, os.W_OK):
        raise UsageError(f"--corpus {given}: {existing} is not writable")
    return path


def _hypothesis_dir(given: str | None) -> Path:
    if given is not None:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "durable-sim" / "hypothesis"
