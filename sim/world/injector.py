"""The crash injector: what decides and performs crashes (docs/architecture.md, 2.2).

It numbers the boundaries (the index a schedule names a crash point by, and the ``kind#n``
counters of labels such as ``store.commit#14``), decides at each one whether a crash is due (a
point of the schedule, or a timed crash whose time has come), performs it (marks the victims
dead first, loses or damages what the disk held, then has the operating system end the victims:
a simulated kill, or a real SIGKILL on the real-process host), and serves the fast sweep: it calls
the fork hook at every boundary and digests the world each crash point would leave (folding).

What it saw happen goes to the evidence recorder (``sim.world.evidence``); the machine
(``sim.world.process.Machine``) composes the two and is what every port crosses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, NoReturn, Protocol

import trio

from sim.errors import ScheduleError
from sim.world.evidence import CrashRecord, Evidence
from sim.world.faults import MAX_TEARS_PER_FILE, CrashKind, CrashPoint, Schedule, When
from sim.world.fs import SimFS
from sim.world.seeded import World, digest_of, trio_rng_state
from sim.world.storage_faults import (
    TableRow,
    aimed_fault,
    aimed_sqlite_fault,
    power_rows,
    sqlite_database,
    table_row,
)


class SimulatedCrash(BaseException):
    """Raised out of a port call at a crash boundary. A BaseException, so that no runtime
    ``except Exception`` can mistake a crash for a handled error."""

    def __init__(self, point: CrashPoint) -> None:
        super().__init__(point.text())
        self.point = point


class Victim(Protocol):
    """What the injector touches of a process (``sim.world.process.SimProcess``)."""

    id: str
    alive: bool
    released_lease: bool
    paused_until_s: float | None
    takeover_pending: bool
    open_stores: list[Any]
    scope: trio.CancelScope

    def pinned_request(self) -> bool: ...


class ForkHook(Protocol):
    """What a run needs from the fast sweep's fork plan (``sim.explore.forking.ForkPlan`` and
    ``sim.explore.folding.FoldPlan`` implement it; the exploration layer sits above one run, so
    the run sees only this protocol). Called with the injector at every boundary."""

    in_child: bool
    child_schedule: Schedule

    def fork_at(self, injector: Any, process: Any, index: int, when: When, label: str) -> None: ...

    def interrupt_guard(self) -> AbstractContextManager[None]: ...

    def finish_child(self, result: Any) -> None: ...

    def abort_child(self, exc: BaseException) -> None: ...


def end_simulated(victims: Sequence[Victim]) -> None:
    """What the operating system does to killed processes in the simulator: it closes their
    files and sockets (SQLite rolls back its open transaction on the next open, the Postgres
    server as the socket closes) and nothing of them runs again (their scopes are cancelled)."""
    for victim in victims:
        for store in victim.open_stores:
            store.abandon()
        victim.scope.cancel()


class Injector:
    """Decides and performs the crashes of one machine.

    Everything it needs is given when the machine is built (``sim.world.process.Machine``
    forwards its options); two things are set later, each by one caller, with a method saying
    so: the fork hook and the world's parts a digest covers (``fork_with``, by the runner), and a
    forked child's schedule (``reschedule``, by the forking sweep)."""

    def __init__(
        self,
        world: World,
        schedule: Schedule,
        *,
        fs: SimFS | None,
        processes: list[Any],
        evidence: Evidence,
        now: Callable[[], float],
        timed_crashes: tuple[tuple[float, str], ...] = (),
        store_root: str = "",
        count_tears: bool = False,
        on_crash: Callable[[], None] = lambda: None,
        end: Callable[[Sequence[Victim]], None] = end_simulated,
        counters: dict[str, int] | None = None,
        on_pause: Callable[[Victim, CrashPoint], None] | None = None,
    ) -> None:
        """``processes`` is the machine's own list (victims and digests read it as it grows);
        ``evidence`` receives each crash; ``now`` is the machine's clock. ``store_root``: where
        a storage fault may damage files. ``count_tears``: record, per boundary, how many
        enumerated tears a power crash there would have (``tear_counts``). ``on_crash`` runs
        after each crash (the runner extends the liveness bound). ``end`` is what the operating
        system does to the victims (``end_simulated``; the real host SIGKILLs itself and never
        returns). ``counters`` and the boundaries already in ``evidence``: numbering to carry on
        from (the real host's next process). ``timed_crashes``: (time, kind) as the scenario
        writes them (``TimedCrashDef``); a kind stays text, which a digest covers by ``repr``.
        ``on_pause``: what takes a ``pause`` point (the machine's ``Pauses``; None: refused)."""
        self.world = world
        self.schedule = schedule
        self.fs = fs
        self._processes = processes
        self._evidence = evidence
        self._now = now
        self._timed = sorted(timed_crashes)
        self.store_root = store_root
        self._on_crash = on_crash
        self._end = end
        self._on_pause = on_pause
        self._next_index = len(evidence.boundaries)
        self._counters: dict[str, int] = {} if counters is None else counters
        # (index, when) -> enumerated tears of a power crash there; None: not counted.
        self.tear_counts: dict[tuple[int, When], int] | None = {} if count_tears else None
        self.fork_plan: ForkHook | None = None  # during a fast sweep's forking (or folding) run
        self._state_parts: Callable[[], list[tuple[str, Any]]] = lambda: []
        self._stop: Callable[[], None] = lambda: None
        # After a storage fault: (what was damaged, the files as the disk then held them).
        self.damaged: tuple[dict[str, str], dict[str, bytes], dict[str, int]] | None = None
        # The disk as it was just before the storage fault: what the runtime had acknowledged,
        # read by the judge for a conversation nobody opened after the damage (latent damage).
        self.before_damage: SimFS | None = None
        # The damage table's record of each file the latest storage fault damaged (None: the
        # fault maps to no record, which the damage-table oracle reports as a harness error),
        # or of each log the latest power loss left with a tail that holds acknowledged commits
        # (``power_rows``): what the recovery after the crash must answer as the table says.
        self.damage_rows: dict[str, TableRow | None] = {}

    def fork_with(
        self,
        hook: ForkHook,
        state_parts: Callable[[], list[tuple[str, Any]]],
        *,
        stop: Callable[[], None],
    ) -> None:
        """Set by the simulator's runner (``sim.run.runner``) before the world starts, for a fast
        sweep's run: ``hook`` is called at every boundary, ``state_parts`` gives what, outside
        the processes, a digest must cover (``state_digests``), each part by name, and ``stop``
        ends the world where it stands (``stop_world``)."""
        self.fork_plan = hook
        self._state_parts = state_parts
        self._stop = stop

    def stop_world(self) -> None:
        """End the world at this boundary (a hook's call: a run pruned where it rejoined the
        fault-free run). Every live process dies as a crash ends it, without damage: its ports
        refuse every later call, so whatever it runs before trio cancels it at its next await
        reaches nothing. The runner (``stop``) starts no process again and records where
        (``Trace.halted_at``: the next boundary's index)."""
        victims = [p for p in self._processes if p.alive]
        for victim in victims:
            victim.alive = False
        self.world.record("halt", self._next_index)
        self._end(victims)
        self._stop()

    def world_parts(self) -> list[tuple[str, Any]]:
        """What, outside the processes, decides the world's future, by name (a hook's view)."""
        return self._state_parts()

    def crashed_at(self, point: CrashPoint) -> bool:
        """Whether the crash at ``point`` has happened (a boundary inside an operation whose
        ``after`` is the crash point comes before the crash: a hook tells the two apart here)."""
        return any(record.point == point for record in self._evidence.crashes)

    def processes(self) -> list[Victim]:
        """The machine's processes so far, dead ones included, in the order they started."""
        return list(self._processes)

    def reschedule(self, schedule: Schedule) -> None:
        """Set by the fast sweep in a child it has just forked (``sim.explore.forking``): the
        child runs on under its own schedule, the crash it is about to take included."""
        self.schedule = schedule

    # -- numbering -----------------------------------------------------------------------------

    def numbered(self, kind: str) -> int:
        """The next number of a label kind (``store.commit#14``), counted across processes."""
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

    def enter(self) -> int:
        """Number a boundary being entered."""
        index = self._next_index
        self._next_index += 1
        return index

    # -- at a boundary -------------------------------------------------------------------------

    def before(self, process: Victim, index: int, label: str, now: float) -> None:
        """Boundary ``index`` is entered at ``now``: crash here if the schedule says so, or if
        the next timed crash's time has come."""
        self.count_tears(index, When.BEFORE)
        point = self.schedule.at(index, When.BEFORE)
        if point is None and self._timed and now >= self._timed[0][0]:
            point = CrashPoint(index, When.BEFORE, CrashKind(self._timed.pop(0)[1]))
        self._crash_or_fork(process, point, index, When.BEFORE, label)

    def after(self, process: Victim, index: int, label: str) -> None:
        """Boundary ``index``'s operation has returned: crash here if the schedule says so."""
        self.count_tears(index, When.AFTER)
        point = self.schedule.at(index, When.AFTER)
        self._crash_or_fork(process, point, index, When.AFTER, label)

    def _crash_or_fork(
        self, process: Victim, point: CrashPoint | None, index: int, when: When, label: str
    ) -> None:
        """Crash at ``point`` if there is one, else let the fork hook fork (or digest) the crash
        points of this boundary side."""
        if point is not None:
            self.strike(process, point, label)
        if self.fork_plan is not None:
            self.fork_plan.fork_at(self, process, index, when, label)

    def count_tears(self, index: int, when: When) -> None:
        """Record how many enumerated tears a power crash here would have (the traced run of a
        sweep: the naive sweep's schedules need the count before running them)."""
        if self.tear_counts is not None and self.fs is not None:
            n = len(self.fs.tear_points(limit_per_file=MAX_TEARS_PER_FILE))
            if n:
                self.tear_counts[(index, when)] = n

    # -- crashing ------------------------------------------------------------------------------

    def strike(self, process: Victim, point: CrashPoint, label: str) -> None:
        """Take ``point`` in ``process``: a crash (never returns), or a pause, which returns --
        the process stops when the boundary's caller awaits (``sim.world.process.Pauses``)."""
        if point.kind != "pause":
            self.crash(process, point, label)
        if self._on_pause is None:
            raise ScheduleError(f"{point.text()}: this machine takes no pause ({label})")
        self.world.record("pause-point", point.text(), label, process.id)
        self._on_pause(process, point)

    def crash(self, process: Victim, point: CrashPoint, label: str) -> NoReturn:
        """Crash at ``point`` in ``process``: every victim is marked dead *first* (a port of a
        dead process refuses every call), the disk loses or damages what the crash kind says,
        the crash is recorded, and the operating system ends the victims."""
        machine_wide = point.kind in ("power", "storage")  # the host goes down, not one process
        victims = [p for p in self._processes if p.alive] if machine_wide else [process]
        # A request handed over by a lease release is counted there, not again by a crash.
        pinned = any(p.pinned_request() and not p.released_lease for p in victims)
        for victim in victims:
            victim.alive = False
        outcome = self._damage(point)
        rows = dict(self.damage_rows) if point.kind in ("power", "storage") else {}
        record = CrashRecord(
            point, label, process.id, self._now(), pinned, outcome, self._next_index, rows
        )
        self._evidence.crashed(record)
        self.world.record("crash", point.text(), label, process.id, sorted(outcome.items()))
        self._end(victims)
        self._on_crash()
        raise SimulatedCrash(point)

    def _damage(self, point: CrashPoint) -> dict[str, str]:
        """What a power loss or a storage fault does to the disk (a process kill: nothing)."""
        if point.kind == "process":
            return {}
        assert self.fs is not None, "power and storage need SimFS"
        if point.kind == "power":
            tear = self._tear_of(point)
            if tear is False:
                n = len(self.fs.tear_points(limit_per_file=MAX_TEARS_PER_FILE))
                raise ScheduleError(f"{point.text()}: this point has {n} enumerated tears")
            lost = self.fs.power_loss(self.world.rng(self._power_stream(point)), tear=tear)
            self.damage_rows = power_rows(self.fs, lost)
            if self.damaged is not None:
                # After an earlier storage fault, the evidence a refusing recovery must leave
                # as found is what the disk holds *now*: the power took the page cache the
                # fault's snapshot still held, and no process took it (I13).
                self.damaged = (self.damaged[0], self.fs.snapshot(), self.fs.inode_numbers())
            return lost
        # A storage fault: the page cache survives (as for a kill); the disk damages synced
        # data under the store's root. What it left is the evidence a refusing recovery must
        # not touch.
        before = self.fs.clone(deep=True)
        outcome = self._storage_fault(point, before)
        self.damaged = (outcome, self.fs.snapshot(), self.fs.inode_numbers())
        self.before_damage = before
        return outcome

    def _storage_fault(self, point: CrashPoint, before: SimFS) -> dict[str, str]:
        """Damage synced data under the store's root and record the damage table's row of each
        file damaged (``damage_rows``); the outcome, ``{path: KIND:DETAIL}``.

        Aimed faults strike the scenario's own conversation only: a sub-agent's child is
        opened again only if its call re-runs, and the judge's read of it is no recovery that
        could refuse a cut it cannot see (docs/crash-model.md, "Not modelled"). On SQLite
        every fault is aimed, and tried on a copy first: SQLite keeps no checksum of its
        pages, so a byte drawn anywhere would be read back as data (``aimed_sqlite_fault``)."""
        assert self.fs is not None
        main = self._evidence.main_conversation
        database = sqlite_database(self.fs, self.store_root)
        if database is not None:
            if not main:
                self.damage_rows = {}
                return {}
            rng = self.world.rng(f"storage:{point.text()}")
            outcome, self.damage_rows = aimed_sqlite_fault(
                self.fs, rng, database=database, conversation=main
            )
            return outcome
        aimed = self.world.rng(f"storage-aimed:{point.text()}")
        under = f"{self.store_root}/{main}" if main else self.store_root
        outcome = aimed_fault(self.fs, aimed, under=under) or self.fs.damage_synced(
            self.world.rng(f"storage:{point.text()}"), under=self.store_root
        )
        self.damage_rows = {
            path: table_row(before, self.fs, path, fault) for path, fault in outcome.items()
        }
        return outcome

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

    # -- folding -------------------------------------------------------------------------------

    def state_digests(self, process: Victim, points: Sequence[CrashPoint]) -> list[str | None]:
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
        if sum(1 for p in self._processes if p.alive) != 1 or self.fs is None:
            return [None] * len(points)
        files_of = self._files_left(self.fs, points)
        if all(files is None for files in files_of):
            return [None] * len(points)  # e.g. storage faults only: the rest is not needed
        shared: list[Any] = [
            trio.current_time(),
            trio_rng_state(),
            sorted(self.world.ids._next.items()),
            self._timed,
            [(p.id, p.alive, p.paused_until_s, p.takeover_pending) for p in self._processes],
            self._evidence.handovers_with_pinned_request,
            process.pinned_request() and not process.released_lease,
            self._state_parts(),
        ]
        return [
            None if files is None else digest_of([point.kind, *files, *shared])
            for point, files in zip(points, files_of, strict=True)
        ]

    def _files_left(self, fs: SimFS, points: Sequence[CrashPoint]) -> list[list[Any] | None]:
        """Per point of ``state_digests``: the files its crash leaves (None: it cannot tell)."""
        seen_files: list[Any] | None = None  # the files processes see, if a point needs them

        def files_seen() -> list[Any]:
            nonlocal seen_files
            if seen_files is None:
                seen_files = sorted(fs.snapshot().items())
            return seen_files

        files_of: list[list[Any] | None] = []
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
        return files_of
