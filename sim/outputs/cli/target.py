"""``durable-sim target``: crash-test a runtime people use (``sim.targets``) with real kills.

    durable-sim target list
    durable-sim target sweep langgraph --durability sync [--variant idempotent] [--out DIR]
    durable-sim target replay langgraph --durability sync --schedule 7:after
    durable-sim target sweep pydantic-ai [--durability capability] [--variant idempotent]
    durable-sim target bundle langgraph --schedule 6:after --out repro-langgraph

A target's library is an optional extra: a target that is not installed is refused in one line
that says how to install it, before any child process starts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from sim.explore.recording import ScenarioSweep
from sim.outputs import options
from sim.outputs.cli.common import EXIT, check_out_dir, exit_for, text_arg
from sim.outputs.report import write_report, write_sarif
from sim.outputs.report.markdown import app_notes
from sim.outputs.report.sarif import SARIF_HELP
from sim.targets.host import run_point
from sim.targets.judge import judge_point, timeline
from sim.targets.kit.spec import AppArgs
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.recovery_only import CHECK_ONE_IN, RecoveryCheck
from sim.targets.registry import get_target, target_names

FAILURES_SHOWN = 5
NAME_WIDTH = 16  # target list: the longest target name and a space
MAX_TIMEOUT_S = 3600.0  # one child's run
MAX_BUNDLE_RUNS = 20  # target bundle --runs


def add_parsers(sub: Any) -> None:
    """``target``: its ``list``, ``sweep`` and ``replay`` sub-commands."""
    tp = sub.add_parser(
        "target",
        help="crash-test a real runtime (LangGraph, ...) with real process kills",
        description=(
            "Run a real agent runtime (an optional extra) in child processes, SIGKILL the run at "
            "every boundary of its fault-free trace (its node functions, its tools' effects, its "
            "checkpointer's writes), resume it in a fresh process, and judge the ledger and the "
            "runtime's own durable state against the fault-free run and each tool's policy."
        ),
    )
    tsub = tp.add_subparsers(dest="target_command", required=True, metavar="SUBCOMMAND")
    ls = tsub.add_parser("list", help="the targets, and whether each is installed")
    ls.set_defaults(handler=_run_list)

    _add_sweep(tsub)

    rp = tsub.add_parser("replay", help="run one schedule of a target and show its verdict")
    _common(rp)
    rp.add_argument(
        "--schedule", required=True, type=text_arg, metavar="INDEX:WHEN", help="e.g. 7:after"
    )
    rp.add_argument(
        "--keep", type=text_arg, default=None, metavar="DIR", help="run in DIR and leave its files"
    )
    rp.add_argument("--json", action="store_true", help="print the verdict as JSON")
    rp.set_defaults(handler=_run_replay)

    _add_bundle(tsub)

    rc = tsub.add_parser(
        "record",
        help="run your app once with its own model and save the model's turns as a script",
        description=(
            "Run a langgraph or pydantic-ai --app once, fault-free, with the model its factory "
            "builds when given none (a network is needed for a provider's model), and write the "
            "model's responses -- text and tool calls -- as a --model-script file, so every later "
            "sweep is offline and deterministic. The app's service clients are not stubbed here."
        ),
    )
    rc.add_argument("target", type=text_arg, help="langgraph or pydantic-ai")
    rc.add_argument("--app", type=text_arg, required=True, metavar="FILE.py:FACTORY")
    rc.add_argument("--input", type=text_arg, required=True, metavar="FILE.json")
    rc.add_argument(
        "--out", type=text_arg, required=True, metavar="FILE.json", help="the script to write"
    )
    rc.set_defaults(handler=_run_record)


def _add_sweep(tsub: Any) -> None:
    """``target sweep`` and its own options (the ones every sub-command takes: ``_common``)."""

    snapshotted = ", ".join(n for n in target_names() if get_target(n).snapshot_refusal is None)
    sw = tsub.add_parser("sweep", help="kill every boundary before and after; write a report")
    _common(sw)
    sw.add_argument(
        "--out",
        type=text_arg,
        default=None,
        help=(
            "report directory (default reports/target-NAME-SAVER[-DURABILITY], and for an app "
            "reports/target-NAME-APP-FUNCTION: one per app)"
        ),
    )
    sw.add_argument(
        "--points",
        type=text_arg,
        default=None,
        metavar="LIST",
        help="only these schedules, comma-separated (7:after,6:before); default: all",
    )
    sw.add_argument("--json", action="store_true", help="print the results document on stdout")
    sw.add_argument("--sarif", type=text_arg, default=None, metavar="FILE", help=SARIF_HELP)
    sw.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    sw.add_argument(
        "--fresh",
        action="store_true",
        help=(
            "a fresh interpreter for every child, instead of forking each from a warm zygote "
            "that imported the framework once (the report says which ran)"
        ),
    )
    sw.add_argument(
        "--recovery-only",
        nargs="?",
        const=RecoveryCheck.SAMPLE.value,
        default=None,
        choices=[c.value for c in RecoveryCheck],
        metavar="CHECK",
        help=(
            "start each point from a snapshot of the fault-free run's files at its instant and "
            f"run only the recovery, where a target's state is all its files ({snapshotted}); "
            f"a seeded 1 in {CHECK_ONE_IN} points also runs the real way (every point with "
            "=full), and a "
            "difference sweeps again the real way (the report says which ran)"
        ),
    )
    sw.set_defaults(handler=_run_sweep)


def _add_bundle(tsub: Any) -> None:
    """``bundle``: one point as a folder that reproduces it without durable-sim."""
    bd = tsub.add_parser(
        "bundle",
        help="write one point as a standalone repro (repro.py, requirements.txt, ISSUE.md)",
        description=(
            "Run one schedule of a target (as replay does), then write a folder that reproduces "
            "it without durable-sim: repro.py (the agent or workflow on the framework's public "
            "API, killed at the same instant, resumed in a fresh process, its effects counted "
            "in a ledger outside the process; exit 1 when reproduced), requirements.txt (the "
            "framework's versions installed here) and ISSUE.md (the finding, written as an "
            "upstream bug report, with how many of --runs runs here reproduced it)."
        ),
    )
    _common(bd)
    bd.add_argument(
        "--schedule", required=True, type=text_arg, metavar="INDEX:WHEN", help="e.g. 6:after"
    )
    bd.add_argument(
        "--out", required=True, type=text_arg, metavar="DIR", help="the folder to write"
    )
    bd.add_argument(
        "--runs",
        type=options.arg_type(options.integer, 0, MAX_BUNDLE_RUNS),
        default=3,
        help=f"how many times to run repro.py here after writing it, 0..{MAX_BUNDLE_RUNS} "
        "(default 3); ISSUE.md records how many reproduced",
    )
    bd.set_defaults(handler=_run_bundle)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        type=text_arg,
        metavar="TARGET",
        help="a target name (see: durable-sim target list)",
    )
    p.add_argument(
        "--durability",
        default="",
        help=(
            "the runtime's durability mode; each target's are in `durable-sim target list`, its "
            "first the default (langgraph: sync, async, exit; pydantic-ai: agent, capability, "
            "prefect)"
        ),
    )
    p.add_argument(
        "--variant",
        default="",
        help=(
            "as_is (the tools as first written) or idempotent (each effect keyed by ids the "
            "runtime keeps across a recovery); a target's others are in `durable-sim target list`"
        ),
    )
    p.add_argument(
        "--saver",
        default="",
        help="the checkpointer (langgraph: sqlite, default, or aiosqlite; see target list)",
    )
    p.add_argument(
        "--resume",
        default="",
        help=(
            "the restart's rule (langgraph: tasks, resume while any task is left, default; or "
            "next, only while the runtime's state names a node to run next; pydantic-ai on "
            "prefect: retry the flow run, default, or rerun it as a new one; see target list)"
        ),
    )
    _app_options(p)
    p.add_argument(
        "--preempt",
        type=options.arg_type(options.number, 0.0, MAX_TIMEOUT_S),
        default=0.0,
        metavar="GRACE_S",
        help=(
            "preemption instead of a kill: SIGTERM at the boundary, then SIGKILL GRACE_S seconds "
            "later unless the process ended (as an autoscaler or an RL gym stops a server)"
        ),
    )
    p.add_argument(
        "--timeout",
        type=options.arg_type(options.number, 0.0, MAX_TIMEOUT_S),
        default=60.0,
        help=f"seconds one child may run, > 0 and <= {MAX_TIMEOUT_S:g} (default 60)",
    )


def _app_options(p: argparse.ArgumentParser) -> None:
    """A user's own app: the python target's program, or a graph, workflow or agent of the
    user's for a framework target (``sim.targets.kit.spec``)."""
    group = p.add_argument_group(
        "your own app (sim.targets.kit; README, 'Crash-test your own app')"
    )
    group.add_argument(
        "--app",
        type=text_arg,
        default=None,
        metavar="FILE.py:FUNCTION",
        help=(
            "your own app, run unmodified in each child: the python target's program, "
            "langgraph's graph factory, dbos's workflow, pydantic-ai's Agent factory "
            "(or MODULE:FUNCTION)"
        ),
    )
    group.add_argument(
        "--effect",
        type=text_arg,
        action="append",
        default=[],
        metavar="WHAT[=POLICY][,key=PARAM]",
        help=(
            "repeatable: a callable of your app that acts on the outside world -- NAME (a "
            "function of the app's module), module:function, module:Class.method or "
            "module:OBJECT.method -- and what you promise for it across crashes (exactly_once, "
            "the default; at_most_once; at_least_once; or a recovery policy: idempotent, "
            "verify_then_continue, unsafe, manual, replay_safe); its idempotency key is the "
            "argument idempotency_key, or the parameter key= names"
        ),
    )
    group.add_argument(
        "--effect-http",
        type=text_arg,
        action="append",
        default=[],
        metavar="'METHOD URL[=POLICY][,header=NAME]'",
        help=(
            "repeatable: HTTP calls (httpx, requests, urllib3) that act on the outside world, "
            "e.g. 'POST https://payments.example.com/v1/refunds' (* matches any characters): "
            "answered in the process from --http-stub, never sent; keyed by the "
            "Idempotency-Key header, or the one header= names"
        ),
    )
    group.add_argument(
        "--http-stub",
        type=text_arg,
        default=None,
        metavar="FILE.json",
        help=(
            'the answers to --effect-http calls: {"routes": [{"method": "POST", "url": ..., '
            '"status": 200, "json": {...}}]}, "{json.FIELD}", "{header.NAME}" and "{key}" '
            "taken from the request (default: 200 {})"
        ),
    )
    _run_options(group)


def _run_options(group: Any) -> None:
    """What an app's run is given: its input, its model's script, its deps, a human's answers,
    its thread, its database."""
    group.add_argument(
        "--input",
        type=text_arg,
        default=None,
        metavar="FILE.json",
        help=(
            "a framework target's --app: the run's input (langgraph: the graph's input, or a "
            "JSON string, the user's message; pydantic-ai: the prompt; dbos: the workflow's "
            'arguments, a JSON list or {"args": [...], "kwargs": {...}})'
        ),
    )
    group.add_argument(
        "--model-script",
        type=text_arg,
        default=None,
        metavar="FILE.json",
        help=(
            "langgraph and pydantic-ai --app: the model's turns in order, a JSON list of "
            '{"content": ..., "tool_calls": [{"name": ..., "args": {...}}]}; a factory that '
            "takes an argument gets the scripted model"
        ),
    )
    group.add_argument(
        "--deps",
        type=text_arg,
        default=None,
        metavar="FILE.json",
        help="pydantic-ai --app: the run's deps as JSON, validated into the agent's deps_type",
    )
    group.add_argument(
        "--answers",
        type=text_arg,
        default=None,
        metavar="FILE.json",
        help=(
            "langgraph --app: the values a human gives interrupt(), in order (a JSON list); "
            "each open interrupt is resumed with Command(resume=VALUE)"
        ),
    )
    group.add_argument(
        "--thread",
        type=text_arg,
        default=None,
        metavar="ID",
        help="langgraph --app: the thread id the run is checkpointed under (default thread-1)",
    )
    group.add_argument(
        "--postgres",
        action="store_true",
        help=(
            "python --app: start a throw-away PostgreSQL cluster for the sweep and give the app "
            "DATABASE_URL, a fresh database per point (needs PostgreSQL's initdb and pg_ctl)"
        ),
    )


def app_args(args: argparse.Namespace) -> Any:
    """The app's words of a ``target`` command, for ``sim.targets.kit.options.app_spec``."""

    return AppArgs(
        app=args.app or "",
        effects=tuple(args.effect),
        http=tuple(args.effect_http),
        http_stub=args.http_stub or "",
        input=args.input or "",
        model_script=args.model_script or "",
        deps=args.deps or "",
        answers=args.answers or "",
        thread=args.thread or "",
        postgres=args.postgres,
    )


def _setup(args: argparse.Namespace) -> tuple[Any, Any]:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.targets.kit.options import app_spec, check_options

    target = get_target(args.target)
    if args.preempt >= args.timeout:
        raise TargetError(
            f"--preempt {args.preempt:g} must be shorter than --timeout {args.timeout:g}"
        )
    given = TargetOptions(
        durability=args.durability,
        variant=args.variant,
        saver=args.saver,
        resume=args.resume,
        app=app_spec(target, app_args(args)),
        preempt_s=args.preempt,
    )
    return target, check_options(target, given)


def _run_record(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.targets.recording import record_script

    turns = record_script(args.target, app=args.app, app_input=args.input, out=Path(args.out))
    calls = sum(len(t["tool_calls"]) for t in turns)
    print(f"recorded {len(turns)} model turns ({calls} tool calls) to {args.out}")
    return 0


def _run_list(args: argparse.Namespace) -> int:
    del args

    for name in target_names():
        target = get_target(name)
        missing = target.missing()
        status = "installed" if missing is None else f"not installed: {missing}"
        if missing is None and target.environment is not None:
            status = target.environment.describe()
        print(f"{name:<{NAME_WIDTH}} {target.description}")
        print(
            f"{'':<{NAME_WIDTH}} --durability {'|'.join(target.durabilities)}  --saver "
            f"{'|'.join(target.savers)}  --variant {'|'.join(target.variants)}  --resume "
            f"{'|'.join(target.resumes)}"
        )
        print(f"{'':<{NAME_WIDTH}} {status}")
    return 0


def _parse_points(text: str | None) -> list[tuple[int, str]] | None:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.targets.sweep import parse_point

    if text is None:
        return None
    return [parse_point(part) for part in text.split(",") if part.strip()]


def _run_sweep(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.targets.sweep import report_dir, sweep_target, target_document, target_versions

    points = _parse_points(args.points)  # refused before any environment is made
    target, options = _setup(args)
    out_dir = Path(args.out or report_dir(target, options))
    check_out_dir(out_dir)
    if args.sarif:  # refused now, not after the sweep
        check_out_dir(Path(args.sarif).parent)

    def progress(n: int, total: int, crash: Any, verdict: str) -> None:
        if not args.quiet:
            print(f"[{n}/{total}] {crash.text()} {crash.label}: {verdict}", file=sys.stderr)

    started = time.perf_counter()
    result = sweep_target(
        target,
        options,
        points=points,
        timeout_s=args.timeout,
        progress=progress,
        fork=not args.fresh,
        recovery=None if args.recovery_only is None else RecoveryCheck(args.recovery_only),
    )
    versions = target_versions(target)
    document = target_document([result], wall_s=time.perf_counter() - started, versions=versions)
    written = write_report(out_dir, document)
    if args.sarif:
        write_sarif(Path(args.sarif), [result])
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        _summary(result, versions)
        print(f"report: {out_dir / 'index.html'} ({len(written)} files in {out_dir})")
    return exit_for(document["totals"]["verdicts"])


def _summary(result: ScenarioSweep, versions: dict[str, str]) -> None:
    shown = ", ".join(f"{name} {version}" for name, version in versions.items())
    print(f"{result.name}[{result.store}]" + (f"  ({shown})" if shown else ""))
    print(
        f"boundaries {result.reference.boundaries}  schedules {result.schedules}  "
        f"{result.verdict_counts()}  wall {result.wall_s:.1f} s"
    )
    for note in app_notes({"reference_outcome": result.reference.outcome}):
        print(note)
    figures = result.reference.outcome.get("figures", {})
    if figures:  # measured in the fault-free run, never judged
        print("measured: " + "  ".join(f"{name} {value}" for name, value in figures.items()))
    for failure in result.failures[:FAILURES_SHOWN]:
        also = [i for i in failure.invariants if i != failure.invariant]
        print(
            f"{failure.verdict} {failure.invariant}{' +' + '+'.join(also) if also else ''} "
            f"{failure.schedule} ({', '.join(failure.crash_labels)}): {failure.explanation}"
        )
        print(f"  repro: {failure.repro}")
    if len(result.failures) > FAILURES_SHOWN:
        print(f"  ... and {len(result.failures) - FAILURES_SHOWN} more (all in the report)")


def _run_bundle(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.targets.bundling import ISSUE, PROGRAM, write_bundle
    from sim.targets.sweep import parse_point

    point = parse_point(args.schedule)  # refused before any environment is made
    target, options = _setup(args)
    out = Path(args.out)
    check_out_dir(out)
    report = write_bundle(
        target,
        options,
        point,
        out,
        runs=args.runs,
        timeout_s=args.timeout,
        progress=lambda text: print(text, file=sys.stderr),
    )
    print(f"verdict     {report.verdict.verdict} at {report.crash.text()} ({report.crash.label})")
    print(f"bundle      {out / PROGRAM} and {out / ISSUE} (written in {report.written_s:.1f} s)")
    print(f"reproduced  {report.reproduced} of {len(report.runs)} runs")
    return 0


def _run_replay(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.targets.sweep import crash_at, parse_point, reference_run, replay_line, warm

    index, when = parse_point(args.schedule)  # refused before any environment is made
    target, options = _setup(args)
    keep = Path(args.keep) if args.keep else None
    # One service (if any) for both runs; their three children forked from one warm zygote.
    with target.service(options), warm(target, options) as (zygote, _):
        reference = reference_run(target, options, timeout_s=args.timeout, zygote=zygote)
        crash = crash_at(reference, index, when)
        run = run_point(target, options, crash, timeout_s=args.timeout, keep=keep, zygote=zygote)
    verdict = judge_point(run, reference, target.tools(options))
    if args.json:
        doc = {
            "target": target.name,
            "options": options.to_json(),
            "schedule": crash.text(),
            "label": crash.label,
            "verdict": verdict.verdict,
            "violations": [v.to_json() for v in verdict.violations],
            "timeline": timeline(run),
            "repro": replay_line(target, options, crash),
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(f"verdict     {verdict.verdict}")
        print(f"crash       {crash.text()} at {crash.label}")
        for v in verdict.violations:
            print(f"{v.invariant}: {v.explanation}")
            for row in v.witness:
                print(f"    {row}")
        print("timeline:")
        for line in timeline(run):
            print(f"    {line}")
        if keep is not None:
            print(f"files kept in {keep}")
    return EXIT[verdict.verdict] if verdict.verdict != "pass" else 0
