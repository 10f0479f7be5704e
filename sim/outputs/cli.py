"""``durable-sim``: the command line of the simulator (docs/architecture.md, 3).

Exit status: 0 all pass, 1 a safety violation, 2 usage error, 3 liveness, 4 nondeterminism,
5 harness error. Bad input gets one line on stderr naming the problem, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from sim.explore.progress import Progress
from sim.world.faults import CRASH_KINDS, ScheduleError, parse_schedule
from sim.world.scenario import Scenario, ScenarioError, bundled_names, load_scenario
from sim.world.seams import SeamError, seams
from sim.world.seeded import SEED_MAX

EXIT = {"pass": 0, "safety": 1, "usage": 2, "liveness": 3, "nondeterminism": 4, "error": 5}


FAILURES_SHOWN = 5  # per scenario and store in the summary; the report has every failure


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


def tool_version() -> str:
    try:
        return metadata.version("durable-sim")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is the one line the exit-status contract promises (plus a
    pointer to ``--help``), not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT["usage"], f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _seed(text: str) -> int:
    """A world seed: an integer in the documented range (see ``sim.world.seeded.SEED_MAX``)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text[:40]} is outside 0..{SEED_MAX} (2**64-1)")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="durable-sim",
        description=(
            "Deterministic crash testing for durable agent runtimes. Runs scenarios under a "
            "virtual clock, kills the process at every commit, file, tool, model and lease "
            "boundary (process kill and power loss), restarts it, and checks thirteen invariants."
        ),
        epilog="Exit status: 0 pass, 1 safety, 2 usage, 3 liveness, 4 nondeterminism, 5 error.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="list the bundled scenarios with one-line descriptions")

    run = sub.add_parser(
        "run",
        help="run one scenario fault-free and print its fingerprint, boundaries and outcome",
        description="Run SCENARIO once without faults. SCENARIO is a bundled name or a .json path.",
    )
    run.add_argument("scenario")
    _common(run)
    run.add_argument("--timeline", action="store_true", help="print every boundary of the run")
    _seam_options(run)

    sw = sub.add_parser(
        "sweep",
        help="crash every boundary of each scenario and check every invariant",
        description=(
            "For each scenario and store: record the fault-free boundary trace, then run every "
            "schedule (boundary x before/after x crash kind; depth 2 adds a second crash at every "
            "boundary of the recovery), check the invariants I0-I13 and write a report."
        ),
    )
    sw.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="default: all bundled")
    sw.add_argument("--store", choices=("file", "sqlite", "both"), default="both")
    sw.add_argument(
        "--crash",
        default="process,power",
        help=(
            "crash kinds, comma-separated: process (kill -9), power (power loss: un-synced data "
            "lost or torn), storage (kill -9, then damage to synced data: a flipped bit, a "
            "zeroed or misdirected block, a truncated or deleted file; tried after every "
            "acknowledged store operation). Default process,power; `make sweep` adds storage"
        ),
    )
    sw.add_argument("--depth", type=int, choices=(1, 2), default=1)
    sw.add_argument("--seed", type=_seed, default=0, help=f"world seed, 0..{SEED_MAX} (default 0)")
    sw.add_argument("--out", default="reports/latest", help="report directory")
    sw.add_argument("--json", action="store_true", help="print the results document on stdout")
    sw.add_argument(
        "--naive",
        action="store_true",
        help="re-run every schedule from scratch instead of forking at each crash point",
    )
    _seam_options(sw)
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
    sw.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        help=(
            "sweeps (scenario x store) run at once, each in a worker process; within a sweep, "
            "up to this many schedules run at once too (default: the machine's cores). Results "
            "and reports do not depend on it"
        ),
    )

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
    fz.add_argument("scenario", nargs="?", help="default: every bundled scenario")
    fz.add_argument("--examples", type=int, default=300, help="examples per fuzzer and scenario")
    fz.add_argument(
        "--seed", type=_seed, default=0, help="Hypothesis seed (the world seed is 0); 0..2**64-1"
    )
    fz.add_argument("--store", choices=("file", "sqlite"), default="file")
    fz.add_argument(
        "--corpus",
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
        default=None,
        metavar="DIR",
        help=(
            "Hypothesis' own storage (caches; the fuzzers keep no example database): default "
            "$XDG_CACHE_HOME/durable-sim/hypothesis or ~/.cache/durable-sim/hypothesis"
        ),
    )
    fz.add_argument("--no-machine", action="store_true", help="only fuzz schedules")

    mu = sub.add_parser(
        "mutants",
        help="plant known recovery bugs one at a time and check the sweep catches each",
        description=(
            "For each mutant of the catalogue (a monkeypatch of one runtime function: a known "
            "bug class of durable runtimes), run the default sweep -- its own scenario first, "
            "then every bundled scenario, both stores, process and power crashes (and storage "
            "faults for the mutants that mishandle damaged storage) -- until the first failing "
            "schedule, and print the kill matrix. Exit 1 if any mutant survives."
        ),
    )
    mu.add_argument("names", nargs="*", metavar="MUTANT", help="default: the whole catalogue")
    mu.add_argument("--seed", type=_seed, default=0, help="world seed (default 0)")
    mu.add_argument("--json", action="store_true", help="print the kill matrix as JSON")

    bn = sub.add_parser(
        "bench",
        help="measure schedules/s, sweep growth with N, sim vs real-process cost, peak memory",
        description=(
            "From one run: schedules per second of the depth-1 sweep per scenario and store, the "
            "growth exponent of sweep wall time in the boundary count (long_horizon cut to three "
            "sizes), the time per crash point of the simulated sweep against realcrash, and peak "
            "memory. Medians over --repeats. Quote ratios from one run: the machine is noisy."
        ),
    )
    bn.add_argument("--repeats", type=int, default=3)
    bn.add_argument("--scenarios", default="read_edit_answer,idempotent_payment")
    bn.add_argument("--growth-turns", default="5,10,20", help="long_horizon sizes (tool turns)")
    bn.add_argument("--realcrash-points", type=int, default=6, help="0 skips the comparison")
    bn.add_argument("--json", action="store_true")

    from sim.outputs.realcrash import add_realcrash_arguments

    rc = sub.add_parser(
        "realcrash",
        help="kill real processes at every crash point and compare with the simulator",
        description=(
            "For each process-kill crash point, run the runtime in a child Python process on real "
            "files or a real SQLite database with a (sped-up) real clock, SIGKILL it at that "
            "boundary, restart a child to resume, judge with the same oracles, and compare each "
            "verdict with the simulator's for the same point. Power loss is not faked here."
        ),
    )
    add_realcrash_arguments(rc)

    rp = sub.add_parser(
        "replay",
        help="re-run one crash schedule (as printed by a failure) and judge it",
        description="Replay a schedule such as 14:after:power,20:before:process.",
    )
    rp.add_argument("--scenario", required=True)
    rp.add_argument("--schedule", required=True, help="INDEX:before|after:process|power,...")
    _common(rp)
    rp.add_argument("--timeline", action="store_true", help="print the run with crashes marked")
    _seam_options(rp)
    _coverage_parser(sub)
    return parser


def _seam_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "your own runtime or store (see sim.world.seams; repro lines of a failure found with "
        "swapped seams carry these options)"
    )
    group.add_argument(
        "--open-runtime",
        metavar="SPEC",
        help="FILE.py:NAME or MODULE:NAME of a callable with durable.Runtime.open's keywords",
    )
    group.add_argument(
        "--file-store",
        metavar="SPEC",
        help="FILE.py:NAME or MODULE:NAME of a callable (root, fs, fsync) -> store",
    )


def _swapped_seams(args: argparse.Namespace) -> dict[str, Any]:
    from sim.world.seams import load

    chosen: dict[str, Any] = {}
    for name in ("open_runtime", "file_store"):
        spec = getattr(args, name, None)
        if spec:
            chosen[name] = load(spec)
    return chosen


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=_seed, default=0, help=f"world seed, 0..{SEED_MAX} (default 0)")
    p.add_argument("--store", choices=("file", "sqlite"), default="file")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one line of usage error
        return int(exc.code or 0) if exc.code in (0, None) else EXIT["usage"]
    # SIGTERM (a CI job cancelled, `timeout`) unwinds like Ctrl-C: it is turned into a SIGINT,
    # which trio delivers as KeyboardInterrupt at a safe point; the sweep then kills its forked
    # children and removes its temporary directories on the way out.
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _sigterm_as_sigint) if on_main_thread else None
    try:
        with seams(**_swapped_seams(args)):
            return _dispatch(args)
    except (UsageError, ScenarioError, ScheduleError, SeamError) as exc:
        print(f"durable-sim: {exc}", file=sys.stderr)
        return EXIT["usage"]
    except BrokenPipeError:
        # The reader went away (`durable-sim replay ... | head`): stop quietly, as Unix tools
        # do; point stdout at /dev/null so the interpreter's final flush cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BaseException as exc:  # re-raised unless it is only the user's interrupt
        if not _interrupt_only(exc):
            raise
        print("durable-sim: interrupted", file=sys.stderr)
        return 130
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _sigterm_as_sigint(signum: int, frame: object) -> None:
    del signum, frame
    os.kill(os.getpid(), signal.SIGINT)


def _interrupt_only(exc: BaseException) -> bool:
    """A KeyboardInterrupt, possibly wrapped in (nested) exception groups by trio's nurseries."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_interrupt_only(e) for e in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "realcrash":
        from sim.outputs.realcrash import main_realcrash

        return main_realcrash(args)
    commands = {
        "list": lambda: _list(),
        "run": lambda: _run(args),
        "sweep": lambda: _sweep(args),
        "mutants": lambda: _mutants(args),
        "fuzz": lambda: _fuzz(args),
        "bench": lambda: _bench(args),
        "replay": lambda: _replay(args),
        "coverage": lambda: _coverage(args),
    }
    return commands[args.command]()


def _list() -> int:
    for name in bundled_names():
        scenario = load_scenario(name)
        print(f"{name:32} {scenario.description}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from sim.explore.sweep import base_schedule, timeline
    from sim.run.runner import run_scenario

    scenario = load_scenario(args.scenario)
    base = base_schedule(scenario, seed=args.seed, store=args.store)
    result = run_scenario(scenario, seed=args.seed, store=args.store, schedule=base)
    doc = {
        "scenario": scenario.name,
        "seed": args.seed,
        "store": args.store,
        "fingerprint": result.fingerprint,
        "schedule": base.text(),
        "boundaries": len(result.boundaries),
        "outcome": result.outcome,
        "settled": result.settled,
        "model_calls": len(result.model_calls),
        "virtual_time_s": round(result.virtual_time_s, 3),
    }
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for key in ("scenario", "fingerprint", "boundaries", "settled", "model_calls"):
            print(f"{key:14} {doc[key]}")
        for rid, outcome in result.outcome.items():
            detail = outcome["answer"] or outcome["reason"]
            print(f"{'outcome':14} {rid}: {outcome['status']} {detail}")
        if args.timeline:
            print("\n".join(timeline(result, limit=10_000)))
    if not result.settled or result.runtime_error is not None:
        why = result.runtime_error or (
            f"it did not settle within its liveness bound ({scenario.liveness_bound_s:g} s of "
            "virtual time)"
        )
        print(f"durable-sim: the fault-free run of {scenario.name} fails: {why}", file=sys.stderr)
        return EXIT["usage"]  # a scenario that cannot run fault-free cannot be crash-tested
    return 0


def _determinism(args: argparse.Namespace) -> str:
    return "off" if args.no_determinism_check else str(args.determinism)


def _crash_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in CRASH_KINDS]
    if bad or not kinds:
        raise UsageError(f"--crash takes any of {','.join(CRASH_KINDS)}, got {text!r}")
    return kinds


def _check_out_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write to {path}: {exc.strerror}") from exc


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a positive integer, got {text!r}")
    return value


def _sweep(args: argparse.Namespace) -> int:
    from functools import partial

    from sim.explore.parallel import Step, default_jobs, estimated_cost, run_steps
    from sim.explore.sweep import sweep

    kinds = _crash_kinds(args.crash)
    names = args.scenarios or bundled_names()
    scenarios: list[tuple[str, Scenario]] = [(n, load_scenario(n)) for n in names]
    stores = ["file", "sqlite"] if args.store == "both" else [args.store]
    out_dir = Path(args.out)
    _check_out_dir(out_dir)
    started = time.perf_counter()
    jobs = args.jobs or default_jobs()
    steps = [
        Step(
            f"{scenario.name}[{store}]",
            partial(
                sweep,
                scenario,
                ref=ref,
                store=store,
                seed=args.seed,
                crash_kinds=kinds,
                depth=args.depth,
                determinism=_determinism(args),
                fast=not args.naive,
                jobs=jobs,
            ),
            estimated_cost(scenario, store, kinds),
        )
        for ref, scenario in scenarios
        for store in stores
    ]
    with Progress(command="sweep", unit="schedules", enabled=not args.quiet) as progress:
        results: list[Any] = run_steps(steps, jobs=jobs, progress=progress, finished=_swept)
    document = results_document(results, args, time.perf_counter() - started)
    from sim.outputs.report import ReportError, write_report

    try:
        written = write_report(out_dir, document)
    except ReportError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        _summary(results)
        print(f"report: {out_dir / 'index.html'} ({len(written)} files in {out_dir})")
    refused = any(r.reference_failed for r in results)
    return _exit_for(document["totals"]["verdicts"], refused=refused)


def _swept(step: Any, result: Any) -> str:
    """A sweep's progress summary; a refused scenario (its fault-free run fails) says so."""
    if result.reference_failed:
        first = result.failures[0]
        print(
            f"durable-sim: {step.label}: its fault-free run fails "
            f"({first.invariant}: {first.explanation}); no crash schedule was run",
            file=sys.stderr,
        )
    return f"{result.schedules} schedules: {result.verdict_counts()}"


def results_document(results: list[Any], args: argparse.Namespace, wall_s: float) -> dict[str, Any]:
    verdicts = dict.fromkeys(("pass", "safety", "liveness", "nondeterminism", "error"), 0)
    for r in results:
        for k, v in r.verdicts.items():
            verdicts[k] += v
    return {
        "schema_version": 1,
        "tool": "durable-sim",
        "tool_version": tool_version(),
        "config": {
            "seed": args.seed,
            "depth": args.depth,
            "crash": args.crash,
            "store": args.store,
            "determinism_check": _determinism(args) != "off",
            "determinism": _determinism(args),
            "fast": not args.naive,
        },
        "scenarios": [r.to_json() for r in results],
        "totals": {
            "schedules": sum(r.schedules for r in results),
            "verdicts": verdicts,
            "failures": sum(len(r.failures) for r in results),
            "wall_s": round(wall_s, 3),
        },
    }


def _exit_for(verdicts: dict[str, int], *, refused: bool = False) -> int:
    """The exit status of a sweep: a refused scenario (its fault-free run fails, so its crash
    schedules were not run) is bad input, and says so whatever the other verdicts are."""
    from sim.judgement.oracles import worst_verdict  # lazily, like every heavy import of the CLI

    if refused:
        return EXIT["usage"]
    worst = worst_verdict(verdicts)
    return 0 if worst == "pass" else EXIT[worst]


def _console() -> Any:
    """A console for tables: the terminal's width, or a wide one when output is redirected (a
    CI log should not wrap a summary table into an unreadable column of fragments)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


def _summary(results: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="durable-sim sweep")
    console = _console()
    for col in ("scenario", "store", "boundaries", "schedules", "pass", "safety", "liveness"):
        table.add_column(col, justify="right" if col not in ("scenario", "store") else "left")
    table.add_column("nondet.", justify="right")
    table.add_column("error", justify="right")
    table.add_column("wall s", justify="right")
    for r in results:
        v = r.verdicts
        table.add_row(
            r.name,
            r.store + (" (no power/storage)" if r.skipped_power or r.skipped_storage else ""),
            str(r.boundaries),
            str(r.schedules),
            str(v["pass"]),
            str(v["safety"]),
            str(v["liveness"]),
            str(v["nondeterminism"]),
            str(v["error"]),
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
            console.print(f"  repro: {failure.repro}", markup=False, highlight=False)
        if len(r.failures) > len(shown):
            console.print(
                f"  ... and {len(r.failures) - len(shown)} more failures of {r.name}[{r.store}] "
                "(all of them are in the report)",
                markup=False,
                highlight=False,
            )


def _fuzz(args: argparse.Namespace) -> int:
    from hypothesis.configuration import set_hypothesis_home_dir

    from sim.explore.fuzz import fuzz_machine, fuzz_schedules, save_case

    if not 1 <= args.examples <= 100_000:
        raise UsageError("--examples must be between 1 and 100000")
    names = [args.scenario] if args.scenario else bundled_names()
    scenarios = [load_scenario(n) for n in names]
    corpus = _corpus_dir(args.corpus)
    set_hypothesis_home_dir(str(_hypothesis_dir(args.hypothesis_dir)))
    started = time.perf_counter()
    examples = 0
    findings = []

    def tick() -> None:
        nonlocal examples
        examples += 1
        progress.advance(1)

    with Progress(command="fuzz", unit="examples") as progress:
        for scenario in scenarios:
            progress.start(f"schedules of {scenario.name}[{args.store}]")
            finding = fuzz_schedules(
                scenario,
                store=args.store,
                examples=args.examples,
                fuzz_seed=args.seed,
                on_example=tick,
            )
            progress.finish(_finding_line(finding))
            if finding is not None:
                findings.append(finding)
        if not args.no_machine:
            progress.start(f"world machine[{args.store}]")
            finding = fuzz_machine(
                store=args.store, examples=args.examples, fuzz_seed=args.seed, on_example=tick
            )
            progress.finish(_finding_line(finding))
            if finding is not None:
                findings.append(finding)
    wall_s = time.perf_counter() - started
    for finding in findings:
        path = save_case(finding, corpus)
        print("\n".join(finding.describe()))
        print(f"saved: {path}")
        print(f"repro: {finding.repro(str(path))}")
    print(
        f"fuzz: {examples} examples in {wall_s:.1f}s ({examples / wall_s:.1f}/s), "
        f"{len(findings)} failure(s)"
    )
    return 1 if findings else 0


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


def _bench(args: argparse.Namespace) -> int:
    from sim.outputs.bench import bench

    names = tuple(n.strip() for n in args.scenarios.split(",") if n.strip())
    for name in names:
        load_scenario(name)  # unknown names fail here, as a usage error
    try:
        turns = tuple(int(t) for t in args.growth_turns.split(","))
    except ValueError as exc:
        raise UsageError(f"--growth-turns takes integers, got {args.growth_turns!r}") from exc
    if not 1 <= args.repeats <= 50 or any(not 1 <= t <= 50 for t in turns):
        raise UsageError("--repeats and --growth-turns values must be between 1 and 50")
    note = (lambda text: print(f"bench: {text}", file=sys.stderr)) if not args.json else None
    doc = bench(
        scenarios=names,
        repeats=args.repeats,
        growth_turns=turns,
        realcrash_points=args.realcrash_points,
        progress=note,
    )
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    print(f"schedules/s (median of {doc['repeats']}, default sweep: fast, I10 on)")
    for key, rate in doc["schedules_per_s"].items():
        sweep_doc = doc["sweeps"][key]
        print(
            f"  {key:40} {rate:8.1f}/s  ({sweep_doc['schedules']} schedules, "
            f"{sweep_doc['median_wall_s']:.2f}s)"
        )
    print("growth (long_horizon cuts, process crashes):")
    for g in doc["growth"]:
        print(f"  {g['turns']:3d} turns  N={g['boundaries']:5d}  {g['median_wall_s']:8.2f}s")
    print(f"  growth exponent: {doc['growth_exponent']}")
    if doc["sim_vs_real"]:
        r = doc["sim_vs_real"]
        print(
            f"sim vs real per crash point ({r['scenario']}): real {r['real_per_point_s']:.3f}s, "
            f"simulated {r['sim_per_point_s'] * 1000:.2f}ms, ratio x{r['ratio']}"
        )
    print(f"peak RSS: {doc['peak_rss_mb']} MB")
    return 0


def _mutants(args: argparse.Namespace) -> int:
    from sim.explore.mutants import CATALOGUE, kill

    known = {m.name: m for m in CATALOGUE}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise UsageError(f"unknown mutant {unknown[0]!r} (known: {', '.join(known)})")
    chosen = [known[n] for n in args.names] if args.names else list(CATALOGUE)
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


def _kill_matrix(results: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="durable-sim mutants: kill matrix")
    console = _console()
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


def _replay(args: argparse.Namespace) -> int:
    from sim.explore.sweep import base_schedule, judge, timeline
    from sim.run.runner import run_scenario

    schedule = parse_schedule(args.schedule)
    scenario = load_scenario(args.scenario)
    # Judged as the sweep judges: against the fault-free run (without the scenario's timed
    # crashes, with its base crash), so a repro line gives the verdict the sweep gave.
    reference = run_scenario(
        scenario.without_faults(),
        seed=args.seed,
        store=args.store,
        schedule=base_schedule(scenario, seed=args.seed, store=args.store),
        count_tears=True,
    )
    first = schedule.points[0] if schedule.points else None
    if first is not None and first.tear:
        n_tears = reference.tear_counts.get((first.index, first.when), 0)
        if first.tear > n_tears:
            raise UsageError(
                f"{first.text()}: a power loss at that point has {n_tears} enumerated tears"
                + (f" (~1..~{n_tears})" if n_tears else "")
            )
    if schedule.points and schedule.points[0].index >= len(reference.boundaries):
        n = len(reference.boundaries)
        raise UsageError(
            f"schedule starts at boundary {schedule.points[0].index}, but the fault-free run of "
            f"{scenario.name} has {n} boundaries (0..{n - 1})"
        )
    if args.store == "sqlite" and any(p.kind != "process" for p in schedule.points):
        raise UsageError(
            "power loss and storage faults are not simulated for the sqlite store "
            "(process crashes only)"
        )
    result = run_scenario(scenario, seed=args.seed, store=args.store, schedule=schedule)
    outcome = judge(result, reference)
    doc = {
        "scenario": scenario.name,
        "seed": args.seed,
        "store": args.store,
        "schedule": schedule.text(),
        "verdict": outcome.verdict,
        "fingerprint": result.fingerprint,
        "crashes": [f"{c.point.text()} at {c.label}" for c in result.crashes],
        "violations": [v.to_json() for v in outcome.violations],
        "outcome": result.outcome,
    }
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(f"verdict     {outcome.verdict}")
        print(f"fingerprint {result.fingerprint}")
        for crash in doc["crashes"]:
            print(f"crash       {crash}")
        for v in outcome.violations:
            print(f"{v.invariant:4} {v.explanation}")
            for row in v.witness:
                print(f"       {row}")
            if v.expected or v.actual:
                print(f"       expected: {v.expected}  actual: {v.actual}")
        if args.timeline:
            print("\n".join(timeline(result, limit=10_000)))
    return EXIT[outcome.verdict]


# -- coverage: which recovery branches of durable/ the sweep reaches (sim/explore/reach.py) --------


def _coverage_parser(sub: Any) -> None:
    cv = sub.add_parser(
        "coverage",
        help="measure which lines and recovery branches of durable/ the sweep and fuzzer reach",
        description=(
            "Run the default sweep (every bundled scenario, both stores, process and power "
            "crashes) and the fuzzer under coverage.py, print line and branch coverage of each "
            "file of durable/, and list the recovery branches (sim/explore/reach.py: "
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
        default=[],
        metavar="NAME",
        help="sweep only this bundled scenario (repeatable; default: all)",
    )
    cv.add_argument("--store", choices=("file", "sqlite", "both"), default="both")
    cv.add_argument(
        "--crash",
        default="process,power",
        help="crash kinds of the sweep, as for sweep --crash (default process,power: the default "
        "sweep; add storage to see which allowed branches storage faults reach)",
    )
    cv.add_argument("--no-fuzz", action="store_true", help="skip the fuzzer (the sweep only)")
    cv.add_argument(
        "--examples", type=int, default=300, help="fuzzer examples per scenario (default 300)"
    )
    cv.add_argument("--seed", type=_seed, default=0, help="world and Hypothesis seed (default 0)")
    cv.add_argument("--json", metavar="PATH", help="also write the full report as JSON to PATH")
    cv.add_argument(
        "--write-corpus",
        metavar="PATH",
        help=(
            "write the reach corpus (a small set of schedules that reaches every recovery branch "
            "the measurement reached; CI replays it) to PATH, e.g. tests/reach_corpus.json"
        ),
    )
    cv.add_argument(
        "--from-corpus",
        metavar="PATH",
        help="instead of sweeping, replay the cases of a reach corpus (what CI does)",
    )
    cv.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _coverage(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from sim.explore import reach

    try:
        reach.require_coverage()
    except reach.ReachUnavailable as exc:
        raise UsageError(str(exc)) from exc
    if not 1 <= args.examples <= 100_000:
        raise UsageError("--examples must be between 1 and 100000")
    if args.from_corpus and args.write_corpus:
        raise UsageError("--write-corpus needs a measurement, not a corpus replay (--from-corpus)")
    for name in args.scenario:
        load_scenario(name)  # unknown names fail here, as a usage error
    if args.from_corpus:
        try:
            reach.load_corpus(args.from_corpus)
        except reach.ReachError as exc:
            raise UsageError(str(exc)) from exc
    options = reach.Options(
        scenarios=tuple(args.scenario),
        stores=("file", "sqlite") if args.store == "both" else (args.store,),
        crash_kinds=tuple(_crash_kinds(args.crash)),
        fuzz_examples=0 if args.no_fuzz else args.examples,
        seed=args.seed,
        corpus=args.from_corpus,
        quiet=args.quiet,
    )
    try:
        raw = reach.run_measurement(options)
        report = reach.analyze(raw)
    except reach.ReachError as exc:
        print(f"durable-sim: {exc}", file=sys.stderr)
        return EXIT["error"]
    if args.write_corpus:
        corpus = reach.build_corpus(raw, report, seed=args.seed)
        Path(args.write_corpus).write_text(json.dumps(corpus, indent=1) + "\n", encoding="utf-8")
        # What CI will see: replay the corpus just written (a forked child can take a path its
        # plain replay does not, so the credit the corpus was built on is checked here).
        check = reach.analyze(reach.run_measurement(replace(options, corpus=args.write_corpus)))
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
    console = _console()
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
        print(f"stale allowance (matches no branch; remove it from sim/explore/reach.py): {stale}")
    for branch in report["reached_allowed"]:
        where = "its allowance in sim/explore/reach.py is wrong"
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


if __name__ == "__main__":
    sys.exit(main())
