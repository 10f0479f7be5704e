"""Run one crash point of a target for real: child processes, a SIGKILL, a resume, and what is
left afterwards (the trace, the ledger, the runtime's durable state).

A point is a fresh directory. The first child starts the run and kills itself at the crash point
(if any); each next child is a fresh interpreter that resumes from the runtime's durable files,
until one ends on its own. Every child is bounded by ``timeout_s``: one that hangs is killed and
the point is reported as a harness error, never waited for. The parent then reads the ledger and
asks the target for its durable state through a fresh reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.targets.boundaries import TRACE_NAME, crash_row, read_trace
from sim.targets.child import POINT_NAME
from sim.targets.environments import READ_TIMEOUT_S, interpreter
from sim.targets.ledger import LEDGER_NAME, Ledger, LedgerRow
from sim.targets.protocol import Target, TargetOptions, TargetState
from sim.targets.reader import STATE_NAME
from sim.targets.snapshots import restore
from sim.targets.zygote import ChildExit, Zygote, ZygoteRefused
from sim.world import tempdirs
from sim.world.faults import When

#: Children of one point at most: the one that crashes, the one that resumes, and one more in
#: case the resume itself leaves work (which is then the runtime's liveness failure).
MAX_PROCESSES = 3
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Crash:
    """Where the first child dies: the reference trace's boundary ``index``, by its label."""

    index: int
    when: When
    label: str

    def text(self) -> str:
        return f"{self.index}:{self.when}"


@dataclass
class PointRun:
    """Everything the judge reads about one point."""

    crash: Crash | None
    rows: list[dict[str, Any]] = field(default_factory=list)  # the whole trace, in order
    boundaries: list[dict[str, Any]] = field(default_factory=list)  # trace rows "b"
    crashes: list[dict[str, Any]] = field(default_factory=list)
    actions: dict[str, str] = field(default_factory=dict)  # process -> start|resume|none
    processes: int = 0
    ledger: list[LedgerRow] = field(default_factory=list)
    state: TargetState = field(default_factory=TargetState)
    error: str | None = None  # the harness's (or the child's own exception): verdict "error"
    wall_s: float = 0.0

    @property
    def labels(self) -> list[str]:
        return [str(b["label"]) for b in self.boundaries]


def run_point(
    target: Target,
    options: TargetOptions,
    crash: Crash | None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    keep: Path | None = None,
    zygote: Zygote | None = None,
    snapshot_to: Path | None = None,
) -> PointRun:
    """Run ``target`` once, crashing at ``crash`` (None: the fault-free run). ``keep``: run in
    that directory and leave it in place (for a replay the user wants to inspect). ``zygote``:
    fork the children from it (``sim.targets.zygote``) instead of starting fresh interpreters.
    ``snapshot_to``: the first child copies the point's files there at every boundary instant
    (``sim.targets.snapshots``)."""
    started = time.perf_counter()
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    # Marked as this process's (``tempdirs.make``, signals held until it is): a Ctrl-C or
    # SIGTERM anywhere from here on, even inside the ``finally``'s removal, leaves it to the
    # command's own cleanup (``tempdirs.remove_own``) rather than behind.
    point_dir = keep or Path(tempdirs.make("point"))
    try:
        _write_config(point_dir, target, options, crash, snapshot_to)
        Ledger.create(point_dir / LEDGER_NAME).close()
        run = PointRun(crash)
        _children_then_state(run, target, options, point_dir, timeout_s, zygote=zygote, first=1)
        run.wall_s = time.perf_counter() - started
        return run
    finally:
        if keep is None:
            shutil.rmtree(point_dir, ignore_errors=True)


def run_recovery(
    target: Target,
    options: TargetOptions,
    crash: Crash,
    copy: Path,
    point_dir: Path,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    zygote: Zygote | None = None,
) -> PointRun:
    """A crash point without its first process: ``point_dir`` restored to ``copy`` (the
    fault-free run's files at the crash's instant, ``sim.targets.snapshots``), the kill's trace
    row appended as the killed process would have, then the processes after it, as
    ``run_point`` runs them. Only for a target whose durable files are all the point's."""
    assert not options.preempt_s, "a preemption runs a shutdown no snapshot holds"
    started = time.perf_counter()
    restore(copy, point_dir)
    _write_config(point_dir, target, options, crash, None)
    with open(point_dir / TRACE_NAME, "a", encoding="ascii") as trace:
        trace.write(json.dumps(crash_row(crash.label, str(crash.when), "p1", "recorded")) + "\n")
    run = PointRun(crash)
    _children_then_state(run, target, options, point_dir, timeout_s, zygote=zygote, first=2)
    run.wall_s = time.perf_counter() - started
    return run


def _write_config(
    point_dir: Path,
    target: Target,
    options: TargetOptions,
    crash: Crash | None,
    snapshot_to: Path | None,
) -> None:
    """``point.json``, what every child of the point reads (``sim.targets.child``)."""
    config = {
        "target": target.name,
        "options": options.to_json(),
        "crash": None if crash is None else {"when": crash.when, "label": crash.label},
        "snapshots": None if snapshot_to is None else str(snapshot_to),
    }
    (point_dir / POINT_NAME).write_text(json.dumps(config), encoding="utf-8")


def _children_then_state(
    run: PointRun,
    target: Target,
    options: TargetOptions,
    point_dir: Path,
    timeout_s: float,
    *,
    zygote: Zygote | None,
    first: int,
) -> None:
    """The point's processes from number ``first`` on, inside the target's service, then what
    they left (trace, ledger, the runtime's state) into ``run``."""
    with target_service(target, options):
        env = target.point_env(options, point_dir)
        run.error = _run_children(
            run,
            point_dir,
            timeout_s,
            preempt=options.preempt_s > 0,
            extra_env=env,
            zygote=zygote,
            first=first,
            python=interpreter(target.environment),
        )
        _collect(run, target, options, point_dir, zygote)


def target_service(
    target: Target, options: TargetOptions
) -> contextlib.AbstractContextManager[object]:
    """The durable service a target's children and its reader need alive (a server the crash
    never kills, e.g. Temporal's): ``Target.service``, entered around a point's children and its
    state read, and by a sweep around all of its points (the target reuses a service already
    running)."""
    return target.service(options)


def _run_children(
    run: PointRun,
    point_dir: Path,
    timeout_s: float,
    *,
    preempt: bool,
    extra_env: dict[str, str],
    zygote: Zygote | None,
    first: int,
    python: str,
) -> str | None:
    """The point's processes from number ``first`` on, until one ends on its own. A killed
    first process is followed by the next; so is a preempted one however it ended (SIGTERM's
    default, its own exit within the grace, or the SIGKILL after it) -- unless the harness or
    the target raised in it. ``python``: the interpreter of a fresh child (the target's own
    environment's, ``sim.targets.environments``)."""
    env = dict(os.environ, PYTHONHASHSEED="0", **extra_env)
    for number in range(first, MAX_PROCESSES + 1):
        run.processes = number
        try:
            argv = ["sim.targets.child", str(point_dir), str(number)]
            proc = _child(zygote, argv, env, timeout_s, python)
        except TimeoutError:  # the child is killed already
            return f"child p{number} did not finish within {timeout_s:g} s (killed)"
        except ZygoteRefused as exc:  # the zygote died mid-sweep: this point's error, not a crash
            return f"child p{number} could not be forked: {exc}"
        rows = read_trace(point_dir / TRACE_NAME)
        crashed = any(r["t"] == "crash" and r["p"] == f"p{number}" for r in rows)
        errors = [str(r["msg"]) for r in rows if r["t"] == "error" and r["p"] == f"p{number}"]
        if crashed and (proc.returncode == -signal.SIGKILL or (preempt and not errors)):
            continue
        if proc.returncode == 0:
            if number == 1 and run.crash is not None:
                return f"the crash point {run.crash.text()} ({run.crash.label}) was not reached"
            return None
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
        why = errors[-1] if errors else " | ".join(tail)
        return f"child p{number} exited with status {proc.returncode}" + (f": {why}" if why else "")
    return f"the run did not end in {MAX_PROCESSES} processes"


def _child(
    zygote: Zygote | None,
    argv: list[str],
    env: dict[str, str],
    timeout_s: float,
    python: str,
) -> ChildExit:
    """One child, ``python -m ARGV`` (``sim.targets.child`` or ``sim.targets.reader`` and their
    arguments): forked from the zygote, or a fresh ``python`` without one. ``TimeoutError`` once
    it is killed for overrunning ``timeout_s``."""
    if zygote is not None:
        return zygote.run(argv, env=env, timeout_s=timeout_s)
    try:
        proc = subprocess.run(
            [python, "-m", *argv], capture_output=True, timeout=timeout_s, env=env
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed it
        raise TimeoutError from None
    return ChildExit(proc.returncode, proc.stderr)


def _collect(
    run: PointRun, target: Target, options: TargetOptions, point_dir: Path, zygote: Zygote | None
) -> None:
    run.rows = read_trace(point_dir / TRACE_NAME)
    for row in run.rows:
        if row["t"] == "b":
            run.boundaries.append(row)
        elif row["t"] == "crash":
            run.crashes.append(row)
        elif row["t"] == "ended":
            run.actions[str(row["p"])] = str(row["action"])
    ledger = Ledger(point_dir / LEDGER_NAME)
    try:
        run.ledger = ledger.rows()
    finally:
        ledger.close()
    try:
        run.state = read_state(target, options, point_dir, zygote)
    except Exception as exc:  # the runtime cannot read its own files: worth reporting as is
        message = f"reading the runtime's state failed: {type(exc).__name__}: {exc}"
        run.error = f"{run.error}; {message}" if run.error else message


def read_state(
    target: Target, options: TargetOptions, point_dir: Path, zygote: Zygote | None = None
) -> TargetState:
    """``Target.read_state`` of the point: here, or -- for a target with an environment of its
    own, whose framework this process must not import -- by a reader under its interpreter
    (``sim.targets.reader``, forked from ``zygote`` when there is one, which imported the
    framework already), whose failure is raised here with its last line."""
    if target.environment is None:
        return target.read_state(point_dir, options)
    answer = point_dir / STATE_NAME
    answer.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONHASHSEED="0")
    argv = ["sim.targets.reader", str(point_dir)]
    python = interpreter(target.environment)
    try:
        proc = _child(zygote, argv, env, READ_TIMEOUT_S, python)
    except TimeoutError:
        raise TimeoutError(f"the state reader did not finish in {READ_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise RuntimeError(f"the state reader failed: {(tail or [str(proc.returncode)])[0]}")
    return TargetState(**json.loads(answer.read_text(encoding="utf-8")))
