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

- **equivalent process crashes run once.** A process kill keeps everything written, so two crash
  points where the world outside the dead process is identical -- files as processes see them,
  external services, the client's view, the model's call log, ids, virtual time, the trio
  scheduler's RNG state, pending timed crashes -- have identical futures (e.g. after a log append,
  before its fsync and after it). The first such point is run; the others inherit its verdict.
- **I10 by twins.** Determinism is checked by forking the same crash point twice and comparing the
  children's fingerprints; the shared prefix is checked once, by comparing the forking run's
  fingerprint with the reference run's.

SQLite files live on a real directory: a child copies the database and its WAL to a directory of
its own before crashing, and never touches (or closes) the connections it inherited.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from sim.faults import CrashKind, CrashPoint, Schedule, parse_schedule
from sim.oracles import VERDICT_ORDER, Violation

AVAILABLE = hasattr(os, "fork")


@dataclass
class ChildOutcome:
    """What a child reports: enough for the sweep's record of one schedule."""

    schedule: str
    verdict: str
    violations: list[dict[str, Any]]
    fingerprint: str
    labels: list[str]
    timeline: list[str]
    paths: list[str]


@dataclass
class ForkPlan:
    """Configuration and bookkeeping of one forking run (in the parent; children get a copy)."""

    base: Schedule
    kinds: tuple[CrashKind, ...]
    reference: Any  # RunResult of the fault-free run of the base schedule
    twins: bool
    jobs: int
    workdir: str
    in_child: bool = False
    child_out: str = ""
    child_schedule: Schedule = field(default_factory=Schedule)
    child_tmp: str | None = None
    running: list[tuple[int, str, str]] = field(default_factory=list)  # pid, schedule, path
    done: list[tuple[str, str]] = field(default_factory=list)  # schedule, path
    seen: dict[str, str] = field(default_factory=dict)  # state digest -> schedule text
    equivalent: list[tuple[str, str]] = field(default_factory=list)  # schedule, twin of
    order: list[str] = field(default_factory=list)  # schedules in sweep order
    snapshot: Any = None  # parent-side: copy the SQLite files for the child about to fork
    relocate: Any = None  # child-side: switch to that copy before crashing
    progress: Any = None  # called with 1 per finished child

    # -- in the parent ---------------------------------------------------------------------------

    def fork_at(self, machine: Any, process: Any, index: int, when: str, label: str) -> None:
        """Called by the machine at every boundary of the forking run."""
        if index <= self.base.last_index or self.in_child:
            return
        for kind in self.kinds:
            point = CrashPoint(index, when, kind)  # type: ignore[arg-type]
            schedule = Schedule.of(*self.base.points, point)
            text = schedule.text()
            self.order.append(text)
            if kind == "process":
                digest = machine.state_digest()
                if digest is not None:
                    twin = self.seen.get(digest)
                    if twin is not None:
                        self.equivalent.append((text, twin))
                        continue
                    self.seen[digest] = text
            for copy in range(2 if self.twins else 1):
                self._spawn(machine, process, point, label, schedule, copy)

    def _spawn(
        self,
        machine: Any,
        process: Any,
        point: CrashPoint,
        label: str,
        schedule: Schedule,
        copy: int,
    ) -> None:
        while len(self.running) >= self.jobs:
            self._reap_one()
        path = os.path.join(self.workdir, f"{len(self.done) + len(self.running)}-{copy}.json")
        # The parent copies the SQLite files *before* forking: it goes on writing to its own
        # copy as soon as the child exists, so a copy made by the child could see later commits.
        snapshot = self.snapshot() if self.snapshot is not None else None
        pid = os.fork()
        if pid == 0:  # the child: crash here, run on, report, exit without cleanup
            _private_trio_io()
            self.in_child = True
            self.child_out = path
            self.child_schedule = schedule
            machine.schedule = schedule
            machine.forked_child = True
            if self.relocate is not None:
                self.relocate(snapshot)
            machine.crash(process, point, label)
            raise AssertionError("unreachable: crash raises")
        self.running.append((pid, schedule.text(), path))

    def _reap_one(self) -> None:
        pid, status = os.wait()
        for entry in self.running:
            if entry[0] == pid:
                self.running.remove(entry)
                if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                    Path(entry[2]).write_text(
                        json.dumps({"error": f"child exited with status {status}"})
                    )
                self.done.append((entry[1], entry[2]))
                if self.progress is not None:
                    self.progress(1)
                return

    def wait_all(self) -> None:
        while self.running:
            self._reap_one()

    def ordered(self) -> list[str]:
        """Schedules in the naive sweep's order (boundary, before/after, kind): boundaries nest
        (a store commit's ``after`` comes after its file operations), so fork order differs."""
        kinds = {k: n for n, k in enumerate(self.kinds)}

        def key(text: str) -> tuple[int, int, int]:
            point = parse_schedule(text).points[-1]
            return (point.index, 0 if point.when == "before" else 1, kinds[point.kind])

        return sorted(self.order, key=key)

    # -- in the child ----------------------------------------------------------------------------

    def finish_child(self, result: Any) -> None:
        """Judge the child's run, write the outcome, and leave without any cleanup."""
        from sim.sweep import judge, recovery_paths, timeline

        try:
            outcome = judge(result, self.reference, determinism=False)
            doc = ChildOutcome(
                schedule=result.schedule.text(),
                verdict=outcome.verdict,
                violations=[_violation_json(v) for v in outcome.violations],
                fingerprint=result.fingerprint,
                labels=list(outcome.labels),
                timeline=timeline(result) if outcome.verdict != "pass" else [],
                paths=sorted(recovery_paths(result)),
            ).__dict__
        except BaseException as exc:  # the child must always report and exit
            doc = {"error": f"{type(exc).__name__}: {exc}"}
        with open(self.child_out, "w", encoding="utf-8") as out:
            json.dump(doc, out)
        if self.child_tmp is not None:
            shutil.rmtree(self.child_tmp, ignore_errors=True)
        os._exit(0)

    def abort_child(self, exc: BaseException) -> None:
        """A child whose run raised (or was interrupted): report it and exit at once. Unwinding
        further would run the *parent's* cleanup (its temporary directories) in the child."""
        with open(self.child_out, "w", encoding="utf-8") as out:
            json.dump({"error": f"{type(exc).__name__}: {exc}"}, out)
        if self.child_tmp is not None:
            shutil.rmtree(self.child_tmp, ignore_errors=True)
        os._exit(1)


def _private_trio_io() -> None:
    """Give a forked child its own epoll instance. After ``fork`` parent and child share the
    kernel's epoll object: a child re-arming or consuming the shared registrations can leave the
    parent's loop spinning on events it never drains (seen: a forking parent stuck at 100% CPU
    in ``epoll.poll``). trio has no public way to do this, hence the private attributes; the
    simulator never waits on I/O, so only trio's own wakeup sockets are registered."""
    run_module: Any = trio._core._run
    io = run_module.GLOBAL_RUN_CONTEXT.runner.io_manager
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


def _violation_json(v: Violation) -> dict[str, Any]:
    return {
        "invariant": v.invariant,
        "explanation": v.explanation,
        "witness": list(v.witness),
        "expected": v.expected,
        "actual": v.actual,
    }


def violation_from_json(doc: dict[str, Any]) -> Violation:
    return Violation(
        doc["invariant"], doc["explanation"], tuple(doc["witness"]), doc["expected"], doc["actual"]
    )


def verdict_of(violations: list[Violation]) -> str:
    for candidate in VERDICT_ORDER:
        if any(v.verdict == candidate for v in violations):
            return candidate
    return "pass"


def digest_of(parts: list[Any]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def trio_rng_state() -> Any:
    run_module: Any = trio._core._run
    return run_module._r.getstate()


def copy_sqlite_dir(src: str) -> str:
    """A fresh directory holding a copy of the database and its WAL (the shared-memory index is
    rebuilt by SQLite from the WAL), for a forked child."""
    dst = tempfile.mkdtemp(prefix="durable-sim-child-", dir=os.path.dirname(src))
    for name in os.listdir(src):
        if name.endswith("-shm"):
            continue
        shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
    return dst
