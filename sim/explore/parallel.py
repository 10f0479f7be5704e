"""Several sweeps at once, one forked worker per sweep (``durable-sim sweep --jobs N``).

A bundled sweep is a list of independent steps (scenario x store). Run one after the other, the
machine's other cores idle whenever a step's own forked children do not fill them: its fault-free
prefix, its judging, every naive or small sweep. Here up to ``jobs`` steps run at once, each in a
worker forked from this process (it inherits the scenarios, the seams, the monkeypatches: nothing
is pickled on the way in). A worker reports progress through a pipe, one byte per schedule, and
its result through a pickle file; the results come back **in the order of the steps**, whatever
order they finished in, so the results document does not depend on the scheduling. Costly steps
are started first (a longest-first order by a static estimate), so the last one to finish is not
the longest.

No thread is started: the workers fork again (the fast sweep's children), and a thread holding a
lock at fork time would deadlock a child. One step, one job or no ``fork``: in-process, as before.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import shutil
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import UserError, user_error
from sim.explore import forking, interrupts
from sim.explore.progress import Progress
from sim.world import tempdirs
from sim.world.scenario import Scenario
from sim.world.stores import StoreKind

ProgressFn = Callable[[int], None]
KILL_GRACE_S = 10.0  # wall time an interrupted worker gets to clean up before it is killed


@dataclass(frozen=True)
class Step:
    """One sweep to run: ``run(progress=fn)`` returns its result (a ``ScenarioSweep``)."""

    label: str  # e.g. ``read_edit_answer[file]``; progress lines name it
    run: Callable[..., Any]
    cost: float = 1.0  # a static estimate of its cost: larger ones start first


class WorkerError(RuntimeError):
    """A worker died or raised; the message holds its traceback."""


def estimated_cost(scenario: Scenario, store: StoreKind | str, kinds: Sequence[str]) -> float:
    """A static guess at a sweep's cost, only to start costly sweeps first: the scenario's size
    (its script and inputs, which the number of boundaries follows) squared, since every crash
    point re-runs the rest of the run, times the crash kinds the store is swept with -- as
    ``StoreKind.can_inject`` says, the one place that knows."""
    size = len(scenario.model_dump_json())
    swept = [k for k in kinds if StoreKind(store).can_inject(k)]
    return float(size * size * max(1, len(swept)))


def default_jobs() -> int:
    """The machine's cores (what ``--jobs`` defaults to)."""
    return max(1, os.cpu_count() or 1)


def run_steps(
    steps: Sequence[Step],
    *,
    jobs: int,
    progress: Progress | None = None,
    finished: Callable[[Step, Any], str] | None = None,
    advance: ProgressFn | None = None,
) -> list[Any]:
    """Run every step, up to ``jobs`` at once; their results in the order of ``steps``.

    ``finished(step, result)`` (in this process, as each step ends) returns the summary its
    progress line ends with. ``advance`` (instead of ``progress``: the steps are parts of one
    step of the caller's) is called with the schedules done as they are reported."""
    summary = finished or (lambda step, result: "done")
    if jobs <= 1 or len(steps) <= 1 or not forking.AVAILABLE:
        if advance is not None:
            return [step.run(progress=advance) for step in steps]
        return [_in_process(step, progress, summary) for step in steps]
    workdir = tempdirs.make("jobs")
    try:
        return _Pool(steps, jobs, workdir, progress, summary, advance).run()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _in_process(step: Step, progress: Progress | None, summary: Callable[[Step, Any], str]) -> Any:
    if progress is not None:
        progress.start(step.label)
    result = step.run(progress=progress.advance if progress is not None else _ignore)
    if progress is not None:
        progress.finish(summary(step, result))
    return result


def _ignore(n: int) -> None:
    del n


@dataclass
class _Worker:
    pid: int
    index: int  # of its step
    fd: int  # the read end of its progress pipe
    path: Path  # where it pickles its result
    eof: bool = False


class _Pool:
    def __init__(
        self,
        steps: Sequence[Step],
        jobs: int,
        workdir: str,
        progress: Progress | None,
        summary: Callable[[Step, Any], str],
        advance: ProgressFn | None = None,
    ) -> None:
        self.advance = advance
        self.steps = steps
        self.jobs = jobs
        self.workdir = Path(workdir)
        self.progress = progress
        self.summary = summary
        # Longest first; ties keep the steps' own order (sorted is stable).
        self.pending = sorted(range(len(steps)), key=lambda i: -steps[i].cost)
        self.running: dict[int, _Worker] = {}  # by read fd
        self.results: dict[int, Any] = {}

    def run(self) -> list[Any]:
        """Every step; a stop request (Ctrl-C, SIGTERM: ``sim.explore.interrupts``) is checked
        before every fork and at least every ``STOP_CHECK_S`` of waiting, and ends the run with
        ``KeyboardInterrupt`` after every worker is stopped."""
        try:
            with interrupts.stop_on_signals():
                while self.pending or self.running:
                    while self.pending and len(self.running) < self.jobs:
                        interrupts.stop_if_requested()
                        self._start(self.pending.pop(0))
                    interrupts.stop_if_requested()
                    self._pump()
                interrupts.stop_if_requested()  # a stop that came with the last result
        finally:
            self._kill_all()
        return [self.results[i] for i in range(len(self.steps))]

    def _start(self, index: int) -> None:
        step = self.steps[index]
        if self.progress is not None:
            self.progress.start(step.label)
        path = self.workdir / f"{index}.pickle"
        read_fd, write_fd = os.pipe()
        mask = interrupts.hold()  # an interrupt waits until each side knows which it is
        pid = os.fork()
        if pid == 0:  # the worker: run the step, report, exit without unwinding the parent
            code = 1
            # A worker runs one step and exits: no automatic collection in it. Every run it
            # starts collects first if due (``sim.run.collector.collect_if_due``), so memory
            # stays bounded, and no collection fires at the end over what its runs left.
            gc.disable()
            try:
                interrupts.child_defaults()
                interrupts.release(mask)
                os.close(read_fd)
                for other in self.running.values():
                    os.close(other.fd)
                code = _work(step, write_fd, path)
            finally:
                os._exit(code)
        os.close(write_fd)
        self.running[read_fd] = _Worker(pid, index, read_fd, path)
        interrupts.release(mask)  # the worker is in the books: an interrupt now stops it too

    def _pump(self) -> None:
        """Wait for progress or for a worker's end, and handle what arrived."""
        poller = select.poll()
        for fd in self.running:
            poller.register(fd, select.POLLIN | select.POLLHUP)
        for fd, _ in poller.poll(interrupts.STOP_CHECK_S * 1000):
            worker = self.running[fd]
            data = os.read(fd, 65536)
            label = self.steps[worker.index].label
            if data and self.advance is not None:
                self.advance(len(data))
            elif data and self.progress is not None:
                self.progress.advance(len(data), label=label)
            if not data:
                self._finish(worker)

    def _finish(self, worker: _Worker) -> None:
        del self.running[worker.fd]
        os.close(worker.fd)
        _, status = os.waitpid(worker.pid, 0)
        step = self.steps[worker.index]
        try:
            with worker.path.open("rb") as file:
                ok, value = pickle.load(file)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            interrupts.stop_if_requested()  # a worker stopped by the same interrupt
            code = os.waitstatus_to_exitcode(status)
            raise WorkerError(f"{step.label}: worker exited with status {code}: {exc}") from exc
        if not ok:
            interrupts.stop_if_requested()  # a worker stopped by the same interrupt: no error
            if isinstance(value, UserError):
                raise value  # bad input found in the worker: the caller's one line, as in-process
            raise WorkerError(f"{step.label}: {value}")
        self.results[worker.index] = value
        if self.progress is not None:
            self.progress.finish(self.summary(step, value), label=step.label)

    def _kill_all(self) -> None:
        """On the way out (an error, ^C, SIGTERM): no worker outlives the command. Each is
        interrupted first, so its sweep kills its own forked children and removes its temporary
        directories (a SIGKILL would orphan them); one still alive after the grace period is
        killed."""
        workers = list(self.running.values())
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGINT)
        deadline = time.monotonic() + KILL_GRACE_S
        for worker in workers:
            while time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(worker.pid, os.WNOHANG)[0]:
                        break
                    time.sleep(0.01)
                    continue
                break  # already reaped
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(worker.pid, 0)
            with contextlib.suppress(OSError):
                os.close(worker.fd)
        self.running.clear()


def _work(step: Step, write_fd: int, path: Path) -> int:
    """In the worker: run the step, one byte on the pipe per schedule, the result pickled."""

    def advance(n: int) -> None:
        os.write(write_fd, b"+" * n)  # at most a few bytes: atomic on a pipe

    try:
        outcome: tuple[bool, object] = (True, step.run(progress=advance))
    except BaseException as exc:  # the worker must report whatever happened, then exit
        # Bad input (a seam's code that raised) is passed on as itself: the caller's one line.
        outcome = (False, user_error(exc) or traceback.format_exc())
        # An interrupt may have landed between a step's ``tempdirs.make`` and the ``try`` that
        # would remove what it made: the worker removes what it made itself.
        tempdirs.remove_own()
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as file:
        pickle.dump(outcome, file, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    os.close(write_fd)
    return 0
