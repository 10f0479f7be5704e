"""``durable-sim``'s entry point: parse, install the signal policy, run the command, and turn
every bad input into one line and an exit status (docs/architecture.md, 3).

Bad input is a ``sim.errors.UserError``, whichever layer found it (an option, a scenario, a
schedule, a store kind, user code at a seam), caught here once: one line on stderr, the status
its class names (2; 5 for a seam's code that raised), no traceback -- unless ``--debug``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings

from sim.errors import user_error
from sim.explore import interrupts
from sim.outputs.cli.bench import add_parsers as add_bench
from sim.outputs.cli.common import EXIT, Parser, judged_invariants, swapped_seams
from sim.outputs.cli.coverage import add_parsers as add_coverage
from sim.outputs.cli.fuzz import add_parsers as add_fuzz
from sim.outputs.cli.merge import add_parsers as add_campaign  # campaign and merge
from sim.outputs.cli.mutants import add_parsers as add_mutants
from sim.outputs.cli.realcrash import add_parsers as add_realcrash
from sim.outputs.cli.rejoin import add_parsers as add_rejoin
from sim.outputs.cli.scoreboard import add_parsers as add_scoreboard
from sim.outputs.cli.single_run import add_parsers as add_single_run
from sim.outputs.cli.startup import handover
from sim.outputs.cli.sweep import add_parsers as add_sweep
from sim.outputs.cli.target import add_parsers as add_target
from sim.outputs.cli.workers import add_parsers as add_workers
from sim.world import tempdirs
from sim.world.seams import seams

#: Each command module's ``add_parsers``, in the order ``--help`` lists the commands.
COMMANDS = (
    add_single_run,
    add_sweep,
    add_campaign,
    add_fuzz,
    add_mutants,
    add_bench,
    add_realcrash,
    add_coverage,
    add_rejoin,
    add_target,
    add_scoreboard,
    add_workers,
)


def entry() -> int:
    """The ``durable-sim`` process (its console script and ``python -m sim``): ``main``, with its
    signal policy kept to the very end. A stop that comes after the command's own handling --
    its work done, its temporary directories gone -- still ends the process with 130 and the
    one line, never with SIGTERM's default death (-15) or a ``KeyboardInterrupt`` traceback.
    (Before it, while the package is imported, ``startup.guard`` does the same.)"""
    handover()  # the start-up guard's part ends here (``startup``)
    try:
        status = main(restore_signals=False)
        _stop_at_once_from_now_on()
    except KeyboardInterrupt:  # a Ctrl-C, or a SIGTERM turned into one, after main's handling
        _stop_at_once_from_now_on()
        status = _late_stop()
    return status


def _stop_at_once_from_now_on() -> None:
    """Until the process exits, SIGINT and SIGTERM end it at once, with 130 and the line."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda signum, frame: os._exit(_late_stop()))


def _late_stop() -> int:
    quiet_abandoned_runs()
    sys.stdout.flush()
    print("durable-sim: interrupted", file=sys.stderr, flush=True)
    return 130


def quiet_abandoned_runs() -> None:
    """An interrupt abandons a simulated run where it stands, as a crash does (no cleanup): a
    coroutine trio had made for a task's first step (``nursery.start_soon``) is then never
    awaited, and the interpreter would say so on its way out, after the one line (seen once in
    the slow tier: SIGTERM 0.01 s into a sweep's determinism twin). It is expected garbage."""
    warnings.filterwarnings(
        "ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning
    )


def main(argv: list[str] | None = None, *, restore_signals: bool = True) -> int:
    """Run one command; ``restore_signals``: put SIGTERM's handler back and forget the stop
    request on the way out (a caller in the same process, such as a test, goes on: a stop left
    behind would stop its next sweep at once; ``entry`` does not go on)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one line of usage error
        return int(exc.code or 0) if exc.code in (0, None) else EXIT["usage"]
    # SIGTERM (a CI job cancelled, `timeout`) unwinds like Ctrl-C (sim.explore.interrupts): the
    # stop is recorded, then a SIGINT sent; the sweep kills its forked children and removes its
    # temporary directories on the way out.
    on_main_thread = threading.current_thread() is threading.main_thread()
    interrupts.clear()  # a stop handled by an earlier command of this process is not this one's
    previous = (
        signal.signal(signal.SIGTERM, interrupts.sigterm_as_sigint) if on_main_thread else None
    )
    try:
        with interrupts.record_dropped(), seams(**swapped_seams(args)):
            status = int(args.handler(args))
        if interrupts.stop_requested():  # told to stop, but the command ran on to its end
            return _interrupted()
        return status
    except BrokenPipeError:
        # The reader went away (`durable-sim replay ... | head`): stop quietly, as Unix tools
        # do; point stdout at /dev/null so the interpreter's final flush cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BaseException as exc:  # re-raised unless it is bad input or only the user's interrupt
        user = user_error(exc)
        if user is not None and not args.debug:
            print(f"durable-sim: {user}", file=sys.stderr)
            return EXIT[user.status]
        if not interrupts.interrupt_only(exc):
            raise
        return _interrupted()
    finally:
        if restore_signals:  # the caller goes on: this command's stop is not its next one's
            interrupts.clear()
        if on_main_thread and restore_signals:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _interrupted() -> int:
    """A command stopped by Ctrl-C or SIGTERM: what it made in the temporary directory goes
    (``tempdirs.remove_own``: one made just before its owner's ``try`` too), then the line."""
    tempdirs.remove_own()
    quiet_abandoned_runs()
    print("durable-sim: interrupted", file=sys.stderr)
    return 130


def _parser() -> argparse.ArgumentParser:
    """The whole command line: each command module adds its sub-parser and sets its handler."""
    parser = Parser(
        prog="durable-sim",
        description=(
            "Deterministic crash testing for durable agent runtimes. Runs scenarios under a "
            "virtual clock, kills the process at every commit, file, tool, model and lease "
            f"boundary (process kill and power loss), restarts it, and checks "
            f"{judged_invariants()}."
        ),
        epilog="Exit status: 0 pass, 1 safety, 2 usage, 3 liveness, 4 nondeterminism, 5 error.",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on bad input, raise with the traceback instead of printing one line",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parsers in COMMANDS:
        add_parsers(sub)
    return parser
