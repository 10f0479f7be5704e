"""Simulated processes, their ports, and crashes (docs/architecture.md, 2.2).

A ``SimProcess`` is one runtime instance with its own owner id and cancel scope. Every port it is
given crosses labelled boundaries through the ``Machine``'s injector and refuses every call once the
process is dead. A crash marks the process dead *first*, then cancels its scope and raises
``SimulatedCrash`` out of the port call: so no ``finally`` or ``__aexit__`` of the runtime can touch
the world after the crash instant (any port call they make is refused), exactly like kill -9.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import trio

from durable.events import EventRecord
from durable.store.base import Checkpoint, Lease
from sim.world.faults import (
    MAX_TEARS_PER_FILE,
    Boundary,
    CrashKind,
    CrashPoint,
    Schedule,
    ScheduleError,
    boundary_kind,
)
from sim.world.fs import SimFS
from sim.world.seeded import World, digest_of, seed_process_scheduler, trio_rng_state

T = TypeVar("T")


class ForkHook(Protocol):
    """What a run needs from the fast sweep's fork plan (``sim.explore.forking.ForkPlan`` implements
    it; the exploration layer sits above one run, so the run sees only this protocol)."""

    in_child: bool
    child_schedule: Schedule

    def fork_at(self, machine: Any, process: Any, index: int, when: str, label: str) -> None: ...

    def finish_child(self, result: Any) -> None: ...

    def abort_child(self, exc: BaseException) -> None: ...


class SimulatedCrash(BaseException):
    """Raised out of a port call at a crash boundary. A BaseException, so that no runtime
    ``except Exception`` can mistake a crash for a handled error."""

    def __init__(self, point: CrashPoint) -> None:
        super().__init__(point.text())
        self.point = point


class ProcessDead(BaseException):
    """A dead process called a port: refused (a killed process cannot touch the world)."""


@dataclass(frozen=True)
class CrashRecord:
    point: CrashPoint
    label: str
    process: str
    time_s: float
    pinned_request: bool
    fs_outcome: dict[str, str] = field(default_factory=dict)  # power loss or storage damage
    # How many boundaries had been entered when the process died: an ``after`` crash of a
    # store commit comes after the commit's own file operations, which have higher indexes.
    boundaries_entered: int | None = None


@dataclass(frozen=True)
class LeaseGrant:
    """A lease acquisition: what the store held just before, and what it granted."""

    time_s: float
    boundary: int
    previous: Lease | None
    granted: Lease


@dataclass(frozen=True)
class AcceptedAppend:
    """An append the store accepted (returned from), with the lease it was written under."""

    boundary: int
    owner_id: str
    epoch: int
    sequences: tuple[int, ...]


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
        self.error: str | None = None
        self.slot = 0  # the worker slot it runs in (a scenario's second worker is slot 1)
        # Released its lease (and not acquired one since): it must do no more work (I8).
        self.released_lease = False

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


class Machine:
    """The host: SimFS, the injector, the processes. Outlives every process.

    ``sim.world.realhost.RealMachine`` is the same machine over real time and a real kill: the
    boundary numbering, the schedule and timed crashes, and the records the oracles read are
    this class's, for both hosts."""

    def __init__(
        self,
        world: World,
        schedule: Schedule,
        *,
        fs: SimFS | None,
        timed_crashes: tuple[tuple[float, CrashKind], ...] = (),
    ) -> None:
        self.world = world
        self.schedule = schedule
        self._timed = sorted(timed_crashes)
        self.fs = fs
        self.boundaries: list[Boundary] = []
        self.crashes: list[CrashRecord] = []
        self.processes: list[SimProcess] = []
        self.commits: list[tuple[int, list[EventRecord]]] = []
        self.grants: list[LeaseGrant] = []
        self.renewals: list[LeaseGrant] = []  # (stored before, renewed): I8 audits them too
        self.accepted: list[AcceptedAppend] = []
        # The scenario's conversation: the lists above hold its commits and leases only. A
        # sub-agent's child conversation (``durable.subagent``) is recorded apart, by id, in
        # ``child_commits`` (I20 judges children); None: every conversation's go above.
        self.main_conversation: str | None = None
        self.child_commits: dict[str, list[tuple[int, list[EventRecord]]]] = {}
        self.handovers_with_pinned_request = 0
        self.fork_plan: ForkHook | None = None  # during a fast sweep's forking run
        self.forked_child = False
        self.state_parts: Callable[[], list[Any]] = lambda: []
        self._next_index = 0
        self._counters: dict[str, int] = {}
        self.on_crash: Callable[[], None] = lambda: None
        self.store_root = ""  # where a storage fault may damage files
        # Work (a commit, a tool effect, a model call) a process began after releasing its lease.
        self.after_release: list[str] = []
        # (index, when) -> enumerated tears of a power crash there; None: not counted.
        self.tear_counts: dict[tuple[int, str], int] | None = None
        # After a storage fault: (what was damaged, the files as the disk then held them).
        self.damaged: tuple[dict[str, str], dict[str, bytes], dict[str, int]] | None = None
        # The disk as it was just before the storage fault: what the runtime had acknowledged,
        # read by the judge for a conversation nobody opened after the damage (latent damage).
        self.before_damage: SimFS | None = None

    def spawn(self) -> SimProcess:
        process = SimProcess(self, len(self.processes) + 1)
        self.processes.append(process)
        self.world.record("spawn", process.id)
        if self.crashes:  # a restart: see ``seed_process_scheduler``
            seed_process_scheduler(self.world.seed, process.number)
        return process

    def now(self) -> float:
        """The machine's clock: trio's (virtual, under the simulator's ``MockClock``)."""
        return trio.current_time()

    async def sleep_until(self, deadline_s: float) -> None:
        await trio.sleep_until(deadline_s)

    def numbered(self, kind: str) -> int:
        n = self._counters.get(kind, 0) + 1
        self._counters[kind] = n
        return n

    @property
    def next_index(self) -> int:
        """The index the next boundary will get: every commit begun so far started below it
        (the client stamps a rejection with it, so I16 can tell which commits came before)."""
        return self._next_index

    @property
    def faults_over(self) -> bool:
        return self._next_index > self.schedule.last_index

    # -- boundaries ----------------------------------------------------------------------------

    def before(self, process: SimProcess, label: str) -> int:
        process.check_alive(label)
        index = self._next_index
        self._next_index += 1
        now = self.now()
        self.boundaries.append(Boundary(index, label, process.id, now))
        self.world.record("b", index, label, process.id)
        if process.released_lease and boundary_kind(label) in ("commit", "tool", "model"):
            self.after_release.append(f"{label} (boundary {index}) by {process.id}")
        self.count_tears(index, "before")
        point = self.schedule.at(index, "before")
        if point is None and self._timed and now >= self._timed[0][0]:
            point = CrashPoint(index, "before", self._timed.pop(0)[1])
        if point is not None:
            self.crash(process, point, label)
        if self.fork_plan is not None:
            self.fork_plan.fork_at(self, process, index, "before", label)
        return index

    def count_tears(self, index: int, when: str) -> None:
        """Record how many enumerated tears a power crash here would have (the traced run of a
        sweep: the naive sweep's schedules need the count before running them)."""
        if self.tear_counts is not None and self.fs is not None:
            n = len(self.fs.tear_points(limit_per_file=MAX_TEARS_PER_FILE))
            if n:
                self.tear_counts[(index, when)] = n

    def after(self, process: SimProcess, index: int, label: str) -> None:
        self.count_tears(index, "after")
        point = self.schedule.at(index, "after")
        if point is not None:
            self.crash(process, point, label)
        if self.fork_plan is not None:
            self.fork_plan.fork_at(self, process, index, "after", label)

    def state_digests(self, process: SimProcess, points: Sequence[CrashPoint]) -> list[str | None]:
        """For each of ``points`` (the crash points of one boundary side, in ``process``), a
        digest of everything a crash there leaves for the future; two crash points with equal
        digests have identical futures, so a sweep runs one of them (docs/architecture.md, 2.5).

        A process kill keeps everything written: the files as processes see them. A power loss
        keeps what its seeded draw (or enumerated tear) leaves, computed here on a clone of
        SimFS without losing anything: crash points between two fsyncs whose losses leave the
        same files fold together. Either way the rest of the world counts too: external
        services, the client's view, the model's call log, ids, virtual time, trio's scheduler
        state, pending timed crashes, and whether the dying process had a request pinned
        (I11's allowance). None when it cannot tell: more than one process alive (the
        survivors' memory would count), no SimFS, a storage fault, or a power loss with timed
        crashes still to come (the files' sync history would count).

        The points of one side share everything but the files a crash leaves, so the shared
        parts and the files a kill leaves are computed once per call, not once per point."""
        if sum(1 for p in self.processes if p.alive) != 1 or self.fs is None:
            return [None] * len(points)
        fs = self.fs
        seen_files: list[Any] | None = None  # the files processes see, if a point needs them

        def files_seen() -> list[Any]:
            nonlocal seen_files
            if seen_files is None:
                seen_files = sorted(fs.snapshot().items())
            return seen_files

        files_of: list[list[Any] | None] = []  # per point: the files its crash leaves
        for point in points:
            files: list[Any] | None = None
            if point.kind == "process":
                files = [files_seen()]
                if any(kind == "power" for _, kind in self._timed):
                    # A power loss is still to come: what is durable (and what is a rewrite in
                    # flight) decides its outcomes, not only what the processes see.
                    files += [sorted(fs.durable_snapshot().items()), fs.rewritten_paths()]
            elif point.kind == "power" and not self._timed:
                if not fs.has_pending():
                    files = [files_seen()]
                else:
                    tear = self._tear_of(point)
                    if tear is not False:  # False: no such tear; the child reports the error
                        scratch = fs.clone()
                        rng = self.world.fresh_rng(self._power_stream(point))
                        scratch.power_loss(rng, tear=tear)
                        files = [sorted(scratch.snapshot().items())]
            files_of.append(files)
        if all(files is None for files in files_of):
            return [None] * len(points)  # e.g. storage faults only: the rest is not needed
        shared: list[Any] = [
            trio.current_time(),
            trio_rng_state(),
            sorted(self.world.ids._next.items()),
            self._timed,
            [(p.id, p.alive, p.paused_until_s) for p in self.processes],
            self.handovers_with_pinned_request,
            process.pinned_request() and not process.released_lease,
            self.state_parts(),
        ]
        return [
            None if files is None else digest_of([point.kind, *files, *shared])
            for point, files in zip(points, files_of, strict=True)
        ]

    @staticmethod
    def _power_stream(point: CrashPoint) -> str:
        """One RNG stream per crash point: each point's power loss draws its own outcome (kept,
        torn at a block, or lost), so a sweep exercises all of them, not one per seed."""
        return f"power:{point.text()}"

    def _tear_of(self, point: CrashPoint) -> tuple[str, int] | Literal[False] | None:
        """The enumerated tear a power crash at ``point`` makes (None: the seeded draw decides;
        False: the point names a tear this boundary does not have)."""
        if not point.tear:
            return None
        assert self.fs is not None
        tears = self.fs.tear_points(limit_per_file=MAX_TEARS_PER_FILE)
        return tears[point.tear - 1] if point.tear <= len(tears) else False

    def crash(self, process: SimProcess, point: CrashPoint, label: str) -> None:
        machine_wide = point.kind in ("power", "storage")  # the host goes down, not one process
        victims = [p for p in self.processes if p.alive] if machine_wide else [process]
        # A request handed over by a lease release is counted there, not again by a crash.
        pinned = any(p.pinned_request() and not p.released_lease for p in victims)
        for victim in victims:
            victim.alive = False
        outcome: dict[str, str] = {}
        assert self.fs is not None or point.kind == "process", "power and storage need SimFS"
        if point.kind == "power":
            tear = self._tear_of(point)
            if tear is False:
                n = len(self.fs.tear_points(limit_per_file=MAX_TEARS_PER_FILE))
                raise ScheduleError(f"{point.text()}: this point has {n} enumerated tears")
            outcome = self.fs.power_loss(self.world.rng(self._power_stream(point)), tear=tear)
        elif point.kind == "storage":
            # The page cache survives (as for a kill); the disk damages synced data under the
            # store's root. What it left is the evidence a refusing recovery must not touch.
            before = self.fs.clone(deep=True)
            outcome = self.fs.damage_synced(
                self.world.rng(f"storage:{point.text()}"), under=self.store_root
            )
            self.damaged = (outcome, self.fs.snapshot(), self.fs.inode_numbers())
            self.before_damage = before
        now = self.now()
        record = CrashRecord(point, label, process.id, now, pinned, outcome, self._next_index)
        self.crashes.append(record)
        self.world.record("crash", point.text(), label, process.id, sorted(outcome.items()))
        for victim in victims:
            for store in victim.open_stores:
                # The OS closes a killed process's files and sockets: SQLite rolls back its open
                # transaction on the next open, the Postgres server as the socket closes.
                store.abandon()
            victim.scope.cancel()
        self.on_crash()
        raise SimulatedCrash(point)

    def crossing(self, process: SimProcess, label: str, fn: Callable[[], T]) -> T:
        return cross(self, process, label, fn)


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
            self._mutate("write", f"{path}@{offset}", lambda c=chunk: self._write_more(path, c))

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
        return self._p.machine.crossing(self._p, label, fn)


class SimIds:
    def __init__(self, process: SimProcess, world: World) -> None:
        self._p = process
        self._world = world

    def new(self, kind: str) -> str:
        self._p.check_alive("ids.new")
        return self._world.ids.new(kind)


class InstrumentedStore:
    """Wraps a process's store so each logical store operation is a labelled boundary too
    (``store.commit#14``), and records what each commit made durable (for I6 and I12)."""

    def __init__(self, inner: Any, process: SimProcess) -> None:
        self._inner = inner
        self._p = process

    def _is_child(self, conversation_id: str) -> bool:
        """A conversation other than the scenario's: a sub-agent's child (``Machine``)."""
        main = self._p.machine.main_conversation
        return main is not None and conversation_id != main

    async def _op(self, kind: str, call: Callable[[], Any]) -> Any:
        machine = self._p.machine
        label = f"{kind}#{machine.numbered(kind)}"
        index = machine.before(self._p, label)
        try:
            result = await call()
        except Exception:  # a refused operation (LeaseHeld, StaleLease) has an "after" too
            machine.after(self._p, index, label)
            raise
        machine.after(self._p, index, label)
        return result, index

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
        label = f"store.commit#{machine.numbered('store.commit')}"
        index = machine.before(self._p, label)
        # Recorded when the commit *starts*: a crash inside the store (after its write, before
        # its fsync) may still leave it durable. Oracles keep only commits found in the final log.
        child = self._is_child(conversation_id)
        if child:
            machine.child_commits.setdefault(conversation_id, []).append((index, records))
        else:
            machine.commits.append((index, records))
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
        machine.world.record("commit", index, [r.sequence for r in records], _kinds(records))
        if not child:
            machine.accepted.append(
                AcceptedAppend(index, owner_id, epoch, tuple(r.sequence for r in records))
            )
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
        if not self._is_child(conversation_id):
            self._p.machine.grants.append(LeaseGrant(now_s, index, previous, lease))
        self._p.released_lease = False
        return lease

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        previous = await self._inner.current_lease(lease.conversation_id)
        renewed, index = await self._op(
            "store.lease.renew", lambda: self._inner.renew_lease(lease, ttl_s=ttl_s, now_s=now_s)
        )
        if not self._is_child(lease.conversation_id):
            self._p.machine.renewals.append(LeaseGrant(now_s, index, previous, renewed))
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        await self._op("store.lease.release", lambda: self._inner.release_lease(lease))
        # Like a takeover, a release (a graceful shutdown) that leaves a pinned request
        # unanswered hands it over: the next owner re-sends it (I11 allows one).
        self._p.machine.handovers_with_pinned_request += int(self._p.pinned_request())
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
