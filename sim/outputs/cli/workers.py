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
from typing import Any

from sim.outputs.cli.common import EXIT, UsageError
from sim.targets.workers.agent import STORE_NAMES
from sim.targets.workers.fleet import (
    FleetError,
    FleetOptions,
    keep_fleet_dir,
    make_fleet_dir,
    run_fleet,
)
from sim.targets.workers.judge import fleet_document, judge_fleet
from sim.targets.workers.mutants import MUTANTS

MAX_FLEETS = 100
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
    wp.add_argument("--store", choices=STORE_NAMES, default="file")
    wp.add_argument(
        "--conninfo",
        default=os.environ.get(CONNINFO_ENV, ""),
        help=f"the PostgreSQL server of --store postgres (default: ${CONNINFO_ENV}); each fleet "
        "gets a schema of its own",
    )
    wp.add_argument("--workers", type=int, default=3, help="concurrent workers (default 3)")
    wp.add_argument("--conversations", type=int, default=6, help="conversations (default 6)")
    wp.add_argument("--kills", type=int, default=4, help="planned self-kills per fleet (4)")
    wp.add_argument("--pauses", type=int, default=2, help="SIGSTOP pauses per fleet (2)")
    wp.add_argument(
        "--fenced-pauses",
        type=int,
        default=1,
        help="workers that stop themselves between an append's fence check and its write, "
        "continued after another worker took the lease over (default 1)",
    )
    wp.add_argument("--seed", type=int, default=0, help="the first fleet's seed (default 0)")
    wp.add_argument("--fleets", type=int, default=1, help="fleets, seeds SEED.. (default 1)")
    wp.add_argument(
        "--mutant",
        choices=sorted(MUTANTS),
        default=None,
        help="run a deliberately broken store (the fleet must fail)",
    )
    wp.add_argument(
        "--deadline", type=float, default=90.0, help="seconds a fleet may take (default 90)"
    )
    wp.add_argument(
        "--first-failure",
        action="store_true",
        help="stop after the first failing fleet (hunting a race: --fleets is then a bound)",
    )
    wp.add_argument("--keep", action="store_true", help="keep every fleet's directory")
    wp.add_argument("--json", action="store_true", help="print the fleets' documents as JSON")
    wp.set_defaults(handler=_run_workers)


def _run_workers(args: argparse.Namespace) -> int:
    if not 1 <= args.fleets <= MAX_FLEETS:
        raise UsageError(f"--fleets must be 1..{MAX_FLEETS}, not {args.fleets}")
    docs: list[dict[str, Any]] = []
    for seed in range(args.seed, args.seed + args.fleets):
        options = FleetOptions(
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
        try:
            options.validate()
        except FleetError as exc:
            raise UsageError(str(exc)) from exc
        docs.append(_one_fleet(options, keep=args.keep, live=not args.json))
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
    fleet_dir = make_fleet_dir(options.seed)
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
