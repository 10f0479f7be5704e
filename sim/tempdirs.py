"""Temporary directories that a killed sweep does not leave behind for ever.

A sweep makes temporary directories (the forked children's outcome files, SQLite databases and
their per-child copies). A ``finally`` removes them on every normal exit and on SIGINT/SIGTERM,
but nothing runs after SIGKILL or a power cut. So every directory's name carries the process id
of its owner, and each sweep first removes the directories whose owner no longer exists. A live
owner's directories are never touched, whatever their age.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = "durable-sim-"
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
    for entry in entries:
        match = _OWNED.match(entry.name)
        if match is None or not entry.is_dir() or _alive(int(match.group(1))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(str(entry))
    return removed


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
    return True
