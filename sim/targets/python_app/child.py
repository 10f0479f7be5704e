"""Inside a ``python`` target child: install the boundaries, load the user's program, wrap its
effect functions, run it in the point's ``app`` directory; and, in the parent, what its trace
says it did (``read_state``). See ``sim.targets.python_app`` for what is a boundary and why.

Everything here patches the child's own interpreter only: it is a fresh process per run, killed
or ended, so nothing is restored.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import io
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Literal

from sim.targets.boundaries import TRACE_NAME, Boundaries, read_trace
from sim.targets.kit.landing import DETAIL_CHARS
from sim.targets.kit.loading import load_app
from sim.targets.protocol import ChildContext, TargetOptions, TargetState
from sim.targets.python_app import postgres

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike, ReadableBuffer, StrOrBytesPath


def run_child(ctx: ChildContext) -> str:
    """Run the program once: ``returned`` or ``raised`` (a raise, or ``sys.exit`` with a status
    other than 0, is the program's own failure, judged as a run that did not finish, not the
    harness's; ``sys.exit(0)`` returns None)."""
    _install_boundaries(ctx.boundaries, keep_fds={ctx.boundaries.log_fd})
    _, function = load_app(ctx)
    try:
        value = function()
        if inspect.iscoroutine(value):
            value = asyncio.run(value)
    except SystemExit as exc:  # a script's own `sys.exit(...)`: a success only with status 0
        if exc.code not in (None, 0):
            ctx.boundaries.note(what="raised", error=f"SystemExit: {exc.code}"[:DETAIL_CHARS])
            return "raised"
        value = None
    except Exception as exc:
        ctx.boundaries.note(what="raised", error=f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS])
        return "raised"
    ctx.boundaries.note(what="returned", value=repr(value)[:DETAIL_CHARS])
    return "returned"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """What the trace says the last process did: the program returned (its value is the run's
    answer, compared with the fault-free run's), or raised, or was never seen to end."""
    del options
    notes = [r for r in read_trace(point_dir / TRACE_NAME) if r["t"] == "note"]
    last = notes[-1] if notes else {}
    if last.get("what") == "returned":
        return TargetState(finished=True, answer=str(last["value"]))
    if last.get("what") == "raised":
        return TargetState(pending=[f"the program raised {last['error']}"])
    return TargetState(pending=["the program did not return"])


def _install_boundaries(boundaries: Boundaries, *, keep_fds: set[int]) -> None:
    """``sqlite3.connect`` hands out connections whose commits cross ``sqlite.commit#n``;
    ``os.fsync``, ``os.replace`` and ``os.rename`` cross ``os.fsync#n`` and so on, as does
    ``os.write`` on a descriptor ``os.open`` opened for writing; psycopg's commits cross
    ``pg.commit#n`` once the program imports it (``sim.targets.python_app.postgres``). The
    harness's own trace file (``keep_fds``) is synced and written without a boundary."""
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd: FileDescriptorLike) -> None:
        number = fd if isinstance(fd, int) else fd.fileno()
        if number in keep_fds:
            return real_fsync(number)
        label = boundaries.numbered("os.fsync")
        return boundaries.crossing(label, lambda: real_fsync(fd), what=_fd_name(number))

    def moved(kind: str, real: Callable[..., None]) -> Callable[..., None]:
        def move(src: StrOrBytesPath, dst: StrOrBytesPath, *args: object, **kwargs: object) -> None:
            label = boundaries.numbered(kind)
            what = f"{os.path.basename(os.fsdecode(src))} -> {os.path.basename(os.fsdecode(dst))}"
            boundaries.crossing(label, lambda: real(src, dst, *args, **kwargs), what=what)

        return move

    os.fsync = fsync
    os.replace = moved("os.replace", real_replace)
    os.rename = moved("os.rename", real_rename)
    _instrument_sqlite(boundaries)
    _instrument_open(boundaries)
    _instrument_os_writes(boundaries, keep_fds=keep_fds)
    postgres.install(boundaries)


#: Modes of ``open`` that write: the file's ``close`` is a boundary (what Python buffered is lost
#: by a kill before it, as a program that keeps its progress in a JSON file finds out).
_WRITING = frozenset("wax+")


class _ClosingIsABoundary:
    """A file opened for writing whose ``close`` (or ``with`` exit) crosses ``file.close#n``;
    everything else is the file's own."""

    def __init__(self, file: IO[str] | IO[bytes], boundaries: Boundaries, name: str) -> None:
        self._file, self._boundaries, self._name = file, boundaries, name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._file, attribute)

    def __iter__(self) -> Iterator[object]:
        return iter(self._file)

    def __next__(self) -> object:
        return next(self._file)

    def __enter__(self) -> _ClosingIsABoundary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._file.closed:
            return
        label = self._boundaries.numbered("file.close")
        self._boundaries.crossing(label, self._file.close, what=self._name)


def _instrument_open(boundaries: Boundaries) -> None:
    """``open`` (and ``io.open``, which ``pathlib`` calls) hands out files whose ``close`` is a
    boundary when they are opened for writing by name."""
    real_open = io.open

    def opened(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if isinstance(file, int) or not _WRITING.intersection(mode):
            return handle
        return _ClosingIsABoundary(handle, boundaries, os.path.basename(os.fsdecode(file)))

    builtins.open = opened
    io.open = opened


#: ``os.open`` flags that open for writing: an ``os.write`` on such a descriptor is a boundary.
_WRITE_ACCESS = os.O_WRONLY | os.O_RDWR


def _instrument_os_writes(boundaries: Boundaries, *, keep_fds: set[int]) -> None:
    """``os.write`` on a descriptor the program opened for writing with ``os.open`` crosses
    ``os.write#n`` (a program that writes its progress record by hand loses it to a kill
    before the write, and keeps it after). The descriptor is remembered with its file's identity
    (device, inode), so a number reused after a close ``os.close`` did not see (a file object
    made by ``os.fdopen`` closes it itself) -- say, a pipe of ``subprocess`` -- is no boundary."""
    real_open, real_write, real_close = os.open, os.write, os.close
    opened: dict[int, tuple[int, int, str]] = {}

    def open_(
        path: StrOrBytesPath, flags: int, mode: int = 0o777, *, dir_fd: int | None = None
    ) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if flags & _WRITE_ACCESS and fd not in keep_fds:
            stat = os.fstat(fd)
            opened[fd] = (stat.st_dev, stat.st_ino, os.path.basename(os.fsdecode(path)))
        return fd

    def write(fd: int, data: ReadableBuffer) -> int:
        known = opened.get(fd)
        if known is None:
            return real_write(fd, data)
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != known[:2]:
            del opened[fd]
            return real_write(fd, data)
        label = boundaries.numbered("os.write")
        what = f"{known[2]}: {memoryview(data).nbytes} bytes"
        return boundaries.crossing(label, lambda: real_write(fd, data), what=what)

    def close(fd: int) -> None:
        opened.pop(fd, None)
        real_close(fd)

    os.open = open_
    os.write = write
    os.close = close


def _fd_name(fd: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return f"fd {fd}"


def _instrument_sqlite(boundaries: Boundaries) -> None:
    real_connect = sqlite3.connect

    class Connection(sqlite3.Connection):
        """A connection whose commits are boundaries (a commit with nothing to commit is not)."""

        def commit(self) -> None:
            if not self.in_transaction:
                return sqlite3.Connection.commit(self)
            label = boundaries.numbered("sqlite.commit")
            return boundaries.crossing(label, lambda: sqlite3.Connection.commit(self))

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            tb: TracebackType | None,
        ) -> Literal[False]:
            if exc_type is None and self.in_transaction:
                try:
                    self.commit()
                except BaseException:  # as sqlite3's own __exit__: a failed commit rolls back
                    self.rollback()
                    raise
                return False
            return sqlite3.Connection.__exit__(self, exc_type, exc, tb)

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        if "factory" in kwargs or len(args) >= 6:  # the program's own connection class
            connection: sqlite3.Connection = real_connect(*args, **kwargs)
        else:
            connection = real_connect(*args, factory=Connection, **kwargs)
        return connection

    sqlite3.connect = connect  # type: ignore[assignment]  # same signature, keyword factory
