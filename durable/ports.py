"""Ports: everything the runtime needs from the outside world, and the real implementations.

The runtime never calls ``time``, ``uuid``, ``os`` or threads directly; it is handed these ports.
Production passes the real implementations below; the simulator passes simulated ones that cross a
labelled boundary on every call (and can refuse every call once their process has crashed). This is
the seam that lets one runtime run both for real and under a deterministic virtual world.

This module is the only place in ``durable/`` allowed to touch the wall clock, random ids, the
operating system's files and threads.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

import trio

T = TypeVar("T")


class Clock(Protocol):
    """Monotonic time in seconds, and sleeping until a deadline on the same scale."""

    def now(self) -> float: ...

    async def sleep_until(self, deadline_s: float) -> None: ...


class FileSystem(Protocol):
    """The file operations the stores need, each one a crash boundary under the simulator.

    Paths are ``/``-separated strings. ``write`` creates or truncates; ``append`` extends; neither
    is durable across power loss until ``fsync`` (file contents) and ``fsync_dir`` (the entry).
    """

    def makedirs(self, path: str) -> None: ...

    def exists(self, path: str) -> bool: ...

    def read(self, path: str) -> bytes: ...

    def size(self, path: str) -> int: ...

    def write(self, path: str, data: bytes) -> None: ...

    def append(self, path: str, data: bytes) -> None: ...

    def truncate(self, path: str, size: int) -> None: ...

    def fsync(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def listdir(self, path: str) -> list[str]: ...

    def unlink(self, path: str) -> None: ...

    def exclusive(self, path: str) -> AbstractContextManager[None]:
        """Hold an exclusive lock on the existing directory ``path`` against every other
        process for the ``with`` block; the operating system drops it when the process dies.
        Not a crash boundary: it writes nothing. Held only around a read-modify-write, never
        across an ``await``, so a wait for it is short and bounded."""
        ...


class Blocking(Protocol):
    """Runs a blocking call (SQLite). ``label`` names the boundary for the simulator."""

    async def run(self, label: str, fn: Callable[[], T]) -> T: ...


class Ids(Protocol):
    """New unique ids; ``kind`` is a readable prefix (``sub``, ``run``, ``task``, ``evt``)."""

    def new(self, kind: str) -> str: ...


@dataclass(frozen=True)
class Ports:
    clock: Clock
    fs: FileSystem
    blocking: Blocking
    ids: Ids


# -- real implementations ------------------------------------------------------------------------


class TrioClock:
    """trio's clock: virtual under a MockClock. Its origin is random per ``trio.run``, so use it
    only where every reader of a timestamp lives in the same run (tests, single-process tools)."""

    def now(self) -> float:
        return trio.current_time()

    async def sleep_until(self, deadline_s: float) -> None:
        await trio.sleep_until(deadline_s)


class WallClock:
    """Wall-clock seconds since the epoch. Lease expiries are compared by *other* processes, so
    they need a time scale shared across processes; trio's clock has a random per-run offset and
    cannot serve. Sleeping converts the deadline to a trio duration."""

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, deadline_s: float) -> None:
        await trio.sleep(max(0.0, deadline_s - time.time()))


class OsFileSystem:
    """The operating system's files. ``fsync_dir`` opens the directory and fsyncs it (POSIX)."""

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def write(self, path: str, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)

    def append(self, path: str, data: bytes) -> None:
        with open(path, "ab") as f:
            f.write(data)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def unlink(self, path: str) -> None:
        os.unlink(path)

    #: How long ``exclusive`` waits for another process's lock before giving up. A holder keeps
    #: it for one read-modify-write (microseconds to a few fsyncs); a longer wait means the
    #: holder is stopped (SIGSTOP, a debugger), and the caller gets an error, not a hang.
    lock_wait_s: float = 5.0

    @contextmanager
    def exclusive(self, path: str) -> Iterator[None]:
        """``flock(LOCK_EX)`` on the directory itself (no lock file to create, list or lose).
        Polled with ``LOCK_NB`` so the wait is bounded by ``lock_wait_s``: the runtime calls
        the store on its event loop's thread, which a blocking ``flock`` would freeze."""
        fd = os.open(path, os.O_RDONLY)
        try:
            deadline_s = time.monotonic() + self.lock_wait_s
            pause_s = 0.0005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline_s:
                        raise TimeoutError(
                            errno.EWOULDBLOCK,
                            f"another process has held the lock for over {self.lock_wait_s} s",
                            path,
                        ) from None
                    time.sleep(pause_s)
                    pause_s = min(pause_s * 2, 0.05)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock


class ThreadBlocking:
    """Runs blocking calls on trio's worker threads so the event loop keeps going."""

    async def run(self, label: str, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn)


class InlineBlocking:
    """Runs blocking calls inline: for tools and tests where a thread is not wanted."""

    async def run(self, label: str, fn: Callable[[], T]) -> T:
        return fn()


class UuidIds:
    def new(self, kind: str) -> str:
        return f"{kind}-{uuid.uuid4().hex[:16]}"


def real_ports() -> Ports:
    """The production ports: wall clock, OS files, worker threads, random ids."""
    return Ports(clock=WallClock(), fs=OsFileSystem(), blocking=ThreadBlocking(), ids=UuidIds())
