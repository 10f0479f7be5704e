"""One process of a real run (``sim.run.realrun``): one process of a world on the real-process
host (``sim.world.realhost``), killed for real (SIGKILL) at its schedule's crash points.

    python -m sim.run.realchild POINT_DIR PROCESS_NUMBER

The world is the simulator's own, written once in ``sim.world.session`` (the client session,
the runtime wired to its store, model, tools and ports, the runtime's configuration); this
module only starts one process of it under the scenario's liveness bound, with the seams the
parent named. What outlives the process lives in ``POINT_DIR`` (see ``sim.world.realhost``).

Exit status of a child that is not killed: 0 its client session ended, 3 the runtime raised
(recorded as an error, the oracles' I0), 4 the liveness bound passed.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import trio

from sim.world.process import SimProcess
from sim.world.realhost import RealHost, VirtualClock, open_host, seed_of
from sim.world.seams import load, seams
from sim.world.seeded import seed_trio_scheduler
from sim.world.session import run_process

EXIT_ENDED = 0
EXIT_ERROR = 3
EXIT_LIVENESS = 4


async def _live(host: RealHost, process: SimProcess) -> int:
    """``_run``, and under preemption (``realcrash --preempt``) a SIGTERM handler beside it:
    the signal ends the client session, and leaving the runtime's context is its graceful
    shutdown (as a process that ends its session at the scenario's shutdown time)."""
    if not host.machine.preempt_at:
        return await _run(host, process)
    # Once the run is over a SIGTERM has nothing left to stop: ignored, not re-delivered with
    # the default action when the receiver closes (trio restores this handler then).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_sigterm, signals, process)
            status = await _run(host, process)
            nursery.cancel_scope.cancel()
    return status


async def _on_sigterm(signals: Any, process: SimProcess) -> None:
    async for _ in signals:
        process.preempted = True
        if process.stop_session is not None:
            process.stop_session.cancel()


async def _run(host: RealHost, process: SimProcess) -> int:
    """Run the process until its session ends or the liveness bound passes (scenario time
    after the start or the latest crash, as in the simulator)."""
    clock = host.world.clock
    trio_left = (host.liveness_deadline_s() - clock.resume_at_s) / clock.speedup
    with trio.move_on_after(max(trio_left, 0.0)) as scope:
        outcome = await run_process(host, process)
    if scope.cancelled_caught:
        host.log.list("liveness").append(clock.now())
        return EXIT_LIVENESS
    if outcome != "ended":  # "crashed" and "refused" need a simulated crash: never here
        host.log.list("errors").append(f"{process.id}: {process.error}")
        return EXIT_ERROR
    host.log.list("ended").append(clock.now())
    return EXIT_ENDED


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m sim.run.realchild POINT_DIR PROCESS_NUMBER", file=sys.stderr)
        return 2
    seed_trio_scheduler(seed_of(Path(args[0])))  # before the process's own stream is drawn
    host, process = open_host(Path(args[0]), int(args[1]))
    swapped = {name: load(spec) for name, spec in host.seams.items()}
    with seams(**swapped):
        clock = host.world.clock
        if isinstance(clock, VirtualClock):
            return trio.run(_live, host, process, clock=clock.trio_clock())
        return trio.run(_live, host, process)


if __name__ == "__main__":
    sys.exit(main())
