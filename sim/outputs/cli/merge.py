"""``durable-sim merge``: join the directories of a campaign's shards into one (docs/campaigns.md):
every verified unit file copied into ``--out``, bad files reported by name and left out, two
differing results of one unit reported as nondeterminism (exit 4); once every unit of the plan
has a result, the report ``durable-sim sweep`` would write."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sim.outputs.cli.campaign import add_output_options, finish
from sim.outputs.cli.campaign import add_parsers as add_campaign
from sim.outputs.cli.common import EXIT, check_out_dir


def add_parsers(sub: Any) -> None:
    """``campaign`` and ``merge``, the two commands of a campaign, in that order (one entry in
    ``main.COMMANDS``)."""
    add_campaign(sub)
    mg = sub.add_parser(
        "merge",
        help="join campaign shard directories into one report",
        description=(
            "Join the directories of one campaign's shards (`durable-sim campaign --shard K/N`) "
            "into --out and, once every unit has a result, write the report."
        ),
    )
    mg.add_argument("dirs", nargs="+", metavar="DIR", help="campaign directories of one plan")
    mg.add_argument("--out", required=True, help="the merged campaign directory")
    add_output_options(mg)
    mg.set_defaults(handler=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.explore.campaign.run import merge_directories

    out_dir = Path(args.out)
    check_out_dir(out_dir)
    if args.sarif:  # refused now, not after the merge
        check_out_dir(Path(args.sarif).parent)
    result = merge_directories(
        [Path(d) for d in args.dirs],
        out_dir,
        notice=lambda text: print(f"merge: {text}", file=sys.stderr),
    )
    if result.merged is None:
        status = finish(args, result, out_dir)
        missing = len(result.missing)
        print(
            f"durable-sim: {missing} of {len(result.plan.units)} units have no result in "
            f"{', '.join(args.dirs)}: no report (run the missing shards, or the campaign into "
            f"{out_dir} to run them)",
            file=sys.stderr,
        )
        return status if status != EXIT["pass"] else EXIT["usage"]
    return finish(args, result, out_dir)
