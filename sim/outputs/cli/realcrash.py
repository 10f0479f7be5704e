"""``durable-sim realcrash``: the simulator's crash points, with real processes killed."""

from __future__ import annotations

from typing import Any


def add_parsers(sub: Any) -> None:
    """``realcrash``: its options and its code live in ``sim.outputs.realcrash``."""
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

    rc.set_defaults(handler=_run_realcrash)


def _run_realcrash(args: Any) -> int:
    from sim.outputs.realcrash import main_realcrash

    return main_realcrash(args)
