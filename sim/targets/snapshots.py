"""Snapshots of a fault-free run's files at every boundary instant: taken by the run's own
process, restored by the parent for each crash point (``sim.targets.recovery_only`` says why).

A SIGKILL loses what the process held in memory and nothing it wrote: the kernel keeps every
``write`` whether or not it was synced. So the point's files at a kill are the files on disk at
that instant, and a copy the process makes at the instant itself (no other process writes the
point's directory) is what the next process would find. Each instant's snapshot is a directory
``N`` beside ``instants.jsonl``, whose row N names the instant (label, side).

Limits: ``MAX_INSTANTS`` snapshots and ``MAX_BYTES`` in all; past either, no more are taken
(the manifest says so) and the parent runs the points without one the real way.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

MANIFEST = "instants.jsonl"
#: Copies of one run at most (two per boundary), and bytes in all: a long run, or one whose
#: files are large (a model's cache, a big SQLite database), is swept the real way instead.
MAX_INSTANTS = 2_000
MAX_BYTES = 512 * 1024 * 1024


class Snapshotter:
    """In the fault-free run's child: ``snapshotter(label, when)`` copies the point's directory to
    ``into/N`` and notes the instant. A copy that would pass a limit notes ``full`` instead,
    once, and nothing more is copied."""

    def __init__(self, point_dir: Path, into: Path) -> None:
        self._point_dir = point_dir
        self._into = into
        self._lock = threading.Lock()
        self._count = 0
        self._bytes = 0
        self._full = False

    def __call__(self, label: str, when: str) -> None:
        with self._lock:
            if self._full:
                return
            size = _size(self._point_dir)
            if self._count >= MAX_INSTANTS or self._bytes + size > MAX_BYTES:
                self._full = True
                self._note({"full": f"past {MAX_INSTANTS} instants or {MAX_BYTES} bytes"})
                return
            _copy_tree(self._point_dir, self._into / str(self._count))
            self._note({"n": self._count, "label": label, "when": when})
            self._count += 1
            self._bytes += size

    def _note(self, row: dict[str, object]) -> None:
        line = (json.dumps(row) + "\n").encode("utf-8")
        fd = _OPEN(str(self._into / MANIFEST), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _WRITE(fd, line)
        finally:
            _CLOSE(fd)


# The copy runs inside the fault-free run's child, whose program's writes are boundaries (the python
# target patches ``open``, ``os.open``, ``os.write``...): it uses the functions as they were
# when this module was imported, before any target patched them, so copying crosses none.
_OPEN, _WRITE, _CLOSE, _SENDFILE = os.open, os.write, os.close, os.sendfile


def _copy_tree(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` (new) through the unpatched calls: directories, files
    byte for byte (``sendfile``), symbolic links as links."""
    os.mkdir(target)
    for root, dirs, names in os.walk(source):
        into = target / os.path.relpath(root, source)
        for name in dirs:
            path = os.path.join(root, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), into / name)
            else:
                os.mkdir(into / name)
        for name in names:
            path = os.path.join(root, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), into / name)
                continue
            _copy_file(path, str(into / name))


def _copy_file(path: str, to: str) -> None:
    size = os.path.getsize(path)
    src = _OPEN(path, os.O_RDONLY)
    try:
        dst = _OPEN(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            offset = 0
            while offset < size:
                sent = _SENDFILE(dst, src, offset, size - offset)
                if sent == 0:  # the file shrank while it was copied: what is there is copied
                    break
                offset += sent
        finally:
            _CLOSE(dst)
    finally:
        _CLOSE(src)


def _size(directory: Path) -> int:
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(directory)
        for name in names
    )


def snapshots_in(into: Path) -> tuple[dict[tuple[str, str], Path], str | None]:
    """The snapshots by (label, side), and why they stopped short (or None)."""
    found: dict[tuple[str, str], Path] = {}
    full = None
    path = into / MANIFEST
    rows = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for line in rows:
        row = json.loads(line)
        if "full" in row:
            full = str(row["full"])
            continue
        # The first copy of a (label, side) is the one a kill there would find.
        found.setdefault((str(row["label"]), str(row["when"])), into / str(row["n"]))
    return found, full


def restore(copy: Path, point_dir: Path) -> None:
    """Make ``point_dir`` hold exactly what ``copy`` holds (the directory itself stays, so a
    file that names its absolute path reads as it did when the snapshot was taken)."""
    for entry in point_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.copytree(copy, point_dir, symlinks=True, dirs_exist_ok=True)
