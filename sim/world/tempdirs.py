"""Temporary directories that a killed sweep does not leave behind for ever.

A sweep makes temporary directories (the forked children's outcome files, SQLite databases and
their per-child copies). A ``finally`` removes them on every normal exit and on SIGINT/SIGTERM,
but nothing runs after SIGKILL or a power cut. So every directory's name carries the process id
of its owner, and each sweep first removes the directories of this user whose owner no longer
exists and that nobody touched for ten minutes. A live owner's directories are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

PREFIX = "durable-sim-"
STALE_AFTER_S = 600.0  # a directory untouched this long, whose owner is gone, is left over
_OWNED = re.compile(rf"^{PREFIX}[a-z]+-(\d+)-")


def make(kind: str, *, parent: str | None = None) -> str:
    """A new directory ``durable-sim-<kind>-<pid>-XXXX`` in ``parent`` (default: the system's
    temporary directory)."""
    assert re.fullmatch(r"[a-z]+", kind), kind
    return tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{os.getpid()}-", dir=parent)


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
        match = _OWNED.match(entry.name)
        if match is None or not _stale(entry, int(match.group(1)), now_s):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(str(entry))
    return removed


def _stale(entry: Path, pid: int, now_s: float) -> bool:
    """Ours (same user, a real directory), untouched for ``STALE_AFTER_S``, and its owner gone.
    The age condition guards against a process id from another pid namespace sharing this
    temporary directory (a container): a live sweep keeps writing into its directories."""
    try:
        info = entry.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    return now_s - info.st_mtime >= STALE_AFTER_S and not _alive(pid)


def remove_all_stale() -> list[str]:
    """``remove_stale`` in every parent this module makes directories in."""
    removed = remove_stale(None)
    fast = fast_parent()
    if fast is not None:
        removed += remove_stale(fast)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except (OverflowError, ValueError):
        return True  # not a process id this system can have: not ours to judge, leave it
    return True
