"""The fast sweep: share the fault-free prefix by forking at every crash point.

A naive sweep re-runs the whole scenario for every crash point: the prefix before the crash is
computed again and again. Here one *forking run* executes the fault-free schedule once; at every
boundary ``before`` and ``after`` it forks a child per crash kind. The child is an exact copy of
the world at that instant (trio's run state, SimFS, services, client, RNG streams), crashes
right there, runs the recovery and the rest of the scenario, judges the run with every oracle and
writes its outcome to a file; the parent goes on with the fault-free run. Up to ``jobs`` children
run at once (one per core).

Two further savings, both keeping every verdict identical to the naive sweep's (a test compares
the two on the bundled scenarios):

- **equivalent crashes run once.** Crash points whose worlds after the crash are identical have
  identical futures (``sim.explore.folding``): the sweep's traced run lists them (``twin_of``),
  the first is forked, the others inherit its verdict.
- **I10 by second children.** Determinism is checked by forking the same crash point twice and
  comparing the children's fingerprints; the shared prefix is checked once, by comparing the
  forking run's fingerprint with the reference run's.

SQLite files live on a real directory: a child copies the database and its WAL to a directory of
its own before crashing, and never touches (or closes) the connections it inherited.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from sim.explore import interrupts
from sim.explore.recording import Judged
from sim.judgement.judge import judge
from sim.run.result import RunResult
from sim.world.faults import (
    CrashKind,
    CrashPoint,
    Schedule,
    When,
    parse_schedule,
    sweep_points,
)
from sim.world.injector import Injector, Victim

# Called in a forked child about to exit, with its schedule's text. A layer above registers them
# (``sim.explore.reach`` while measuring coverage); the list is empty in every ordinary sweep, so
# the fork layer never imports what sits above it.
CHILD_EXIT_HOOKS: list[Callable[[str], None]] = []

# Forking inside trio.run needs a private epoll instance per child (``_private_trio_io``): Linux.
AVAILABLE = hasattr(os, "fork") and hasattr(select, "epoll")


@dataclass
class _Child:
    """A running child, as the parent tracks it."""

    pid: int
    schedule: str
    path: str  # where it writes its outcome
    deadline: float  # time.monotonic() after which it is killed
    counted: bool = True  # counts as one schedule of progress (I10's second child does not)
    timed_out: bool = False


@dataclass
class ForkPlan:
    """Configuration and bookkeeping of one forking run (in the parent; children get a copy)."""

    base: Schedule
    kinds: tuple[CrashKind, ...]
    reference: RunResult  # the fault-free run of the base schedule
    reruns: Callable[[str], bool]  # whether a schedule (text) gets a second child for I10
    # (index, when) -> enumerated tears of a power crash there: the traced run's count, so the
    # fast and naive sweeps list the same schedules by construction.
    tears: dict[tuple[int, When], int]
    jobs: int
    workdir: str
    in_child: bool = False
    child_out: str = ""
    child_schedule: Schedule = field(default_factory=Schedule)
    child_copy: int = 0  # in a child: 0, or 1 for the second child of an I10 rerun
    child_timeout_s: float = 300.0  # wall time a child may take before it is killed
    running: list[_Child] = field(default_factory=list)
    done: list[tuple[str, str]] = field(default_factory=list)  # schedule, path
    # schedule text -> the schedule whose future it shares (``sim.explore.folding.FoldPlan``)
    twin_of: dict[str, str] = field(default_factory=dict)
    equivalent: list[tuple[str, str]] = field(default_factory=list)  # schedule, twin of
    order: list[str] = field(default_factory=list)  # schedules in sweep order
    progress: Callable[[int], None] | None = None  # called with 1 per finished child
    # Which points this run forks, by schedule text (``sim.explore.sweep.Roots``: a campaign
    # unit's share); every point by default. A point it does not own is neither run nor listed.
    owns: Callable[[str], bool] = field(default=lambda text: True)
    # Stop at the first failure (``durable-sim mutants``): once a child fails, points that come
    # after it in the sweep's order are neither forked nor listed (none of them can be the
    # first failure); the sweep's order, not the forks', is what a failure is first in.
    stop_at_first_failure: bool = False
    first_failure: tuple[int, int, int] | None = None  # the order key of the earliest so far

    # -- in the parent ---------------------------------------------------------------------------

    def interrupt_guard(self) -> contextlib.AbstractContextManager[None]:
        """Around the forking run, inside ``trio.run``: a SIGINT records the stop before trio
        handles it (``sim.explore.interrupts.flag_interrupts``), so an interrupt swallowed by an
        after-fork hook still stops the sweep at its next fork or wait."""
        return interrupts.flag_interrupts()

    def fork_at(
        self, injector: Injector, process: Victim, index: int, when: When, label: str
    ) -> None:
        """Called by the machine's injector at every boundary of the forking run."""
        if index <= self.base.last_index or self.in_child:
            return
        n_tears = self.tears.get((index, when), 0)
        for point in sweep_points(index, when, label, self.kinds, n_tears):
            if self._fork_point(injector, process, point, label):
                return  # a child that took a pause runs on from here: it forks nothing

    def _fork_point(
        self, injector: Injector, process: Victim, point: CrashPoint, label: str
    ) -> bool:
        """Fork the children of ``point``; True in a child (which runs on from here)."""
        schedule = Schedule.of(*self.base.points, point)
        text = schedule.text()
        if not self.owns(text):
            return False
        if self.first_failure is not None and self._key(point) > self.first_failure:
            return False
        self.order.append(text)
        twin = self.twin_of.get(text)
        if twin is not None:  # its future is twin's: see ``sim.explore.folding``
            self.equivalent.append((text, twin))
            if self.progress is not None:
                self.progress(1)
            return False
        for copy in range(2 if self.reruns(text) else 1):
            if self._spawn(injector, process, point, label, schedule, copy):
                return True
        return False

    def _spawn(
        self,
        injector: Injector,
        process: Victim,
        point: CrashPoint,
        label: str,
        schedule: Schedule,
        copy: int,
    ) -> bool:
        """Fork one child for ``point``: False in the parent; in the child, the crash raises,
        or a pause returns True."""
        interrupts.stop_if_requested()
        while len(self.running) >= self.jobs:
            self._reap_one()
        path = os.path.join(self.workdir, f"{len(self.done) + len(self.running)}-{copy}.json")
        # Everything alive now moves to the permanent generation: a child's collections then
        # skip the inherited heap instead of touching (and copying) every page of it (a child's
        # full collection: ~34 ms unfrozen, ~5 ms frozen). The parent unfreezes when done.
        gc.freeze()
        mask = interrupts.hold()  # an interrupt waits until each side knows which it is
        pid = os.fork()
        if pid == 0:  # the child: crash here, run on, report, exit without cleanup
            # Mark the child first: whatever fails from here on must end in ``abort_child``
            # (this process exits), never unwind into the parent's frames as a second parent.
            self.in_child = True
            # No cyclic collection in a child: it runs one schedule's suffix and exits, so its
            # garbage is bounded by one run (a few MB for ``long_horizon``), and exit frees it
            # all at once. The collections it skips were ~4 % of the children's CPU in a
            # 50-turn ``long_horizon`` sweep (117 -> 112 s; little, as the inherited heap is
            # frozen, but nothing in a child needs them).
            gc.disable()
            self.running = []
            self.child_out = path
            self.child_schedule = schedule
            self.child_copy = copy
            try:
                interrupts.release(mask)
                _private_trio_io()
                injector.reschedule(schedule)
            except BaseException as exc:  # the child must report and exit, whatever happened
                self.abort_child(exc)
            # A crash raises here; a pause returns, and the process stops when the boundary's
            # caller awaits (``sim.world.process.Pauses``).
            injector.strike(process, point, label)
            return True
        deadline = time.monotonic() + self.child_timeout_s
        self.running.append(_Child(pid, schedule.text(), path, deadline, copy == 0))
        interrupts.release(mask)  # the child is in the books: an interrupt now kills it too
        return False

    def _reap_one(self) -> None:
        """Wait for one child to end, or kill the first that overruns its wall-time bound (a
        hung child must not hang the sweep: it gets an ``error`` verdict instead)."""
        assert self.running and not self.in_child
        while True:
            interrupts.stop_if_requested()
            for child in self.running:
                pid, status = os.waitpid(child.pid, os.WNOHANG)
                if pid:
                    self._finish(child, status)
                    return
            now = time.monotonic()
            overdue = min(self.running, key=lambda c: c.deadline)
            if now >= overdue.deadline:
                os.kill(overdue.pid, signal.SIGKILL)
                _, status = os.waitpid(overdue.pid, 0)
                overdue.timed_out = True
                self._finish(overdue, status)
                return
            wait_for_exit(
                [c.pid for c in self.running], min(overdue.deadline - now, interrupts.STOP_CHECK_S)
            )

    def _finish(self, child: _Child, status: int) -> None:
        self.running.remove(child)
        code = os.waitstatus_to_exitcode(status)
        if child.timed_out:
            error = f"child did not finish within {self.child_timeout_s:g} s of wall time"
            _write_outcome(child.path, {"error": error})
        elif not Path(child.path).exists():
            error = f"child exited with status {code} without reporting an outcome"
            _write_outcome(child.path, {"error": error})
        self.done.append((child.schedule, child.path))
        if self.stop_at_first_failure and _failed(child.path):
            key = self._key(parse_schedule(child.schedule).points[-1])
            self.first_failure = min(key, self.first_failure or key)
        if self.progress is not None and child.counted:
            self.progress(1)

    def wait_all(self) -> None:
        """After the forking run: every child reaped. A stop requested during the run's last
        stretch (an interrupt a SQLite call dropped: ``interrupts.record_dropped``) unwinds here,
        before the run's fingerprint is compared with the traced run's: the interrupted run
        differs, and that is no I10."""
        interrupts.stop_if_requested()
        while self.running:
            self._reap_one()
        gc.unfreeze()  # the forking run is over: its objects may be collected again

    def kill_running(self) -> None:
        """On the way out of an interrupted sweep: no child may outlive it, and what was frozen
        before forking may be collected again (``wait_all`` does it on the normal way out)."""
        if self.in_child:
            return
        gc.unfreeze()
        for child in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)
            self.running.remove(child)

    def ordered(self) -> list[str]:
        """Schedules in the naive sweep's order (boundary, before/after, kind): boundaries nest
        (a store commit's ``after`` comes after its file operations), so fork order differs."""
        return sorted(self.order, key=lambda text: self._key(parse_schedule(text).points[-1]))

    def _key(self, point: CrashPoint) -> tuple[int, int, int]:
        """A crash point's place in the naive sweep's order (its tears share it: they are
        listed in tear order, which ``sorted`` keeps)."""
        kind = self.kinds.index(CrashKind(point.kind))
        return (point.index, 0 if point.when == "before" else 1, kind)

    # -- in the child ----------------------------------------------------------------------------

    def finish_child(self, result: RunResult) -> None:
        """Judge the child's run, write the outcome, and leave without any cleanup."""
        try:
            judged = Judged.of_run(judge(result, self.reference, determinism=False), result)
            doc: dict[str, object] = {
                "schedule": result.schedule.text(),
                "fingerprint": result.trace.fingerprint,
                **judged.to_json(),
            }
        except BaseException as exc:  # the child must always report and exit
            doc = {"error": f"{type(exc).__name__}: {exc}"}
        self._leave(doc, 0)

    def abort_child(self, exc: BaseException) -> None:
        """A child whose run raised (or was interrupted): report it and exit at once. Unwinding
        further would run the *parent's* cleanup (its temporary directories) in the child."""
        self._leave({"error": f"{type(exc).__name__}: {exc}"}, 1)

    def _leave(self, doc: dict[str, object], code: int) -> None:
        """Write the outcome (atomically: the parent never reads half of one) and exit, even if
        writing fails (a full disk): the parent then reports the missing outcome."""
        assert self.in_child
        try:
            for hook in CHILD_EXIT_HOOKS:  # e.g. durable-sim coverage saving what ran here
                hook(self.child_schedule.text())
            _write_outcome(self.child_out, doc)
        finally:
            os._exit(code)


def fork_within_child() -> int:
    """Fork a child's own child at a boundary (a pruned child's full-suffix check,
    ``sim.explore.pruning``): 0 in the new process, which gets trio I/O of its own and dies with
    the child that forked it (the parent kills an overdue or interrupted child, and nothing
    forked below it may outlive it); the new process's pid in the child."""
    assert AVAILABLE, "only a child of a forking run forks again"
    mask = interrupts.hold()
    forker = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _die_with(forker)
            interrupts.release(mask)
            _private_trio_io()
        except BaseException:  # never unwind into the forking child's frames
            os._exit(1)
        return 0
    interrupts.release(mask)
    return pid


#: Linux's ``prctl`` option that signals a process when the thread that forked it exits.
_PR_SET_PDEATHSIG = 1


def _die_with(forker_pid: int) -> None:
    """Have the kernel kill this process when ``forker_pid`` (its parent) dies, so a killed
    child leaves no process of its own behind. Where ``prctl`` is missing the process still
    ends with its run; a parent already gone ends it at once."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != forker_pid:
        os._exit(1)


def _private_trio_io() -> None:
    """Give a forked child trio I/O primitives of its own: fresh wakeup socketpairs and a fresh
    epoll instance.

    After ``fork`` parent and child share every open file description. Two of trio's are
    wakeup socketpairs (the I/O manager's forced wakeup and the entry queue's, which is also the
    signal wakeup fd): a child that drains the shared read end consumes a byte the *parent* was
    meant to wake on, and the parent's run loop then waits for a wakeup that never comes (seen:
    a fast sweep hung for ever at shutdown, ~1 run in 12). The shared epoll object has the same
    problem the other way round (a child re-arming registrations leaves the parent spinning).

    The fresh sockets are ``dup2``-ed onto the *same descriptor numbers*, so every trio structure
    that holds the socket objects or their numbers (the registrations, the signal wakeup fd)
    refers to the child's private sockets without being rebuilt. trio has no public way to do
    this, hence the private attributes; the simulator never waits on other I/O, so only trio's
    own wakeup sockets are registered."""
    runner = trio._core._run.GLOBAL_RUN_CONTEXT.runner
    io = runner.io_manager
    for pair in (io._force_wakeup, runner.entry_queue.wakeup):
        _renew_socketpair(pair.wakeup_sock, pair.write_sock)
    shared = io._epoll
    fresh = select.epoll()
    fresh.register(io._force_wakeup.wakeup_sock, select.EPOLLIN)
    for fd, waiters in io._registered.items():
        flags = (select.EPOLLIN if waiters.read_task is not None else 0) | (
            select.EPOLLOUT if waiters.write_task is not None else 0
        )
        waiters.current_flags = flags
        if flags:
            fresh.register(fd, flags | select.EPOLLONESHOT)
    io._epoll = fresh
    shared.close()  # this process's descriptor only; the parent's stays open


def _renew_socketpair(wakeup_sock: socket.socket, write_sock: socket.socket) -> None:
    """Replace the connection behind both descriptors by a new private one, with the options
    trio gives its wakeup pairs (non-blocking, tiny buffers)."""
    new_wakeup, new_write = socket.socketpair()
    with new_wakeup, new_write:
        for sock in (new_wakeup, new_write):
            sock.setblocking(False)
        new_wakeup.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
        new_write.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
        os.dup2(new_wakeup.fileno(), wakeup_sock.fileno(), inheritable=False)
        os.dup2(new_write.fileno(), write_sock.fileno(), inheritable=False)


def _failed(path: str) -> bool:
    """Whether a finished child's outcome is anything but a pass (one that cannot be read is
    the harness's error: a failure too)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return not isinstance(doc, dict) or doc.get("verdict") != "pass"


def _write_outcome(path: str, doc: dict[str, object]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(doc, out)
    os.replace(tmp, path)


def wait_for_exit(pids: list[int], timeout_s: float) -> None:
    """Block until one of ``pids`` may have exited or ``timeout_s`` passes. A pidfd becomes
    readable when its process exits (Linux >= 5.3); elsewhere, poll briefly."""
    opener = getattr(os, "pidfd_open", None)
    fds: list[int] = []
    try:
        if opener is not None:
            for pid in pids:
                try:
                    fds.append(opener(pid))
                except ProcessLookupError:
                    return  # already gone: reap it now
                except OSError:
                    break  # no pidfd support in this kernel: poll
        if fds and len(fds) == len(pids):
            poller = select.poll()  # not select(): descriptor numbers may exceed FD_SETSIZE
            for fd in fds:
                poller.register(fd, select.POLLIN)
            poller.poll(max(0.0, timeout_s) * 1000.0)
        else:
            time.sleep(min(0.005, max(0.0, timeout_s)))
    finally:
        for fd in fds:
            os.close(fd)
