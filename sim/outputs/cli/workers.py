"""``durable-sim workers``: N real worker processes of the reference runtime on one store,
killed, paused past their leases and restarted (``sim.targets.workers``).

    durable-sim workers --store file --workers 3 --conversations 6 --kills 4 --pauses 2
    durable-sim workers --store sqlite --fleets 5 --seed 10
    durable-sim workers --mutant renew-ignores-epoch --fleets 8     # must fail
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from sim.explore import interrupts
from sim.explore.mutants import FLEET_MUTANTS
from sim.outputs import options
from sim.outputs.cli.common import EXIT, SEED_HELP, seed_arg
from sim.targets.workers.fleet import (
    MAX_CONVERSATIONS,
    MAX_INCARNATIONS,
    MAX_WORKERS,
    FleetOptions,
    keep_fleet_dir,
    make_fleet_dir,
    run_fleet,
)
from sim.targets.workers.judge import fleet_document, judge_fleet

MAX_FLEETS = 100
MAX_DEADLINE_S = 3600.0
#: The stores ``workers`` takes: every kind (Postgres by name, with ``--conninfo``).
STORES = options.SWEEP_STORES
#: Where ``--conninfo`` comes from when it is not given (the tests' variable too).
CONNINFO_ENV = "DURABLE_SIM_PG_CONNINFO"


def add_parsers(sub: Any) -> None:
    """``workers``: one or more fleets of real workers, each judged."""
    wp = sub.add_parser(
        "workers",
        help="run N real workers on one store, kill and pause them, check effects and fencing",
        description=(
            "Start N real worker processes of the reference runtime on one store (real files, "
            "real clock), each serving the same conversations: they race for the leases, some "
            "are SIGKILLed at a seeded store or tool boundary and restarted, some are stopped "
            "(SIGSTOP) past their lease and woken as zombies, one stops itself between an "
            "append's fence check and its write until another worker has taken its lease over. "
            "The store's logs, the services' ledger and the workers' traces are then judged: "
            "every input answered (I5), each "
            "tool's effects as its policy promises (I1), fencing (I8: no append from a fenced "
            "owner accepted, no epoch granted twice, no renewal after a newer grant), liveness "
            "(I7). The seed fixes the plan (who crashes where, who is paused when); the "
            "operating system decides the races, so run several fleets (--fleets)."
        ),
    )
    wp.add_argument(
        "--store",
        type=options.arg_type(options.store, command="workers", supported=STORES),
        default=options.DEFAULT_STORE,
        help=f"{options.store_help(STORES, options.DEFAULT_STORE)} (one store per fleet)",
    )
    wp.add_argument(
        "--conninfo",
        default=os.environ.get(CONNINFO_ENV, ""),
        help=f"the PostgreSQL server of --store postgres (default: ${CONNINFO_ENV}); each fleet "
        "gets a schema of its own",
    )
    _add_plan_options(wp)
    wp.add_argument("--seed", type=seed_arg, default=options.DEFAULT_SEED, help=SEED_HELP)
    wp.add_argument(
        "--fleets",
        type=_count(1, MAX_FLEETS),
        default=1,
        help=f"fleets, seeds SEED.., 1..{MAX_FLEETS} (default 1)",
    )
    wp.add_argument(
        "--mutant",
        choices=sorted(m.name for m in FLEET_MUTANTS),
        default=None,
        help="run a deliberately broken store (the fleet must fail)",
    )
    wp.add_argument(
        "--deadline",
        type=options.arg_type(options.number, 0.0, MAX_DEADLINE_S),
        default=90.0,
        help=f"seconds a fleet may take, > 0 and <= {MAX_DEADLINE_S:g} (default 90)",
    )
    wp.add_argument(
        "--first-failure",
        action="store_true",
        help="stop after the first failing fleet (hunting a race: --fleets is then a bound)",
    )
    wp.add_argument("--keep", action="store_true", help="keep every fleet's directory")
    wp.add_argument("--json", action="store_true", help="print the fleets' documents as JSON")
    wp.set_defaults(handler=_run_workers)


def _add_plan_options(wp: argparse.ArgumentParser) -> None:
    """How big a fleet is and what its plan does to it: workers, conversations, kills, pauses."""
    wp.add_argument(
        "--workers",
        type=_count(1, MAX_WORKERS),
        default=3,
        help=f"concurrent workers, 1..{MAX_WORKERS} (default 3)",
    )
    wp.add_argument(
        "--conversations",
        type=_count(1, MAX_CONVERSATIONS),
        default=6,
        help=f"conversations, 1..{MAX_CONVERSATIONS} (default 6)",
    )
    wp.add_argument(
        "--kills",
        type=_count(0, MAX_INCARNATIONS),
        default=4,
        help=f"planned self-kills per fleet, 0..{MAX_INCARNATIONS} less --workers (default 4)",
    )
    wp.add_argument(
        "--pauses",
        type=_count(0, MAX_INCARNATIONS),
        default=2,
        help=f"SIGSTOP pauses per fleet, 0..{MAX_INCARNATIONS} (default 2)",
    )
    wp.add_argument(
        "--fenced-pauses",
        type=_count(0, MAX_WORKERS),
        default=1,
        help="workers that stop themselves between an append's fence check and its write, "
        "continued after another worker took the lease over, 0..--workers (default 1)",
    )


def _count(low: int, high: int) -> Any:
    """An argparse type: an integer in ``low..high`` (``sim.outputs.options.integer``)."""
    return options.arg_type(options.integer, low, high)


def _run_workers(args: argparse.Namespace) -> int:
    docs: list[dict[str, Any]] = []
    for seed in range(args.seed, args.seed + args.fleets):
        fleet = FleetOptions(
            store=args.store,
            workers=args.workers,
            conversations=args.conversations,
            kills=args.kills,
            pauses=args.pauses,
            fenced_pauses=args.fenced_pauses,
            seed=seed,
            deadline_s=args.deadline,
            mutant=args.mutant,
            conninfo=args.conninfo,
        )
        fleet.validate()
        docs.append(_one_fleet(fleet, keep=args.keep, live=not args.json))
        if args.first_failure and docs[-1]["verdict"] != "pass":
            break
    if args.json:
        print(json.dumps(docs, indent=2, sort_keys=True))
    failed = [d for d in docs if d["verdict"] != "pass"]
    print(
        f"{len(docs) - len(failed)}/{len(docs)} fleet(s) passed"
        + (
            f"; failing seeds: {', '.join(str(d['options']['seed']) for d in failed)}"
            if failed
            else ""
        ),
        file=sys.stderr,
    )
    if not failed:
        return EXIT["pass"]
    invariants = {v["invariant"] for d in failed for v in d["violations"]}
    return EXIT["liveness"] if invariants == {"I7"} else EXIT["safety"]


def _one_fleet(options: FleetOptions, *, keep: bool, live: bool) -> dict[str, Any]:
    """Run, judge and report one fleet. Its directory is removed unless kept (``--keep``, or
    violations to look at) -- on an interrupt too: a Ctrl-C or SIGTERM leaves no temporary
    directory behind, its workers killed by ``run_fleet`` (an interrupted fleet has no verdict
    worth keeping its files for, unless ``--keep`` asked for every fleet's)."""
    fleet_dir = make_fleet_dir(options.seed)
    try:
        return _judged_fleet(options, fleet_dir, keep=keep, live=live)
    except BaseException as exc:
        if not interrupts.interrupt_only(exc):
            raise  # a harness error: its directory stays for a look (the cleaner takes it later)
        if keep:
            keep_fleet_dir(fleet_dir)
            print(f"[fleet seed {options.seed}] kept {fleet_dir} (interrupted)", file=sys.stderr)
        else:
            shutil.rmtree(fleet_dir, ignore_errors=True)
        raise


def _judged_fleet(
    options: FleetOptions, fleet_dir: Path, *, keep: bool, live: bool
) -> dict[str, Any]:
    prefix = f"[fleet seed {options.seed}]"

    def progress(line: str) -> None:
        print(f"{prefix} {line}", file=sys.stderr, flush=True)

    run = run_fleet(options, fleet_dir, progress=progress)
    violations = judge_fleet(run)
    doc = fleet_document(run, violations)
    taken = sum(1 for f in doc["fenced"] if f["taken_over_by"])
    summary = (
        f"{prefix} {doc['verdict']}: {len(doc['processes'])} processes, {doc['kills']} killed "
        f"at a boundary, {len(doc['pauses'])} paused past their lease, {len(doc['fenced'])} "
        f"stopped at an append's fence ({taken} taken over meanwhile), {doc['wall_s']:.1f} s"
        + (
            f" ({doc['missed_pauses']} planned pause(s) missed: the fleet ended first)"
            if doc["missed_pauses"]
            else ""
        )
    )
    # An interrupt the fleet's parent could not raise is no verdict (``interrupts``).
    interrupts.stop_if_requested()
    print(summary, file=sys.stderr if not live else sys.stdout, flush=True)
    for v in violations[:5]:
        out = sys.stderr if not live else sys.stdout
        print(f"  {v.invariant}: {v.explanation}", file=out)
        for w in v.witness[:3]:
            print(f"    {w}", file=out)
    if violations or keep:
        keep_fleet_dir(fleet_dir)
        print(f"{prefix} kept {fleet_dir} (store, ledger, traces)", file=sys.stderr)
    else:
        shutil.rmtree(fleet_dir, ignore_errors=True)
    return doc
