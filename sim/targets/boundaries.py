"""Crash boundaries in a target's child process, and the kill.

A boundary is a labelled instant around a call the child makes: ``before`` it starts and
``after`` it returned. Labels are numbered per kind (``saver.put#3``) or carry the tool call id
(``effect:payments.charge#call_p1_1``), so a label names the same logical instant in every run,
whichever thread reached it first: a target runtime may save checkpoints on background threads,
so the *index* of a boundary in the trace can differ between runs while its label does not. The
crash point is therefore chosen by label (the reference trace turns a schedule's index into one).

Every boundary is appended to the point's trace (``trace.jsonl``, one ``os.write`` per line, so a
kill never leaves half a row); at the chosen ``(label, when)`` the child appends a crash row,
fsyncs the trace and sends itself SIGKILL: no ``finally``, no ``__exit__``, no rollback but the
one SQLite performs when the next process opens the file.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TypeVar

from sim.targets.shapes import TraceRow, as_int

T = TypeVar("T")

TRACE_NAME = "trace.jsonl"


def read_trace(path: Path) -> list[TraceRow]:
    """Every complete row of a trace file (a row a kill cut short is not one)."""
    if not path.exists():
        return []
    rows: list[TraceRow] = []
    for line in path.read_bytes().split(b"\n"):
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def notes_of(rows: list[TraceRow], what: str) -> list[TraceRow]:
    """A trace's ``note`` rows of one kind (``Boundaries.note(what=...)``), in order."""
    return [r for r in rows if r["t"] == "note" and r.get("what") == what]


def crash_row(label: str, when: str, process: str, how: str) -> dict[str, str | float]:
    """The trace's row for a crash at ``(label, when)`` of ``process``: ``how`` is ``kill``,
    ``preempt``, or ``recorded`` (no process was killed: the point started from a snapshot,
    ``sim.targets.host.run_recovery``)."""
    return {"t": "crash", "label": label, "when": when, "p": process, "how": how,
            "wall": time.time()}  # fmt: skip


class TraceLog:
    """Append-only JSON lines shared by the children of one point."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    @property
    def fd(self) -> int:
        """The trace file's descriptor (a program's patched ``os.fsync`` leaves it alone)."""
        return self._fd

    def write(self, row: Mapping[str, object], *, sync: bool = False) -> None:
        line = json.dumps(row, separators=(",", ":"), ensure_ascii=True) + "\n"
        with self._lock:
            os.write(self._fd, line.encode("ascii"))
            if sync:
                os.fsync(self._fd)


class Boundaries:
    """Counts and records the boundaries of one child process; kills it at the crash point.

    ``crash`` is ``(label, when)`` or None (the fault-free run, or a resuming child). Indexes
    continue the trace of the point's earlier children, so a timeline reads as one run."""

    def __init__(
        self,
        log: TraceLog,
        process: str,
        crash: tuple[str, str] | None,
        *,
        grace_s: float = 0.0,
        instant: Callable[[str, str], None] | None = None,
    ) -> None:
        """``grace_s`` > 0 makes the crash a preemption: SIGTERM, then SIGKILL that much later
        (an autoscaler's or a gym's deadline) unless the process ended first. ``instant(label,
        when)`` is called at every boundary instant, before the kill would be (a fault-free
        run copies its files there: ``sim.targets.recovery_only``)."""
        self._log = log
        self._process = process
        self._crash = crash
        self._grace_s = grace_s
        self._instant = instant
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._next = 1 + max(
            (as_int(r["i"]) for r in read_trace(log.path) if r.get("t") == "b"), default=-1
        )

    @property
    def log_fd(self) -> int:
        return self._log.fd

    def numbered(self, kind: str) -> str:
        """``kind#n``: the n-th boundary of this kind in this process."""
        with self._lock:
            n = self._counters.get(kind, 0) + 1
            self._counters[kind] = n
        return f"{kind}#{n}"

    def before(self, label: str, **details: object) -> None:
        with self._lock:
            index = self._next
            self._next += 1
        row: dict[str, object] = {"t": "b", "i": index, "label": label, "p": self._process}
        self._log.write(row | ({"details": details} if details else {}))
        self._maybe_kill(label, "before")

    def note(self, **fields: object) -> None:
        """A row that is no boundary: what the child observed (e.g. the state it resumed from)."""
        self._log.write({"t": "note", "p": self._process, **fields}, sync=True)

    def after(self, label: str) -> None:
        self._maybe_kill(label, "after")

    def crossing(self, label: str, fn: Callable[[], T], **details: object) -> T:
        """Run ``fn`` between the ``before`` and ``after`` instants of ``label``."""
        self.before(label, **details)
        value = fn()
        self.after(label)
        return value

    def _maybe_kill(self, label: str, when: str) -> None:
        if self._instant is not None:
            self._instant(label, when)
        if self._crash != (label, when):
            return
        self._crash = None  # once: a preempted process may cross more boundaries as it stops
        how = "preempt" if self._grace_s > 0 else "kill"
        self._log.write(crash_row(label, when, self._process, how), sync=True)
        if self._grace_s > 0:
            deadline = threading.Timer(self._grace_s, os.kill, (os.getpid(), signal.SIGKILL))
            deadline.daemon = True
            deadline.start()
            os.kill(os.getpid(), signal.SIGTERM)  # the process's own handler, if any, runs next
            return
        os.kill(os.getpid(), signal.SIGKILL)
        while True:  # pragma: no cover - a signal to oneself is delivered before kill returns
            time.sleep(1.0)


def wrap_method(
    owner: type, name: str, boundaries: Boundaries, kind: str, describe: Callable[..., object]
) -> None:
    """Patch ``owner.name`` (a library function, e.g. a checkpointer's ``put``) so that each call
    crosses a boundary ``kind#n``; ``describe(*args, **kwargs)`` gives the trace row's details
    (what is being saved), for witnesses and timelines. Only ever done inside a child."""
    original: Callable[..., object] = getattr(owner, name)

    @functools.wraps(original)
    def wrapped(*args: object, **kwargs: object) -> object:
        label = boundaries.numbered(kind)
        return boundaries.crossing(
            label, lambda: original(*args, **kwargs), what=describe(*args, **kwargs)
        )

    setattr(owner, name, wrapped)


def wrap_async_method(
    owner: type, name: str, boundaries: Boundaries, kind: str, describe: Callable[..., object]
) -> None:
    """``wrap_method`` for a coroutine method (e.g. an async checkpointer's ``aput``): the
    ``after`` instant is when the awaited call has returned."""
    original: Callable[..., Awaitable[object]] = getattr(owner, name)

    @functools.wraps(original)
    async def wrapped(*args: object, **kwargs: object) -> object:
        label = boundaries.numbered(kind)
        boundaries.before(label, what=describe(*args, **kwargs))
        value = await original(*args, **kwargs)
        boundaries.after(label)
        return value

    setattr(owner, name, wrapped)
