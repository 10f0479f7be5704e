"""The real-process host of a world (``durable-sim realcrash``): the world of
``sim.world.session`` run by one OS process on real files or a real SQLite database, on the
simulator's virtual clock or a sped-up wall clock, and killed for real (SIGKILL) at the crash
points of its schedule.

Only the host differs from the simulator's (``sim.run.runner``), behind ``sim.world.host.Host``:

- time: the machine's clock, so every process, port, the model, tools and the client read it:
  ``VirtualClock`` (default), the simulator's virtual time under trio's ``MockClock``, or
  ``ScaledClock``, the wall clock sped up ``speedup`` times;
- the machine: ``RealMachine`` is the simulator's ``Machine`` (its injector's boundary numbering
  and schedule, its evidence for the oracles) continued across the processes of a point from
  the point's record (``sim.world.pointlog``), whose crash is a SIGKILL;
- the file system: ``OsFileSystem`` under ``POINT_DIR/store`` (the simulator's ``ProcessFS`` on
  top); SQLite at ``POINT_DIR/store.sqlite`` with blocking calls inline (virtual time) or on
  trio's worker threads (as in production, on the scaled clock);
- ids: the world's ``{kind}-{n}`` counters, continued across processes;
- services: ``SQLiteServices``, a SQLite file outside every process.

What a SIGKILL leaves: everything written (the page cache survives), nothing that would have run
after the instant (no ``finally``, no ``__aexit__``, no rollback but SQLite's own on the next
open). Power loss and storage faults are not attempted: a real process cannot lose the page
cache, and the disk is not ours to damage.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio
import trio.testing

from durable.config import RuntimeConfig
from durable.ports import Blocking, OsFileSystem
from sim.world.evidence import Evidence
from sim.world.faults import Schedule, parse_schedule
from sim.world.host import ClientView, runtime_config
from sim.world.injector import Victim
from sim.world.model import ModelCall
from sim.world.pointlog import PointLog
from sim.world.process import Machine, SimBlocking, SimProcess
from sim.world.scenario import Scenario
from sim.world.seeded import World, seed_process_scheduler
from sim.world.sqlite_services import SQLiteServices
from sim.world.stores import StoreKind, StorePlace

T = TypeVar("T")

CONFIG_NAME = "config.json"
LOG_NAME = "world.jsonl"
SERVICES_NAME = "services.sqlite"
STORE_DIR = "store"


class ScaledClock:
    """Scenario seconds on the wall clock, sped up ``speedup`` times.

    One scenario second lasts ``1/speedup`` real seconds, uniformly for everything the runtime
    and the fakes time (the model's latency, tool latencies, lease TTL and heartbeat, backoffs,
    the liveness bound). It stands still at ``resume_at_s`` (0 for the first process of a point,
    the crash instant for the next ones) until the process first crosses a boundary or sleeps:
    the simulator restarts a process at the crash instant, and nothing a process does before
    its first boundary takes simulated time, while a real interpreter's start-up and opening a
    store take milliseconds (tens of scenario seconds when sped up) that must not shift the
    client's timed steps, timed crashes or the lease wait. After that, real work takes scenario
    time: 1 ms of I/O is 50 ms of scenario time at the default speedup of 50.
    """

    def __init__(self, resume_at_s: float, speedup: float) -> None:
        self.resume_at_s = resume_at_s
        self.speedup = speedup
        self._origin_wall_s: float | None = None

    def start(self) -> None:
        """Let time run from ``resume_at_s`` (from now on; again: no effect)."""
        if self._origin_wall_s is None:
            self._origin_wall_s = time.time() - self.resume_at_s / self.speedup

    def now(self) -> float:
        if self._origin_wall_s is None:
            return self.resume_at_s
        return (time.time() - self._origin_wall_s) * self.speedup

    async def sleep_until(self, deadline_s: float) -> None:
        self.start()
        # Always one checkpoint, even for a deadline already past (as ``trio.sleep_until``, the
        # simulator's sleep, does): other runnable tasks go first in both worlds.
        await trio.sleep(max(deadline_s - self.now(), 0.0) / self.speedup)
        while (remaining := deadline_s - self.now()) > 0:  # woke a hair early (float rounding)
            await trio.sleep(remaining / self.speedup)


class VirtualClock:
    """The simulator's virtual time in a real process: trio's ``MockClock`` with autojump, started
    at ``resume_at_s`` (the crash instant the simulator restarts a process at).

    Time moves only when every task of the process waits on a timer, as in the simulator, so
    timers that tie (a heartbeat and a client step due at the same instant) fire in the
    simulator's order, and a host stall costs no scenario time. Blocking calls must then run
    inline (``--blocking inline``): a task waiting on a worker thread looks idle to autojump,
    which would jump time past the call. What stays real: the processes, their files or SQLite
    database, the kill and the next interpreter's start.
    """

    def __init__(self, resume_at_s: float) -> None:
        self.resume_at_s = resume_at_s
        self.speedup = 1.0  # scenario seconds per trio second: trio's clock is scenario time

    def start(self) -> None:
        """Time already runs from ``resume_at_s`` (``trio_clock`` jumped there)."""

    def trio_clock(self) -> trio.testing.MockClock:
        """The clock to give ``trio.run``: scenario time, starting at ``resume_at_s``."""
        clock = trio.testing.MockClock(autojump_threshold=0)
        clock.jump(self.resume_at_s)
        return clock

    def now(self) -> float:
        return trio.current_time()

    async def sleep_until(self, deadline_s: float) -> None:
        await trio.sleep_until(deadline_s)


HostClock = ScaledClock | VirtualClock
CLOCKS = ("virtual", "scaled")


def host_clock(cfg: dict[str, Any], resume_at_s: float) -> HostClock:
    """The clock a point's ``config.json`` asks for."""
    if cfg["clock"] == "virtual":
        return VirtualClock(resume_at_s)
    assert cfg["clock"] == "scaled", cfg["clock"]
    return ScaledClock(resume_at_s, float(cfg["speedup"]))


def store_place(point_dir: Path, fsync: bool) -> StorePlace:
    """Where a point's store lives: ``POINT_DIR/store`` (the file store's directory, and the
    SQLite database ``store.sqlite`` in it)."""
    root = point_dir / STORE_DIR
    root.mkdir(parents=True, exist_ok=True)
    return StorePlace(RealFiles(), str(root), fsync)


class RealFiles(OsFileSystem):
    """Real files with the positional reads and writes SQLite's VFS needs
    (``sim.world.sqlite_vfs.SQLiteFiles``): the real host runs SQLite through the simulator's
    VFS too, so a real kill falls on the same crash points (``fs.pwrite``, ``fs.fsync``, ...)
    as the simulated one, on bytes the operating system really wrote."""

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def write_more_at(self, path: str, offset: int, data: bytes) -> None:
        self.write_at(path, offset, data)


class RealWorld(World):
    """The world of a real process: its ids continue the point's, time is the host's clock, and
    there is no trace (a real run has no fingerprint: it is not deterministic)."""

    def __init__(self, seed: int, clock: HostClock, ids: dict[str, int]) -> None:
        super().__init__(seed)
        self.clock = clock
        self.ids._next = ids  # the point's counters, written to its record as they grow

    def now(self) -> float:
        return self.clock.now()

    def record(self, kind: str, *fields: Any) -> None:
        del kind, fields


class RealMachine(Machine):
    """The simulator's machine, continued across the processes of a point and killed for real:
    its evidence and its injector's label counters live in the point's record, and its
    boundary numbering goes on from the boundaries recorded there."""

    def __init__(
        self,
        world: RealWorld,
        schedule: Schedule,
        log: PointLog,
        preempt_at: frozenset[tuple[int, str]] = frozenset(),
    ) -> None:
        # No timed crashes of its own: the parent resolved them to boundary indexes of the
        # schedule (``sim.run.realrun``), since a real clock runs ahead of the simulator's.
        self.preempt_at = preempt_at
        super().__init__(
            world,
            schedule,
            fs=None,
            evidence=Evidence.kept_in(log.list, log.dict("counts")),
            end=sigkill,
            counters=log.dict("counters"),
        )
        self.clock = world.clock
        self.log = log
        self.spawned = log.list("spawned")

    def now(self) -> float:
        return self.clock.now()

    async def sleep_until(self, deadline_s: float) -> None:
        await self.clock.sleep_until(deadline_s)

    def before(self, process: SimProcess, label: str) -> int:
        self.clock.start()  # the process's first boundary: time runs from here (ScaledClock)
        index = super().before(process, label)
        self._preempt(process, index, "before")
        return index

    def after(self, process: SimProcess, index: int, label: str) -> None:
        super().after(process, index, label)
        self._preempt(process, index, "after")

    def _preempt(self, process: SimProcess, index: int, when: str) -> None:
        """A preemption point (``realcrash --preempt``): record it, then SIGTERM to this very
        process, as an autoscaler sends it. The boundary goes on; the signal's handler
        (``sim.run.realchild``) begins the graceful shutdown at the next checkpoint, and the
        parent SIGKILLs the process if it is still alive when the grace runs out."""
        if (index, when) not in self.preempt_at:
            return
        self.log.list("preempted").append([process.id, index, when])
        os.kill(os.getpid(), signal.SIGTERM)

    def spawn_numbered(self, number: int) -> SimProcess:
        process = SimProcess(self, number)
        self.processes.append(process)
        self.spawned.append(process.id)
        if self.evidence.crashes:  # a restart (after seed_trio_scheduler: realchild); as spawn
            seed_process_scheduler(self.world.seed, number)
        return process


def sigkill(victims: Sequence[Victim]) -> None:
    """How a crash ends the real host's process (the injector recorded it in the point's record
    first): SIGKILL to itself, so nothing of it runs after that instant. A real host only kills
    processes (realcrash refuses power loss and storage faults): the one victim is this one."""
    del victims
    os.kill(os.getpid(), signal.SIGKILL)
    while True:  # pragma: no cover - a signal to oneself is delivered before kill returns
        time.sleep(1.0)


class ThreadedBlocking:
    """The blocking port of the real host: each call on trio's worker threads (as production
    does), reads not boundaries, every other call one (as ``SimBlocking``)."""

    def __init__(self, process: SimProcess) -> None:
        self._p = process

    async def run(self, label: str, fn: Callable[[], T]) -> T:
        if label.endswith(".read"):
            return await trio.to_thread.run_sync(fn)
        machine = self._p.machine
        index = machine.before(self._p, label)
        try:
            result = await trio.to_thread.run_sync(fn)
        except Exception:  # as ``Machine.crossing``: a failed call has an "after" too
            machine.after(self._p, index, label)
            raise
        machine.after(self._p, index, label)
        return result


@dataclass
class RealHost:
    """``sim.world.host.Host`` for one real process of a point."""

    scenario: Scenario
    config: RuntimeConfig
    store_kind: StoreKind
    world: RealWorld
    machine: RealMachine
    services: SQLiteServices
    client: ClientView
    model_log: list[ModelCall]
    recovered_at_s: dict[str, float]
    recovery_mismatches: list[str]
    point_dir: Path
    threads: bool
    log: PointLog
    seams: dict[str, str]

    def place(self) -> StorePlace:
        return store_place(self.point_dir, self.scenario.fsync)

    def blocking(self, process: SimProcess) -> Blocking:
        return ThreadedBlocking(process) if self.threads else SimBlocking(process)

    def liveness_deadline_s(self) -> float:
        """The simulator's liveness bound: scenario time after the start or the latest crash."""
        bound = self.scenario.liveness_bound_s
        return max([bound] + [c.time_s + bound for c in self.machine.evidence.crashes])


def seed_of(point_dir: Path) -> int:
    """The world seed of the point in ``point_dir``."""
    cfg = json.loads((point_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    return int(cfg["seed"])


def open_host(point_dir: Path, number: int) -> tuple[RealHost, SimProcess]:
    """The host of process ``number`` of the point in ``point_dir`` (its ``config.json`` written
    by the parent, its record replayed), and that process, spawned."""
    cfg = json.loads((point_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    scenario = Scenario.model_validate(cfg["scenario"])
    log = PointLog(point_dir / LOG_NAME)
    crashes = log.state.get("crashes", [])
    clock = host_clock(cfg, crashes[-1].time_s if crashes else 0.0)
    world = RealWorld(int(cfg["seed"]), clock, log.dict("ids"))
    preempt_at = frozenset((int(i), str(w)) for i, w in cfg.get("preempt_at", []))
    machine = RealMachine(world, parse_schedule(cfg["schedule"]), log, preempt_at)
    client = ClientView(
        acked=log.dict("client.acked"),
        answers=log.dict("client.answers"),
        lost_acks=log.list("client.lost_acks"),
        remapped=log.list("client.remapped"),
        actions_done=log.set("client.actions_done"),
        rejected=log.dict("client.rejected"),
    )
    host = RealHost(
        scenario=scenario,
        config=runtime_config(scenario),
        store_kind=StoreKind(cfg["store"]),
        world=world,
        machine=machine,
        services=SQLiteServices(point_dir / SERVICES_NAME),
        client=client,
        model_log=log.list("model_calls"),
        recovered_at_s=log.dict("recovered_at_s"),
        recovery_mismatches=log.list("recovery_mismatches"),
        point_dir=point_dir,
        threads=cfg["blocking"] == "thread",
        log=log,
        seams=dict(cfg["seams"]),
    )
    return host, machine.spawn_numbered(number)
