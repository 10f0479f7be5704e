"""Simulated processes, the machine they run on, and their ports (docs/architecture.md, 2.2).

A ``SimProcess`` is one runtime instance with its own owner id and cancel scope. Every port it is
given crosses labelled boundaries through the ``Machine`` and refuses every call once the process
is dead. The machine composes the crash injector (``sim.world.injector``: a crash marks the
process dead *first*, then cancels its scope and raises ``SimulatedCrash`` out of the port call,
so no ``finally`` or ``__aexit__`` of the runtime can touch the world after the crash instant --
any port call they make is refused -- exactly like kill -9) and the evidence recorder
(``sim.world.evidence``: what the oracles read afterwards).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from durable.events import EventRecord
from durable.store.base import Checkpoint, Lease, Store
from sim.errors import ScheduleError
from sim.world.evidence import AcceptedAppend, Evidence, LeaseGrant
from sim.world.faults import Boundary, CrashPoint, Schedule
from sim.world.fs import SimFS
from sim.world.injector import Injector, SimulatedCrash, Victim, end_simulated
from sim.world.seeded import World, seed_commit_scheduler, seed_process_scheduler

T = TypeVar("T")


class ProcessDead(BaseException):
    """A dead process called a port: refused (a killed process cannot touch the world)."""


class SimProcess:
    """One process of a machine: the simulator's, or (under ``sim.world.realhost``) the real OS
    process the code runs in. Its clock is its machine's."""

    def __init__(self, machine: Machine, number: int) -> None:
        self.machine = machine
        self.number = number
        self.id = f"p{number}"
        self.owner_id = f"owner-{number}"
        self.alive = True
        self.scope = trio.CancelScope()
        self.runtime: Any = None
        self.open_stores: list[Any] = []  # SQLite's, Postgres's: abandoned by a kill
        self.paused_until_s: float | None = None
        # A takeover's pause was placed on it and no other owner took its lease since: the
        # handover is counted when one does, with what was pinned *then* (a paused process
        # goes on until its next sleep, and may pin a request meanwhile: I11).
        self.takeover_pending = False
        self.error: str | None = None
        self.slot = 0  # the worker slot it runs in (a scenario's second worker is slot 1)
        # Released its lease (and not acquired one since): it must do no more work (I8).
        self.released_lease = False
        # A preemption (``realcrash --preempt``: SIGTERM, then SIGKILL after a grace) asked it
        # to shut down gracefully; ``stop_session`` ends its client session when it has one.
        self.preempted = False
        self.stop_session: trio.CancelScope | None = None

    def now(self) -> float:
        return self.machine.now()

    async def sleep_until(self, deadline_s: float) -> None:
        """Sleep on the machine's clock; a paused process wakes only when its pause ends."""
        self.check_alive("sleep")
        await self.machine.sleep_until(deadline_s)
        while self.paused_until_s is not None and self.machine.now() < self.paused_until_s:
            await self.machine.sleep_until(self.paused_until_s)
        self.check_alive("sleep")

    def check_alive(self, what: str) -> None:
        if not self.alive:
            raise ProcessDead(f"{self.id} is dead: refused {what}")

    def pinned_request(self) -> bool:
        """Whether this process had a model request pinned and not answered (for I11)."""
        open_conversations = getattr(self.runtime, "open_conversations", None)
        if open_conversations is None:
            return False  # no runtime yet, or a runtime of your own that does not say
        return any(c.journal.state.pinned for c in open_conversations())


@dataclass(frozen=True)
class PausePlan:
    """What a world with a standby gives its machine for ``pause`` crash points (the runner
    builds it from the scenario): ``until_s(now)``, the latest a pause that starts at ``now``
    lasts (past the lease's expiry and the standby's start, so the standby can take over);
    ``on_pause(process, until_s)``, the world's bookkeeping of a paused process (the same as
    a takeover's pause: its sleeps wait, I11 allows the handover's re-sent request)."""

    until_s: Callable[[float], float]
    on_pause: Callable[[SimProcess, float], None]


@dataclass(eq=False)
class _Pause:
    """One pause crash point being taken: ``zombie`` stopped before boundary ``index``."""

    zombie: SimProcess
    index: int
    resume: trio.Event = field(default_factory=trio.Event)  # the zombie goes on
    done: trio.Event = field(default_factory=trio.Event)  # its paused operation is over
    taker: SimProcess | None = None  # granted the lease while the zombie was stopped
    taken: bool = False  # the zombie has reached its stop


class Pauses:
    """The ``pause`` crash kind (docs/crash-model.md, "Crash kinds"): a process stopped just
    before a store operation (or a blocking call inside one) while the others run on virtual
    time, then going on from exactly there -- a zombie, if a standby took its lease meanwhile.

    A pause is an ``await`` in the store's caller (``InstrumentedStore``, ``SimBlocking``),
    never a thread: the stop is a wait on a ``trio.Event`` with a virtual deadline, so it is as
    deterministic as the rest of the world. It ends when the process granted the lease
    meanwhile (the *taker*) reaches its next store boundary, or at the plan's deadline if
    nobody took over. The taker is held there until the zombie's paused operation is over: a
    new owner's first append would otherwise refuse the zombie's write by sequence, so the
    zombie's write lands in the window between the new owner's grant and its first write --
    the window a fence checked outside the write's transaction leaves open (the fleet mode's
    fence pause opens the same one with real processes, ``sim.targets.workers.takeover``).

    Nothing here awaits unless a pause is armed or being taken: a world without pause points
    is scheduled exactly as before (same fingerprints)."""

    def __init__(self, plan: PausePlan | None) -> None:
        self.plan = plan
        self._armed: dict[str, _Pause] = {}  # process id -> its pause, before it is taken
        self._active: list[_Pause] = []
        self._reentered: dict[str, int] = {}  # process id -> its latest boundary after a pause

    def arm(self, process: SimProcess, point: CrashPoint) -> None:
        """The injector reached a pause point in ``process``: it stops when its caller awaits
        (``take``), right after the boundary was entered."""
        if self.plan is None:
            raise ScheduleError(
                f"{point.text()}: a pause needs a standby to take the lease over "
                "(a scenario with a takeover or a shutdown: Scenario.standby_at_s)"
            )
        pause = _Pause(process, point.index)
        self._armed[process.id] = pause
        self._active.append(pause)

    async def hold(self, process: SimProcess) -> None:
        """Before ``process`` enters a store boundary: a stopped process's other tasks stop
        too, and a taker waits until the zombie's paused operation is over."""
        for pause in list(self._active):
            if pause.zombie is process and pause.taken and not pause.resume.is_set():
                await pause.resume.wait()
            elif pause.taker is process and not pause.done.is_set():
                pause.resume.set()
                await pause.done.wait()

    async def take(self, process: SimProcess, index: int, reenter: Callable[[], int]) -> int:
        """Stop ``process`` here if a pause point was armed at boundary ``index``; the index
        its operation goes on under: ``index``, or, after a pause, the boundary it enters again
        (``reenter``) -- numbered after everything that ran meanwhile, so the oracles, which
        order by boundary index (a grant before an append), see when it took effect."""
        pause = self._armed.get(process.id)
        if pause is None or pause.index != index:
            return index
        del self._armed[process.id]
        assert self.plan is not None
        previous = process.paused_until_s
        until_s = self.plan.until_s(process.now())
        pause.taken = True
        self.plan.on_pause(process, until_s)
        with trio.move_on_at(until_s):
            await pause.resume.wait()
        pause.resume.set()
        if process.paused_until_s == until_s:  # still this pause's (not a takeover's since)
            still = previous is not None and previous > process.now()
            process.paused_until_s = previous if still else None
        process.check_alive("pause")
        again = reenter()
        self._reentered[process.id] = again
        return again

    def effective(self, process: SimProcess, index: int) -> int:
        """The index an operation entered at ``index`` took effect under: the boundary its
        process entered again after a pause inside it (a transaction of the store), if any."""
        again = self._reentered.get(process.id, -1)
        return again if again > index else index

    def granted(self, process: SimProcess) -> None:
        """``process`` was granted a lease: the taker of every pause taken meanwhile."""
        for pause in self._active:
            stopped = pause.taken and not pause.resume.is_set()
            if stopped and pause.taker is None and pause.zombie is not process:
                pause.taker = process

    def finished(self, process: SimProcess, index: int) -> None:
        """``process``'s operation at boundary ``index`` is over (returned, refused or
        crashed): if it was a paused one, its taker goes on."""
        for pause in list(self._active):
            if pause.zombie is process and pause.index == index:
                pause.resume.set()
                pause.done.set()
                self._active.remove(pause)
                self._armed.pop(process.id, None)


class Machine:
    """The host: SimFS, the processes, and the two roles every port's boundary serves. Outlives
    every process.

    The ``injector`` (``sim.world.injector``) numbers the boundaries and decides and performs
    the crashes; the ``evidence`` (``sim.world.evidence``) records what the oracles read
    afterwards. The machine composes them and is all a process's ports see: ``before`` and
    ``after`` a boundary, label numbers, the clock. ``sim.world.realhost.RealMachine`` is the
    same machine over real time and a real kill: its injector and evidence carry on across the
    processes of a point."""

    def __init__(
        self,
        world: World,
        schedule: Schedule,
        *,
        fs: SimFS | None,
        timed_crashes: tuple[tuple[float, str], ...] = (),
        evidence: Evidence | None = None,
        store_root: str = "",
        count_tears: bool = False,
        on_crash: Callable[[], None] = lambda: None,
        end: Callable[[Sequence[Victim]], None] = end_simulated,
        counters: dict[str, int] | None = None,
        pause_plan: PausePlan | None = None,
    ) -> None:
        """``evidence``: a recorder of the run's own (default: an empty one, for no particular
        conversation). ``pause_plan``: how long a ``pause`` crash point stops a process (None: a
        world without a standby, where a pause point is refused). The other options are the
        injector's (``Injector``)."""
        self.world = world
        self.fs = fs
        self.processes: list[SimProcess] = []
        self.evidence = Evidence() if evidence is None else evidence
        self.pauses = Pauses(pause_plan)
        self.injector = Injector(
            world,
            schedule,
            fs=fs,
            processes=self.processes,
            evidence=self.evidence,
            now=self.now,
            timed_crashes=timed_crashes,
            store_root=store_root,
            count_tears=count_tears,
            on_crash=on_crash,
            end=end,
            counters=counters,
            on_pause=self._arm_pause,
        )

    def _arm_pause(self, process: Victim, point: CrashPoint) -> None:
        assert isinstance(process, SimProcess)
        self.pauses.arm(process, point)

    def spawn(self) -> SimProcess:
        process = SimProcess(self, len(self.processes) + 1)
        self.processes.append(process)
        self.world.record("spawn", process.id)
        if self.evidence.crashes:  # a restart: see ``seed_process_scheduler``
            seed_process_scheduler(self.world.seed, process.number)
        return process

    def took_over_from(self, owner_id: str) -> None:
        """Another process was granted ``owner_id``'s lease: if a takeover's pause was holding
        that owner, the handover happened now, and the re-sent request I11 allows is the one it
        has pinned now (not when the pause was placed: it ran on to its next sleep)."""
        now = self.now()
        for process in self.processes:
            if process.owner_id != owner_id or not process.takeover_pending:
                continue
            process.takeover_pending = False
            # Only from an owner still held by the pause: one it released, or that died, or
            # whose pause ended first, handed nothing over here (a crash counts its own).
            paused = process.paused_until_s is not None and process.paused_until_s > now
            if process.alive and paused:
                self.evidence.lease_handed_over(pinned_request=process.pinned_request())

    def now(self) -> float:
        """The machine's clock: trio's (virtual, under the simulator's ``MockClock``)."""
        return trio.current_time()

    async def sleep_until(self, deadline_s: float) -> None:
        await trio.sleep_until(deadline_s)

    def numbered(self, kind: str) -> int:
        """The next number of a label kind (``store.commit#14``): the injector's numbering."""
        return self.injector.numbered(kind)

    @property
    def next_index(self) -> int:
        """The index the next boundary will get (``Injector.next_index``)."""
        return self.injector.next_index

    # -- boundaries ----------------------------------------------------------------------------

    def before(self, process: SimProcess, label: str) -> int:
        """``process`` enters a boundary: numbered, recorded, then maybe crashed there."""
        process.check_alive(label)
        index = self.injector.enter()
        now = self.now()
        boundary = Boundary(index, label, process.id, now)
        self.evidence.boundary(boundary, released_lease=process.released_lease)
        self.world.record("b", index, label, process.id)
        self.injector.before(process, index, label, now)
        return index

    def after(self, process: SimProcess, index: int, label: str) -> None:
        """``process``'s operation at boundary ``index`` returned: maybe crashed there. At a
        commit's end trio's scheduler is first reseeded from what was committed
        (``seed_commit_scheduler``), so a crash or a fork there sees the reseeded stream."""
        if label.startswith(COMMIT_LABEL):
            seed_commit_scheduler(self.world.seed, commit_content(process))
        self.injector.after(process, index, label)

    def crossing(self, process: SimProcess, label: str, fn: Callable[[], T]) -> T:
        return cross(self, process, label, fn)

    async def crossing_pausable(self, process: SimProcess, label: str, fn: Callable[[], T]) -> T:
        """``crossing`` for a call its caller awaits (a blocking call): a pause point there
        stops the process before ``fn`` starts (``Pauses``)."""
        await self.pauses.hold(process)
        entered = self.before(process, label)
        try:
            index = await self.pauses.take(process, entered, lambda: self.before(process, label))
            try:
                result = fn()
            except Exception:
                self.after(process, index, label)
                raise
            self.after(process, index, label)
        finally:
            self.pauses.finished(process, entered)  # the harness's bookkeeping, not the runtime's
        return result


#: The label of a store's commit boundary (``sim.world.stores``): where the scheduler reseeds.
COMMIT_LABEL = "store.commit"


def commit_content(process: Any) -> tuple[tuple[int, ...], ...]:
    """The sizes of ``process``'s open conversations (messages, tasks, settled tool results),
    sorted: what a commit's end reseeds the scheduler from. Counts, not ids or sequence numbers,
    which a recovery shifts; empty for a runtime that does not list its conversations."""
    open_conversations = getattr(process.runtime, "open_conversations", None)
    if open_conversations is None:
        return ()
    states = [c.journal.state for c in open_conversations()]
    return tuple(sorted((len(s.messages), len(s.tasks), len(s.tool_results)) for s in states))


def cross(machine: Any, process: Any, label: str, fn: Callable[[], T]) -> T:
    """``fn`` between the ``before`` and ``after`` boundaries of ``machine`` (the simulator's, or
    realcrash's). An operation that fails (an ``Exception``, e.g. a missing file) still has an
    "after": the process lives on past it and can die there."""
    index = machine.before(process, label)
    try:
        result = fn()
    except Exception:
        machine.after(process, index, label)
        raise
    machine.after(process, index, label)
    return result


# -- ports -----------------------------------------------------------------------------------------


class SimClock:
    def __init__(self, process: SimProcess) -> None:
        self._process = process

    def now(self) -> float:
        self._process.check_alive("clock.now")
        return self._process.now()

    async def sleep_until(self, deadline_s: float) -> None:
        await self._process.sleep_until(deadline_s)


WRITE_CHUNK_BYTES = 4096  # one write(2) call per page of a rewrite


class ProcessFS:
    """SimFS as seen by one process: reads refuse after death; every mutation is a boundary."""

    def __init__(self, process: SimProcess, fs: SimFS, root: str) -> None:
        self._p = process
        self._fs = fs
        self._root = root.rstrip("/") + "/"
        # A rewrite's later write(2) calls: SimFS keeps such a file marked as written whole (for
        # storage faults); on a real file system (realcrash's host) they are plain appends.
        self._write_more = fs.write_more if isinstance(fs, SimFS) else fs.append

    def _label(self, op: str, path: str) -> str:
        rel = path[len(self._root) :] if path.startswith(self._root) else path
        return f"fs.{op}:{rel or '/'}"

    def _mutate(self, op: str, path: str, fn: Callable[[], T]) -> T:
        return self._p.machine.crossing(self._p, self._label(op, path), fn)

    def makedirs(self, path: str) -> None:
        self._p.check_alive("fs.makedirs")
        self._fs.makedirs(path)

    def exists(self, path: str) -> bool:
        self._p.check_alive("fs.exists")
        return self._fs.exists(path)

    def read(self, path: str) -> bytes:
        self._p.check_alive("fs.read")
        return self._fs.read(path)

    def size(self, path: str) -> int:
        self._p.check_alive("fs.size")
        return self._fs.size(path)

    def listdir(self, path: str) -> list[str]:
        self._p.check_alive("fs.listdir")
        return self._fs.listdir(path)

    def write(self, path: str, data: bytes) -> None:
        """A rewrite as the OS performs it: ``open(O_CREAT|O_TRUNC)``, then ``write(2)`` calls of
        at most ``WRITE_CHUNK_BYTES``, each its own crash boundary. A process killed in between
        leaves an empty or partial file: only a temporary file and a rename make a rewrite
        atomic (see docs/crash-model.md)."""
        self._mutate("open_trunc", path, lambda: self._fs.write(path, b""))
        for offset in range(0, len(data), WRITE_CHUNK_BYTES):
            chunk = data[offset : offset + WRITE_CHUNK_BYTES]
            self._mutate(
                "write", f"{path}@{offset}", functools.partial(self._write_more, path, chunk)
            )

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        self._p.check_alive("fs.read_at")
        return self._fs.read_at(path, offset, size)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        """``pwrite``: how SQLite writes its pages and log frames (through its VFS)."""
        # No offset in the label: where a log frame lands depends on the log's history (a lease
        # renewal more or less), which would make every later label differ between two runs.
        self._mutate("pwrite", path, lambda: self._fs.write_at(path, offset, data))

    def write_more_at(self, path: str, offset: int, data: bytes) -> None:
        """A later ``pwrite`` of the same batch: not a crash point of its own (see
        ``sim.world.sqlite_vfs``), still refused once the process is dead."""
        self._p.check_alive("fs.pwrite")
        self._fs.write_at(path, offset, data)

    def append(self, path: str, data: bytes) -> None:
        self._mutate("append", path, lambda: self._fs.append(path, data))

    def truncate(self, path: str, size: int) -> None:
        self._mutate("truncate", path, lambda: self._fs.truncate(path, size))

    def fsync(self, path: str) -> None:
        self._mutate("fsync", path, lambda: self._fs.fsync(path))

    def rename(self, src: str, dst: str) -> None:
        self._mutate("rename", dst, lambda: self._fs.rename(src, dst))

    def exclusive(self, path: str) -> AbstractContextManager[None]:
        """The store's cross-process lock: not a boundary (it writes nothing); refused after
        death like every call; released by the file system when the process dies inside it."""
        self._p.check_alive("fs.exclusive")
        return self._fs.exclusive(path)

    def fsync_dir(self, path: str) -> None:
        self._mutate("fsync_dir", path.rstrip("/") + "/", lambda: self._fs.fsync_dir(path))

    def unlink(self, path: str) -> None:
        self._mutate("unlink", path, lambda: self._fs.unlink(path))


class SimBlocking:
    """Blocking calls run inline (no threads: time stays virtual and deterministic). SQLite
    reads are not boundaries; every other call is one."""

    def __init__(self, process: SimProcess) -> None:
        self._p = process

    async def run(self, label: str, fn: Callable[[], T]) -> T:
        if label.endswith(".read"):
            self._p.check_alive(label)
            return fn()
        return await self._p.machine.crossing_pausable(self._p, label, fn)


class SimIds:
    def __init__(self, process: SimProcess, world: World) -> None:
        self._p = process
        self._world = world

    def new(self, kind: str) -> str:
        self._p.check_alive("ids.new")
        return self._world.ids.new(kind)


class InstrumentedStore:
    """Wraps a process's store so each logical store operation is a labelled boundary too
    (``store.commit#14``), and records in the machine's evidence what each commit made durable
    (for I6 and I12) and each lease granted, renewed or released (for I8 and I11)."""

    def __init__(self, inner: Store, process: SimProcess) -> None:
        self._inner = inner
        self._p = process

    async def _op(self, kind: str, call: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        machine = self._p.machine
        await machine.pauses.hold(self._p)
        label = f"{kind}#{machine.numbered(kind)}"
        entered = machine.before(self._p, label)
        try:
            index = await machine.pauses.take(
                self._p, entered, lambda: machine.before(self._p, label)
            )
            try:
                result = await call()
            except Exception:  # a refused operation (LeaseHeld, StaleLease) has an "after" too
                machine.after(self._p, index, label)
                raise
            machine.after(self._p, index, label)
        finally:
            machine.pauses.finished(self._p, entered)  # the harness's bookkeeping (``Pauses``)
        return result, machine.pauses.effective(self._p, index)

    async def list_conversations(self) -> list[str]:
        self._p.check_alive("store.list")
        return await self._inner.list_conversations()

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, *, repair: bool = False
    ) -> list[EventRecord]:
        self._p.check_alive("store.read")
        return await self._inner.read_records(conversation_id, after_sequence, repair=repair)

    async def append(
        self,
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        machine = self._p.machine
        await machine.pauses.hold(self._p)
        label = f"store.commit#{machine.numbered('store.commit')}"
        entered = machine.before(self._p, label)
        try:
            index = await machine.pauses.take(
                self._p, entered, lambda: machine.before(self._p, label)
            )
            # Recorded when the commit *starts* (``Evidence.commits``).
            machine.evidence.commit_began(conversation_id, index, records)
            await self._append(
                index,
                label,
                conversation_id,
                records,
                expected_sequence=expected_sequence,
                owner_id=owner_id,
                epoch=epoch,
            )
        finally:
            machine.pauses.finished(self._p, entered)  # the harness's bookkeeping (``Pauses``)

    async def _append(
        self,
        index: int,
        label: str,
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        """The append itself, between the boundary's sides (``append``)."""
        machine = self._p.machine
        try:
            await self._inner.append(
                conversation_id,
                records,
                expected_sequence=expected_sequence,
                owner_id=owner_id,
                epoch=epoch,
            )
        except Exception:  # a rejected append (StaleLease) has an "after" too
            machine.after(self._p, index, label)
            raise
        effective = machine.pauses.effective(self._p, index)  # after a pause inside it
        machine.world.record("commit", index, [r.sequence for r in records], _kinds(records))
        accepted = AcceptedAppend(effective, owner_id, epoch, tuple(r.sequence for r in records))
        machine.evidence.append_accepted(conversation_id, accepted)
        machine.after(self._p, index, label)

    async def load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        self._p.check_alive("store.load_checkpoints")
        return await self._inner.load_checkpoints(conversation_id)

    async def save_checkpoint(self, checkpoint: Checkpoint, *, owner_id: str, epoch: int) -> None:
        await self._op(
            "store.checkpoint",
            lambda: self._inner.save_checkpoint(checkpoint, owner_id=owner_id, epoch=epoch),
        )

    async def acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        previous = await self._inner.current_lease(conversation_id)
        lease, index = await self._op(
            "store.lease.acquire",
            lambda: self._inner.acquire_lease(conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s),
        )
        self._p.machine.world.record("lease", lease.owner_id, lease.epoch, lease.expires_at_s)
        grant = LeaseGrant(now_s, index, previous, lease)
        self._p.machine.evidence.lease_granted(conversation_id, grant)
        self._p.machine.pauses.granted(self._p)
        if previous is not None and previous.owner_id != owner_id:
            self._p.machine.took_over_from(previous.owner_id)
        self._p.released_lease = False
        return lease

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        previous = await self._inner.current_lease(lease.conversation_id)
        renewed, index = await self._op(
            "store.lease.renew", lambda: self._inner.renew_lease(lease, ttl_s=ttl_s, now_s=now_s)
        )
        renewal = LeaseGrant(now_s, index, previous, renewed)
        self._p.machine.evidence.lease_renewed(lease.conversation_id, renewal)
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        await self._op("store.lease.release", lambda: self._inner.release_lease(lease))
        # Like a takeover, a release (a graceful shutdown) that leaves a pinned request
        # unanswered hands it over: the next owner re-sends it (I11 allows one).
        self._p.machine.evidence.lease_handed_over(pinned_request=self._p.pinned_request())
        self._p.released_lease = True  # from now on, any work of this process is audited

    async def current_lease(self, conversation_id: str) -> Lease | None:
        self._p.check_alive("store.current_lease")
        return await self._inner.current_lease(conversation_id)

    def describe(self) -> str:
        return self._inner.describe()


def _kinds(records: list[EventRecord]) -> list[str]:
    return [r.event.type for r in records]


def only(exc: BaseException, kinds: type | tuple[type, ...]) -> bool:
    """True if ``exc`` (possibly a nested group) holds nothing but exceptions of ``kinds``."""
    if isinstance(exc, BaseExceptionGroup):
        return all(only(e, kinds) for e in exc.exceptions)
    return isinstance(exc, kinds)


def is_crash_only(exc: BaseException) -> bool:
    """True if ``exc`` holds nothing but crash and cancellation exceptions."""
    return only(exc, (SimulatedCrash, ProcessDead, trio.Cancelled))


def is_cancel_only(exc: BaseException) -> bool:
    """True if ``exc`` holds nothing but cancellations (a bound of the world, not a crash)."""
    return only(exc, trio.Cancelled)


def describe_exception(exc: BaseException) -> str:
    """One line for an exception or every leaf of a group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_exception(e) for e in exc.exceptions)
    return str(exc)
