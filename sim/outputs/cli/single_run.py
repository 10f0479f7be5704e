"""``list``, ``run`` and ``replay``: one scenario, one run, printed or judged."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sim.errors import UsageError
from sim.explore import interrupts
from sim.explore.sweep import base_schedule
from sim.judgement.judge import judge, timeline
from sim.outputs import options
from sim.outputs.cli.common import (
    EXIT,
    add_seam_options,
    add_single_run_options,
    check_stores,
    text_arg,
)
from sim.run.runner import run_scenario
from sim.world.scenario import bundled_names, load_scenario


def add_parsers(sub: Any) -> None:
    """``list``, ``run`` and ``replay``: one scenario, one run."""
    ls = sub.add_parser("list", help="list the bundled scenarios with one-line descriptions")
    ls.set_defaults(handler=lambda args: list_scenarios())

    run = sub.add_parser(
        "run",
        help="run one scenario fault-free and print its fingerprint, boundaries and outcome",
        description="Run SCENARIO once without faults. SCENARIO is a bundled name or a .json path.",
    )
    run.add_argument("scenario", type=text_arg)
    add_single_run_options(run, command="run")
    run.add_argument("--timeline", action="store_true", help="print every boundary of the run")
    add_seam_options(run)
    run.set_defaults(handler=run_once)

    rp = sub.add_parser(
        "replay",
        help="re-run one crash schedule (as printed by a failure) and judge it",
        description="Replay a schedule such as 14:after:power,20:before:process.",
    )
    rp.add_argument(
        "--scenario", required=True, type=text_arg, help="a bundled name or a .json path"
    )
    rp.add_argument(
        "--schedule",
        required=True,
        type=options.arg_type(options.schedule),
        help="INDEX:before|after:process|power|storage[~TEAR],... in boundary order, or none",
    )
    add_single_run_options(rp, command="replay")
    rp.add_argument("--timeline", action="store_true", help="print the run with crashes marked")
    add_seam_options(rp)
    rp.set_defaults(handler=replay)


def run_once(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    check_stores([args.store])
    base = base_schedule(scenario, seed=args.seed, store=args.store)
    result = run_scenario(scenario, seed=args.seed, store=args.store, schedule=base)
    interrupts.stop_if_requested()  # a run an interrupt reached says nothing (``replay``)
    doc = {
        "scenario": scenario.name,
        "seed": args.seed,
        "store": args.store,
        "fingerprint": result.trace.fingerprint,
        "schedule": base.text(),
        "boundaries": len(result.trace.boundaries),
        "outcome": result.outcome,
        "settled": result.trace.settled,
        "model_calls": len(result.outside.model_calls),
        "virtual_time_s": round(result.trace.virtual_time_s, 3),
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
    if not result.trace.settled or result.errors.runtime_error is not None:
        why = result.errors.runtime_error or (
            f"it did not settle within its liveness bound ({scenario.liveness_bound_s:g} s of "
            "virtual time)"
        )
        print(f"durable-sim: the fault-free run of {scenario.name} fails: {why}", file=sys.stderr)
        return EXIT["usage"]  # a scenario that cannot run fault-free cannot be crash-tested
    return 0


def replay(args: argparse.Namespace) -> int:
    schedule, store = args.schedule, args.store
    scenario = load_scenario(args.scenario)
    refused = sorted({p.kind for p in schedule.points if not store.can_inject(p.kind)})
    if refused:
        why = {
            "sqlite": "SQLite keeps no checksum of its pages",
            "postgres": "the server is the durable service: only worker processes are killed",
        }.get(store.value, "")
        raise UsageError(
            f"{'/'.join(refused)} faults are not simulated for the {store} store ({why}: see "
            "docs/crash-model.md)"
        )
    check_stores([store])
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
        n_tears = reference.trace.tear_counts.get((first.index, first.when), 0)
        if first.tear > n_tears:
            raise UsageError(
                f"{first.text()}: a power loss at that point has {n_tears} enumerated tears"
                + (f" (~1..~{n_tears})" if n_tears else "")
            )
    if schedule.points and schedule.points[0].index >= len(reference.trace.boundaries):
        n = len(reference.trace.boundaries)
        raise UsageError(
            f"schedule starts at boundary {schedule.points[0].index}, but the fault-free run of "
            f"{scenario.name} has {n} boundaries (0..{n - 1})"
        )
    result = run_scenario(scenario, seed=args.seed, store=args.store, schedule=schedule)
    outcome = judge(result, reference)
    # An interrupt one of these runs could not raise (``interrupts.record_dropped``) changed
    # it: no verdict is printed for it, the command stops with 130.
    interrupts.stop_if_requested()
    doc = {
        "scenario": scenario.name,
        "seed": args.seed,
        "store": args.store,
        "schedule": schedule.text(),
        "verdict": outcome.verdict,
        "fingerprint": result.trace.fingerprint,
        "crashes": [f"{c.point.text()} at {c.label}" for c in result.trace.crashes],
        # Damage no process read again, found by the judge's own read (sim.run.runner).
        "latent_damage": dict(sorted(result.durable.latent_damage.items())),
        "violations": [v.to_json() for v in outcome.violations],
        "outcome": result.outcome,
    }
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(f"verdict     {outcome.verdict}")
        print(f"fingerprint {result.trace.fingerprint}")
        for crash in doc["crashes"]:
            print(f"crash       {crash}")
        for child, error in doc["latent_damage"].items():
            print(f"latent      {child} (nobody opened it again; the judge's read: {error})")
        for v in outcome.violations:
            print(f"{v.invariant:4} {v.explanation}")
            for row in v.witness:
                print(f"       {row}")
            if v.expected or v.actual:
                print(f"       expected: {v.expected}  actual: {v.actual}")
        if args.timeline:
            print("\n".join(timeline(result, limit=10_000)))
    return EXIT[outcome.verdict]


def list_scenarios() -> int:
    for name in bundled_names():
        scenario = load_scenario(name)
        print(f"{name:32} {scenario.description}")
    return 0
