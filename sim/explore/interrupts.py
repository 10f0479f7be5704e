"""How a sweep stops when it is told to (Ctrl-C, SIGTERM): a flag, checked at every fork and wait.

An interrupt raised as an exception can be lost. A forking sweep forks thousands of times, and
Python runs its after-fork hooks (``logging``'s lock release among them) in the parent: a
``KeyboardInterrupt`` raised by a signal handler while a hook runs is printed as "Exception
ignored" and dropped, so the sweep ran on to its end (exit 0) or reported its children's
interrupted runs as harness errors (exit 5). So the signal handlers here *record* the stop first
(``request_stop``) and only then do what the process would otherwise do, and every fork holds the
stop signals back until both processes know who they are (``hold``); the loops that fork and
wait -- the fork plan (``sim.explore.forking``), the pool of sweeps (``sim.explore.parallel``),
the campaign engines -- call ``stop_if_requested`` before every fork and at least every
``STOP_CHECK_S`` while they wait, and unwind from there, where their cleanup (kill the children,
remove the directories) runs. ``durable-sim`` then exits 130 (``sim.outputs.cli.main``).

Two handlers, for two places:

- ``flag_interrupts`` wraps the SIGINT handler in place *inside* ``trio.run``: trio's own, which
  delivers ``KeyboardInterrupt`` at a checkpoint where it is safe. The wrapper records the stop,
  then calls it, so trio's behaviour is unchanged and the flag survives a swallowed exception.
- ``stop_on_signals`` replaces the SIGINT and SIGTERM handlers outside trio (a pool's or an
  engine's driving loop) with one that only records the stop: nothing is raised inside library
  code; the loop's next check raises.

And one hook for an interrupt that was raised but that nobody could receive (``record_dropped``):
an interrupt must end a command as an interrupt (exit 130), never as a verdict.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

#: Set when the process is told to stop; never cleared while a command runs (``main`` clears it
#: when a command starts). A list, so tests can patch it and readers need no ``global``.
STOP_REQUESTED: list[bool] = []
#: Wall time a waiting loop may go without looking at ``STOP_REQUESTED``.
STOP_CHECK_S = 0.1


def request_stop() -> None:
    """Ask every forking loop of this process to stop at its next fork or wait."""
    STOP_REQUESTED.append(True)


def stop_requested() -> bool:
    return bool(STOP_REQUESTED)


def stop_if_requested() -> None:
    """Unwind from here if a stop was requested: the caller's cleanup runs on the way out."""
    if STOP_REQUESTED:
        raise KeyboardInterrupt("stop requested")


#: The signals a fork holds back (``hold``): the ones that stop a command.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def hold() -> set[int | signal.Signals]:
    """Block the stop signals until ``release``; returns the mask to restore.

    Around ``os.fork``: Python runs its after-fork hooks in both processes, and an exception a
    handler raises inside one is printed ("Exception ignored") and dropped. A signal that arrives
    while held waits, and is delivered at ``release`` -- in the parent, after the child is in its
    books (so it is killed on the way out); in the child, once it knows it is the child."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def release(mask: set[int | signal.Signals]) -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def clear() -> None:
    """Forget an earlier stop (a command starting in a process that already handled one)."""
    STOP_REQUESTED.clear()


def _on_main_thread() -> bool:
    # Only the main thread may set signal handlers (and only it receives signals).
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def flag_interrupts() -> Iterator[None]:
    """Inside ``trio.run``: SIGINT records the stop, then goes to the handler it had (trio's).

    Restored on the way out, before ``trio.run`` restores its own, so trio finds its handler
    where it left it. A process that ignores SIGINT (a background job of a script) keeps
    ignoring it; SIGTERM still stops it (``main`` records the stop itself)."""
    inner = signal.getsignal(signal.SIGINT)
    if not _on_main_thread() or not callable(inner):
        yield
        return
    handler = _recording(inner)
    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, inner)


def _recording(
    inner: Callable[[int, FrameType | None], object],
) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        request_stop()
        inner(signum, frame)

    return handler


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Outside trio: SIGINT and SIGTERM only record the stop; the loop's checks raise.

    A process forked inside (a pool's worker) inherits these handlers: it must call
    ``child_defaults`` first, so the sweep it runs gets trio's handler again."""
    if not _on_main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    # A signal the process ignores (SIGINT in a script's background job) stays ignored.
    previous = {signum: h for signum, h in previous.items() if h != signal.SIG_IGN}
    for signum in previous:
        signal.signal(signum, _record)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _record(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    request_stop()


def child_defaults() -> None:
    """In a process forked under ``stop_on_signals``: Python's SIGINT handler again (trio installs
    its own only over that one) and SIGTERM as ``main`` sets it (``sigterm_as_sigint``), so the
    child unwinds through its cleanup."""
    if signal.getsignal(signal.SIGINT) is _record:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is _record:
        signal.signal(signal.SIGTERM, sigterm_as_sigint)


def sigterm_as_sigint(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (a CI job cancelled, ``timeout``) stops like Ctrl-C: the stop is recorded, then a
    SIGINT sent to this process, which trio delivers as ``KeyboardInterrupt`` at a safe point."""
    del signum, frame
    request_stop()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started with SIGINT ignored (a script's ``&`` job, which POSIX shells start so): the
        # SIGINT below would be lost and the command would run on to its end. The stop was asked
        # for, so SIGINT gets Python's own handler back first.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def record_dropped() -> Iterator[None]:
    """While a command runs: an interrupt Python had to drop is recorded as a stop.

    A ``KeyboardInterrupt`` raised where no caller can receive it goes to ``sys.unraisablehook``
    and is dropped: inside a SQLite VFS call whose error SQLite ignores (a sync or a journal's
    delete), an after-fork hook, a ``__del__``. SQLite goes on with an I/O error instead, so
    the run goes on *differently*. A SIGINT outside a forking run records nothing before trio
    raises it, so the interrupt was lost: an in-process sweep interrupted while I10's second
    run of its fault-free run ran finished that run with another trace and reported "its
    fault-free run fails (I10 ...)", exit 2. Recorded here, the stop is honoured where the
    command next checks (``stop_if_requested``), before it reports anything. The SIGINT itself
    is left to trio, which delivers it where that is safe (a wrapping handler would make trio
    keep out of the way: it installs its own only over Python's default one).

    The SQLite VFS's own hook drops these quietly (``sim.world.sqlite_vfs``): it is imported
    first, so this hook sees every one before it."""
    from sim.world import sqlite_vfs  # noqa: F401  # its hook must be below this one

    previous = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            request_stop()
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous


def interrupt_only(exc: BaseException) -> bool:
    """A KeyboardInterrupt, possibly wrapped in (nested) exception groups by trio's nurseries."""
    if isinstance(exc, BaseExceptionGroup):
        return all(interrupt_only(e) for e in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)
