"""Temporary directories that a killed sweep does not leave behind for ever, and that are never
removed while their owner lives or after a user asked to keep them.

A sweep makes temporary directories (the forked children's outcome files, SQLite databases and
their per-child copies); ``durable-sim workers`` makes one per fleet. A ``finally`` removes them
on every normal exit and on SIGINT/SIGTERM, but nothing runs after SIGKILL or a power cut. So
each directory made here holds a marker (``OWNER_FILE``) naming its owner: the process id *and*
that process's start time (field 22 of ``/proc/PID/stat``, in clock ticks since boot), because a
process id alone is reused -- and a number in a directory's name may be anything (a seed). Each
sweep first removes this user's directories whose owner is **provably gone** (no process with
that id, or one that started at another time) and that nobody touched for ten minutes. Where it
cannot be proven, nothing is removed: no marker (a directory of an older version, or of someone
else), a marker that does not parse, an owner whose start time could not be read, a system
without ``/proc``. A directory a user asked to keep (``keep``: ``durable-sim workers --keep``,
or a fleet with violations) holds ``KEPT_FILE`` and is never removed.

So a directory must never be left without its marker: the cleaner would keep it for ever. An
interrupt (Ctrl-C, SIGTERM) is held back while ``make`` creates and marks one, and one that
lands anyway removes it. A caller removes what ``make`` returned in a ``finally``; an interrupt
that comes before the caller's ``try`` is entered (``sim.explore.sweep`` builds its fork plan
between the two) is covered by ``remove_own``, which the command line calls when it stops: every
directory this process made, still holds and was not asked to keep.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "durable-sim-"
STALE_AFTER_S = 600.0  # a directory untouched this long, whose owner is gone, is left over
#: The owner's marker inside a directory made here: ``PID START`` (START: ``-`` if unknown).
OWNER_FILE = ".durable-sim-owner"
#: A directory holding this file was kept on request: never removed.
KEPT_FILE = ".durable-sim-kept"
_PROC = Path("/proc")
_OWNER = re.compile(r"^(\d+) (\d+|-)\n?$")
#: The signals that stop a command (``sim.explore.interrupts.STOP_SIGNALS``, a layer above).
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
#: Every directory ``make`` made in this process, in order (``remove_own``).
_MADE: list[str] = []


def make(kind: str, *, parent: str | None = None, label: str = "") -> str:
    """A new directory ``durable-sim-<kind>-[<label>-]XXXX`` in ``parent`` (default: the system's
    temporary directory), marked as this process's (``OWNER_FILE``)."""
    assert re.fullmatch(r"[a-z]+", kind), kind
    assert re.fullmatch(r"[a-z0-9]*", label), label
    middle = f"{kind}-{label}-" if label else f"{kind}-"
    _MADE[:] = [made for made in _MADE if os.path.isdir(made)]  # removed by their callers
    held = _hold()
    directory = ""
    try:
        directory = tempfile.mkdtemp(prefix=f"{PREFIX}{middle}", dir=parent)
        pid = os.getpid()
        start = process_start(pid)
        Path(directory, OWNER_FILE).write_text(f"{pid} {'-' if start is None else start}\n")
        _MADE.append(directory)
        _release(held)  # an interrupt held back so far is raised here
    except BaseException:
        if directory:
            _forget(directory)
            shutil.rmtree(directory, ignore_errors=True)
        _release(held)
        raise
    return directory


@dataclass
class _Held:
    """What ``_hold`` changed: the thread's signal mask, and in the main thread the stop signals'
    Python handlers (replaced by a recorder) and the signals recorded meanwhile."""

    mask: set[int] | None
    handlers: dict[int, Any] = field(default_factory=dict)
    caught: list[int] = field(default_factory=list)


def _hold() -> _Held:
    """Hold the stop signals back until the directory is marked (see ``make``). Blocking them in
    this thread is not enough where the process has other threads: the kernel hands a
    process-wide SIGINT to one that does not block it, and Python then runs the handler in the
    main thread at once (seen in a pytest-xdist worker that an earlier test left a thread in).
    So the main thread also swaps the handlers for a recorder."""
    mask = None
    if hasattr(signal, "pthread_sigmask"):
        mask = {int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)}
    held = _Held(mask)
    if threading.current_thread() is threading.main_thread():
        for signum in sorted(_STOP_SIGNALS):
            held.handlers[int(signum)] = signal.signal(
                signum, lambda number, _frame: held.caught.append(number)
            )
    return held


def _release(held: _Held) -> None:
    """Undo ``_hold``; a stop signal recorded meanwhile is raised again, now, for its own
    handler (a ``KeyboardInterrupt`` in ``make``'s ``try``, which removes the directory)."""
    for signum, handler in held.handlers.items():
        signal.signal(signum, handler)
    held.handlers.clear()
    if held.mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held.mask)
        held.mask = None
    while held.caught:
        signal.raise_signal(held.caught.pop(0))


def _forget(directory: str) -> None:
    if directory in _MADE:
        _MADE.remove(directory)


def remove_own() -> list[str]:
    """Remove every directory ``make`` made in this process that is still there, still marked as
    this process's (a forked child shares the list: it is not the owner) and not kept; returns
    their paths. For a command that stops: what it made is gone, whichever frame it was in."""
    removed: list[str] = []
    me = f"{os.getpid()} "
    for directory in list(_MADE):
        path = Path(directory)
        try:
            owner = (path / OWNER_FILE).read_text()
        except (OSError, UnicodeDecodeError):
            owner = ""  # gone already (its caller removed it), or not ours to tell
        if owner.startswith(me) and not (path / KEPT_FILE).exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(directory)
        _forget(directory)
    return removed


def keep(directory: str | Path) -> None:
    """Mark ``directory`` as kept: no sweep's cleaner ever removes it (the user removes it)."""
    Path(directory, KEPT_FILE).write_text("kept on request: never removed automatically\n")
    _forget(str(directory))


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (field 22 of ``/proc/PID/stat``, clock ticks since boot), or
    None if it cannot be read (no such process, or no ``/proc``). The process's name (field 2)
    may hold spaces and parentheses: the fields are counted after its last ``)``."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
        return int(text[text.rindex(")") + 2 :].split()[19])  # [0] is field 3
    except (OSError, ValueError, IndexError):
        return None


def fast_parent() -> str | None:
    """A memory-backed parent for databases the sweep rewrites constantly, where there is one."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def remove_stale(parent: str | None = None) -> list[str]:
    """Remove the directories in ``parent`` left by owners that are gone; returns their paths."""
    root = Path(parent or tempfile.gettempdir())
    removed: list[str] = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return removed  # nothing we may read there is ours
    now_s = time.time()
    for entry in entries:
        if entry.name.startswith(PREFIX) and _stale(entry, now_s):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
    return removed


def _stale(entry: Path, now_s: float) -> bool:
    """Ours (same user, a real directory, our marker), not kept, untouched for
    ``STALE_AFTER_S``, and its owner provably gone. The age condition guards against a process
    id of another pid namespace sharing this temporary directory (a container): a live sweep
    keeps writing into its directories."""
    try:
        info = entry.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    if (entry / KEPT_FILE).exists() or now_s - info.st_mtime < STALE_AFTER_S:
        return False
    return owner_gone(entry)


def owner_gone(directory: Path) -> bool:
    """Whether the process that made ``directory`` (its ``OWNER_FILE``) provably no longer
    runs: ``/proc`` exists, and no process has that id or the one that has it started at
    another time. False whenever that cannot be told."""
    try:
        match = _OWNER.fullmatch((directory / OWNER_FILE).read_text())
    except (OSError, UnicodeDecodeError):
        return False
    if match is None or match.group(2) == "-" or not (_PROC / "self" / "stat").exists():
        return False
    pid = int(match.group(1))
    now = process_start(pid)
    if now is None:
        return not (_PROC / str(pid)).exists()  # gone, or there but unreadable: cannot tell
    return now != int(match.group(2))


def remove_all_stale() -> list[str]:
    """``remove_stale`` in every parent this module makes directories in."""
    removed = remove_stale(None)
    fast = fast_parent()
    if fast is not None:
        removed += remove_stale(fast)
    return removed
