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
import stat
import threading
from pathlib import Path

from sim.world.tempdirs import OWNER_FILE

MANIFEST = "instants.jsonl"
#: Copies of one run at most (two per boundary), and bytes in all: a long run, or one whose
#: files are large (a model's cache, a big SQLite database), is swept the real way instead.
MAX_INSTANTS = 2_000
MAX_BYTES = 512 * 1024 * 1024


class Snapshotter:
    """In the fault-free run's child: ``snapshotter(label, when)`` copies the point's directory
    to ``into/N`` and notes the instant. A copy that would pass a limit, or that cannot be made
    (a file that is not a regular file, a directory or a link; a full disk), notes why instead,
    once, and nothing more is copied: the points after it run the real way. A failed copy never
    reaches the program, whose call the instant is in."""

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
            target = self._into / str(self._count)
            try:
                size = _size(self._point_dir)
                if self._count >= MAX_INSTANTS or self._bytes + size > MAX_BYTES:
                    self._stop(f"past {MAX_INSTANTS} instants or {MAX_BYTES} bytes")
                    return
                _copy_tree(self._point_dir, target)
            except (OSError, _NotCopied) as exc:
                shutil.rmtree(target, ignore_errors=True)
                self._stop(f"a copy failed at {label} {when}: {exc}")
                return
            self._note({"n": self._count, "label": label, "when": when})
            self._count += 1
            self._bytes += size

    def _stop(self, why: str) -> None:
        self._full = True
        self._note({"full": why})

    def _note(self, row: dict[str, object]) -> None:
        line = (json.dumps(row) + "\n").encode("utf-8")
        fd = _OPEN(str(self._into / MANIFEST), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _WRITE(fd, line)
        finally:
            _CLOSE(fd)


class _NotCopied(Exception):
    """A file the snapshot cannot hold as it is (a socket, a FIFO, a device): the snapshots
    stop there. Internal to this module: ``Snapshotter`` turns it into its manifest's reason."""


# The copy runs inside the fault-free run's child, whose program's writes are boundaries (the
# python target patches ``open``, ``os.open``, ``os.write``...): it uses the functions as they were
# when this module was imported, before any target patched them, so copying crosses none.
_OPEN, _WRITE, _CLOSE, _SENDFILE = os.open, os.write, os.close, os.sendfile


def _size(directory: Path) -> int:
    """Bytes of the regular files under ``directory`` (links not followed)."""
    total = 0
    for root, _, names in os.walk(directory):
        for name in names:
            info = os.lstat(os.path.join(root, name))
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def _copy_tree(source: Path, target: Path) -> None:
    """``source`` copied to ``target`` (new) through the unpatched calls: directories, regular
    files byte for byte (``sendfile``) with their modes and times, symbolic links as links.
    Anything else raises ``_NotCopied``."""
    os.mkdir(target)
    for root, dirs, names in os.walk(source):
        into = target / os.path.relpath(root, source)
        for name in [*dirs, *names]:
            path = os.path.join(root, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(path), into / name)
            elif stat.S_ISDIR(info.st_mode):
                os.mkdir(into / name)
            elif stat.S_ISREG(info.st_mode):
                _copy_file(path, str(into / name), info)
            else:
                raise _NotCopied(f"{path} is not a regular file, a directory or a link")
    for root, dirs, _ in os.walk(source, topdown=False):  # a directory's times, once it is full
        for name in dirs:
            path = os.path.join(root, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                copied = target / os.path.relpath(path, source)
                os.chmod(copied, stat.S_IMODE(info.st_mode))
                os.utime(copied, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_file(path: str, to: str, info: os.stat_result) -> None:
    """One regular file, its bytes as they are now (a file that shrinks while it is copied is
    copied as far as it goes), its mode and its times: a program that resumes from its newest
    file by modification time finds the same one."""
    src = _OPEN(path, os.O_RDONLY)
    try:
        dst = _OPEN(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            offset = 0
            while offset < info.st_size:
                sent = _SENDFILE(dst, src, offset, info.st_size - offset)
                if sent == 0:
                    break
                offset += sent
            os.fchmod(dst, stat.S_IMODE(info.st_mode))
        finally:
            _CLOSE(dst)
    finally:
        _CLOSE(src)
    os.utime(to, ns=(info.st_atime_ns, info.st_mtime_ns))


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
    file that names its absolute path reads as it did when the snapshot was taken). The
    directory's owner marker (``sim.world.tempdirs.OWNER_FILE``) is neither removed nor copied:
    a kill between the two must not leave the directory unmarked."""
    for entry in point_dir.iterdir():
        if entry.name == OWNER_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.copytree(
        copy,
        point_dir,
        symlinks=True,
        dirs_exist_ok=True,
        ignore=lambda where, names: [OWNER_FILE] if Path(where) == copy else [],
    )
