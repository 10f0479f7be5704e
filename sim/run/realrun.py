"""One run of a scenario under one crash schedule with real processes: the counterpart of
``sim.run.runner.run_scenario``, returning the same ``RunResult`` for the same oracles.

Each process of the world is a child Python process (``python -m sim.run.realchild``) on the
real-process host (``sim.world.realhost``), killed by SIGKILL at the schedule's points (and at
the scenario's timed process crashes, resolved by the simulator: see ``run_real``); after a
kill the next child is started, as the simulator's supervisor restarts a process. What
outlives a child sits in one point directory: the store, the services (``SQLiteServices``)
and the point's record (``sim.world.pointlog``), which the parent replays into the
``RunResult``; it reads the store with a fresh reader.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from sim.run.realchild import EXIT_ENDED, EXIT_ERROR, EXIT_LIVENESS
from sim.run.runner import MAX_PROCESSES, RunResult, initial_files, read_durable, run_scenario
from sim.world.evidence import Evidence
from sim.world.faults import CrashPoint, Schedule
from sim.world.host import ClientView
from sim.world.pointlog import PointLog, read_entries, replay
from sim.world.realhost import (
    CLOCKS,
    CONFIG_NAME,
    LOG_NAME,
    SERVICES_NAME,
    STORE_DIR,
    store_place,
)
from sim.world.scenario import Scenario
from sim.world.sqlite_services import SQLiteServices
from sim.world.stores import StoreKind

DEFAULT_SPEEDUP = 50.0
BLOCKING_MODES = ("thread", "inline")
# A child on the virtual clock only computes: the longest bundled scenario takes seconds.
VIRTUAL_CHILD_TIMEOUT_S = 120.0
#: The longest grace a preemption gives (``RealOptions.preempt_s``), in wall seconds.
MAX_GRACE_S = 60.0
#: How often the parent looks for a preempted child's record while it waits for it.
POLL_S = 0.02


@dataclass
class RealRun:
    result: RunResult
    harness_error: str | None
    children: int
    wall_s: float


@dataclass(frozen=True)
class RealOptions:
    """How a real run is hosted: the clock (``virtual``: the simulator's, or ``scaled``: the wall
    clock sped up ``speedup`` times), SQLite's blocking calls (inline, or on worker threads as in
    production: scaled clock only, see ``sim.world.realhost.VirtualClock``), where point
    directories go, and the seams the children load (by SPEC, see ``sim.world.seams``)."""

    clock: str = "virtual"
    speedup: float = DEFAULT_SPEEDUP
    blocking: str = "inline"
    workdir: str | None = None
    seams: tuple[tuple[str, str], ...] = ()
    keep: bool = False
    # 0: the schedule's last point is a kill. More: a preemption there instead -- SIGTERM, the
    # runtime's graceful shutdown, SIGKILL after this many wall seconds if it is still alive.
    preempt_s: float = 0.0

    def __post_init__(self) -> None:
        assert self.clock in CLOCKS, self.clock
        assert self.blocking in BLOCKING_MODES, self.blocking
        assert self.clock == "scaled" or self.blocking == "inline", "virtual time needs inline"
        assert self.speedup > 0, self.speedup
        assert 0 <= self.preempt_s <= MAX_GRACE_S, self.preempt_s

    def child_timeout_s(self, scenario: Scenario) -> float:
        """Wall seconds a child may run before it counts as hung: its liveness bound in real
        time on the scaled clock; on the virtual clock, time costs nothing, only computing."""
        if self.clock == "virtual":
            return VIRTUAL_CHILD_TIMEOUT_S
        return scenario.liveness_bound_s / self.speedup * 1.5 + 30.0


def timed_points(sim_result: RunResult) -> tuple[CrashPoint, ...]:
    """The scenario's timed crashes as the boundaries the simulator's run had them at (every
    crash of the run that is not a point of its schedule)."""
    planned = {(p.index, p.when) for p in sim_result.schedule.points}
    return tuple(
        c.point for c in sim_result.trace.crashes if (c.point.index, c.point.when) not in planned
    )


def run_real(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int,
    schedule: Schedule,
    options: RealOptions = RealOptions(),
    timed: tuple[CrashPoint, ...] | None = None,
) -> RealRun:
    """Run ``scenario`` in child processes, each killed (SIGKILL) at the schedule's points, and
    collect what the oracles read into a ``RunResult``.

    The scenario's timed crashes are killed at the boundaries where the simulator's run of the
    same schedule had them (``timed``: ``timed_points`` of that run; computed here when not
    given), as a base crash's label is resolved by the simulator's fault-free run: on the real
    clock real work takes scenario time (1 ms is 50 ms at x50), so "the first boundary at or
    after T" would come several boundaries early, and the comparison would be of two different
    crashes."""
    started, store = time.perf_counter(), StoreKind(store)
    if timed is None and scenario.timed_crashes:
        timed = timed_points(run_scenario(scenario, seed=seed, store=store, schedule=schedule))
    point_dir = Path(tempfile.mkdtemp(prefix="realcrash-", dir=options.workdir))
    kills: tuple[CrashPoint, ...] = schedule.points
    preempt_at: tuple[CrashPoint, ...] = ()
    if options.preempt_s:  # the schedule's own point is a preemption, its base points kills
        kills, preempt_at = schedule.points[:-1], schedule.points[-1:]
    try:
        config = {
            "scenario": scenario.model_dump(mode="json"),
            "seed": seed,
            "store": str(store),
            "clock": options.clock,
            "speedup": options.speedup,
            "schedule": Schedule.of(*kills, *(timed or ())).text(),
            "preempt_at": [[p.index, str(p.when)] for p in preempt_at],
            "blocking": options.blocking,
            "seams": dict(options.seams),
        }
        (point_dir / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")
        (point_dir / STORE_DIR).mkdir()
        services = SQLiteServices.create(point_dir / SERVICES_NAME, initial_files(seed, scenario))
        services.close()
        harness_error, timed_out, children = _run_children(
            point_dir, options.child_timeout_s(scenario), options.preempt_s
        )
        result = _collect(scenario, store, seed, schedule, point_dir, timed_out)  # as scheduled
        return RealRun(result, harness_error, children, time.perf_counter() - started)
    finally:
        if not options.keep:
            shutil.rmtree(point_dir, ignore_errors=True)


def _run_children(
    point_dir: Path, timeout_s: float, grace_s: float
) -> tuple[str | None, bool, int]:
    """Start children until one is not killed at a crash point (the simulator's worker loop:
    after a crash a new child always runs, even when the client has its answers, so recovery
    runs and settles whatever the crash left). A child preempted (``grace_s`` > 0) that shut
    down within its grace is followed by the next, as an autoscaler starts a replacement; one
    still alive when the grace ran out is SIGKILLed and its point ends there, with that as the
    runtime's error (I0): a shutdown that outlives its grace loses what it had not finished."""
    log = point_dir / LOG_NAME
    for number in range(1, MAX_PROCESSES + 1):
        command = [sys.executable, "-m", "sim.run.realchild", str(point_dir), str(number)]
        try:
            returncode, stderr = _run_child(command, timeout_s, grace_s, log, f"p{number}")
        except subprocess.TimeoutExpired:  # _run_child has killed it
            return None, True, number
        state = replay(read_entries(log))
        crashed = any(c.process == f"p{number}" for c in state.get("crashes", []))
        preempted = any(p[0] == f"p{number}" for p in state.get("preempted", []))
        if returncode == -signal.SIGKILL and crashed:
            continue
        if returncode == -signal.SIGKILL and preempted:
            PointLog(log).list("errors").append(
                f"p{number} did not stop within its grace of {grace_s:g} s after SIGTERM"
            )
            return None, False, number
        if returncode == EXIT_ENDED and preempted and not crashed:
            continue
        if returncode in (EXIT_ENDED, EXIT_ERROR, EXIT_LIVENESS) and not crashed:
            return None, False, number
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return (
            f"child p{number} exited with status {returncode}"
            + (f": {' | '.join(tail)}" if tail else ""),
            False,
            number,
        )
    # The simulator's world gives up the same way (and reports it as the runtime's failure).
    PointLog(log).list("errors").append(f"more than {MAX_PROCESSES} processes")
    return None, False, MAX_PROCESSES


def _run_child(
    command: list[str], timeout_s: float, grace_s: float, log: Path, process: str
) -> tuple[int, bytes]:
    """Run one child to its end: its status and its standard error. Without a grace, as
    ``subprocess.run``; with one, the parent watches the point's record, and SIGKILLs the child
    ``grace_s`` wall seconds after it recorded its preemption. Raises ``TimeoutExpired`` (the
    child killed) past ``timeout_s``."""
    if not grace_s:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s)
        return done.returncode, done.stderr
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        try:
            _wait_preempted(proc, timeout_s, grace_s, log, process)
        finally:
            if proc.poll() is None:  # an interrupt, a timeout or the grace: no child left
                proc.kill()
            proc.wait()
        err.seek(0)
        return proc.returncode, err.read()


def _wait_preempted(
    proc: subprocess.Popen[bytes], timeout_s: float, grace_s: float, log: Path, process: str
) -> None:
    """Wait for ``proc`` to end, at most ``timeout_s`` and at most ``grace_s`` after its
    preemption shows in the point's record (then kill it)."""
    started = time.monotonic()
    grace_ends: float | None = None
    seen_bytes = -1  # the record is replayed only when it grew: the poll competes with the child
    while proc.poll() is None:
        now = time.monotonic()
        if now - started > timeout_s:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        if grace_ends is None:
            size = log.stat().st_size if log.exists() else 0
            if size != seen_bytes:
                seen_bytes = size
                preempted = replay(read_entries(log)).get("preempted", [])
                if any(p[0] == process for p in preempted):
                    grace_ends = now + grace_s
        elif now >= grace_ends:
            proc.kill()
            return
        time.sleep(POLL_S)


def _collect(
    scenario: Scenario,
    store: StoreKind,
    seed: int,
    schedule: Schedule,
    point_dir: Path,
    timed_out: bool,
) -> RunResult:
    """The ``RunResult`` of a real run: the point's record replayed into the parts the
    simulator's machine and host fill, the services' ledger and files, the store as a fresh
    reader sees it."""
    result = RunResult(scenario=scenario, seed=seed, store=store, schedule=schedule)
    state: dict[str, Any] = replay(read_entries(point_dir / LOG_NAME))
    counts = dict(state.get("counts", {}))
    result.take_evidence(Evidence.kept_in(lambda name: list(state.get(name, [])), counts))
    outside, trace = result.outside, result.trace
    outside.model_calls = list(state.get("model_calls", []))
    # Not ``recovered_at_s`` (recorded as "recovered_at_s"): I11 judges a retry "sent when due"
    # to the nanosecond, which virtual time can be and real time cannot (the retry is sent after
    # the real work since its deadline). Without it I11 still judges "not before the deadline".
    result.errors.recovery_mismatches = list(state.get("recovery_mismatches", []))
    trace.processes = len(state.get("spawned", []))
    outside.client = ClientView(
        acked=dict(state.get("client.acked", {})),
        answers=dict(state.get("client.answers", {})),
        lost_acks=list(state.get("client.lost_acks", [])),
        remapped=list(state.get("client.remapped", [])),
        actions_done=set(state.get("client.actions_done", set())),
        rejected=dict(state.get("client.rejected", {})),
    )
    errors = list(state.get("errors", []))
    liveness = timed_out or bool(state.get("liveness"))
    result.errors.runtime_error = "; ".join(errors) or None
    trace.settled = not liveness and not errors and outside.client.complete(scenario)
    times = [b.time_s for b in trace.boundaries] + [c.time_s for c in trace.crashes]
    trace.virtual_time_s = max(times + state.get("ended", []) + state.get("liveness", []) + [0])
    services = SQLiteServices(point_dir / SERVICES_NAME)
    try:
        outside.ledger = services.ledger()
        outside.files = services.files()
    finally:
        services.close()
    trio.run(_read_store, result, store, scenario, point_dir)
    return result


async def _read_store(
    result: RunResult, store: StoreKind, scenario: Scenario, point_dir: Path
) -> None:
    place = store_place(point_dir, scenario.fsync)
    await read_durable(result, store.reader(place), scenario.conversation_id)
