"""A target's child process: start or resume the target's run, killed at one boundary.

    python -m sim.targets.child POINT_DIR PROCESS_NUMBER

The point directory holds ``point.json`` (the target, its options, the crash point if this
process is to crash, and where the fault-free run copies its
files for ``--recovery-only``), the ledger and whatever
durable files the target writes. The child appends ``spawn``, the boundaries it crosses, what it
did (``action``) and ``ended`` to the trace; an exception is one ``error`` row and exit status
3. A kill is SIGKILL; a preemption SIGTERM, then SIGKILL after its grace
(``sim.targets.boundaries``).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from sim.targets.boundaries import TRACE_NAME, Boundaries, TraceLog
from sim.targets.ledger import LEDGER_NAME, Ledger
from sim.targets.offline import refuse_network
from sim.targets.protocol import ChildContext, TargetOptions
from sim.targets.registry import get_target
from sim.targets.snapshots import Snapshotter

POINT_NAME = "point.json"
EXIT_ENDED = 0
EXIT_ERROR = 3


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m sim.targets.child POINT_DIR PROCESS_NUMBER", file=sys.stderr)
        return 2
    point_dir, number = Path(args[0]).resolve(), int(args[1])  # a program may chdir
    config = json.loads((point_dir / POINT_NAME).read_text(encoding="utf-8"))
    process = f"p{number}"
    log = TraceLog(point_dir / TRACE_NAME)
    log.write({"t": "spawn", "p": process}, sync=True)
    refuse_network(log, process)
    crash = config.get("crash")
    # Only the first process crashes (depth 1): the ones after it resume in peace.
    kill_at = (str(crash["label"]), str(crash["when"])) if crash and number == 1 else None
    options = TargetOptions.from_json(config["options"])
    # A fault-free run copies its files at every instant (``sim.targets.recovery_only``).
    snapshots = config.get("snapshots") if number == 1 else None
    snapshotter = Snapshotter(point_dir, Path(snapshots)) if snapshots else None
    ctx = ChildContext(
        point_dir=point_dir,
        process=process,
        options=options,
        boundaries=Boundaries(
            log, process, kill_at, grace_s=options.preempt_s, instant=snapshotter
        ),
        ledger=Ledger(point_dir / LEDGER_NAME),
    )
    try:
        action = get_target(config["target"]).run_child(ctx)
    except Exception as exc:
        last = traceback.format_exception_only(exc)[-1].strip()
        log.write({"t": "error", "p": process, "msg": last}, sync=True)
        return EXIT_ERROR
    log.write({"t": "ended", "p": process, "action": action}, sync=True)
    return EXIT_ENDED


def leave(code: int) -> None:
    """Exit now, as a killed process would not but a finished one may: flush what was printed,
    then ``os._exit``, so a runtime's non-daemon threads and exit hooks (a DBOS executor, a
    Prefect server) never hold a finished child for their own shutdown, and a fresh child ends
    exactly as one forked from the zygote does (``sim.targets.zygote``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
