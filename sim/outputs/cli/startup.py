"""Ctrl-C or SIGTERM while ``durable-sim`` is still starting: exit 130 with the one line.

The command line imports most of ``sim`` before ``entry`` runs (over a second): a Ctrl-C there
raised ``KeyboardInterrupt`` out of the console script's import and printed its traceback, and a
SIGTERM killed the process (-15) -- the exit-status contract (130, one line) holds only once
``entry`` has its own handling. So the package's ``__init__`` calls ``guard`` before it imports
the commands: an interrupt that nothing catches on its way out ends the process with 130 and
the line (``sys.excepthook``: it runs only for an exception no caller caught), and SIGTERM stops
like Ctrl-C. Only stdlib here: this runs before the imports it guards.

A process that imports the package as a library (a test calling ``main``) gets its own
excepthook and SIGTERM handler back as soon as the import is done (``imported``); the command's
process keeps them until ``entry`` takes over (``handover``), so no instant between the import
and ``entry`` is left unguarded.

The other end: once the command's status is decided and the interpreter finalizes, Python puts
every signal's default disposition back (``signal``'s finalization) and then frees its heap,
which takes a while (a fifth of a second after ``durable-sim list``): a Ctrl-C or SIGTERM there
killed the process (-2, -15) after the command had ended (4 of 30 signals into ``list``, in
``tests/sim/outputs/test_interrupt_stress.py``). The command's last exit handler (registered
here, before every import, so it runs after all the others) holds both signals back until the
process is gone: a signal that late comes after the command, which exits with its own status.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading

# Only what the interpreter has loaded already, or nearly: every module imported here is a
# moment before the guard is up. The annotations' types are for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType, TracebackType
    from typing import Any

#: What ``guard`` replaced, to put back: ``excepthook`` and ``sigterm`` (absent: not replaced).
_REPLACED: dict[str, Any] = {}
#: Set by ``imported`` in the command's process (``_hold_stops_at_exit``).
_COMMAND: list[bool] = []
INTERRUPTED = "durable-sim: interrupted"


def guard() -> None:
    """Before the command line's imports: an uncaught interrupt exits 130 quietly, and SIGTERM
    raises one (unless the process already handles SIGTERM its own way, or ignores it)."""
    if _REPLACED or threading.current_thread() is not threading.main_thread():
        return
    _REPLACED["excepthook"] = sys.excepthook
    sys.excepthook = _interrupted_quietly
    atexit.register(_hold_stops_at_exit)  # before any other: so it runs after them all
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        _REPLACED["sigterm"] = signal.signal(signal.SIGTERM, _sigterm_interrupts)


def imported() -> None:
    """After the imports: a library importer gets its hooks back; the command keeps them until
    ``entry`` takes over."""
    if not _running_the_command():
        _restore(sigterm=True)
    else:
        _COMMAND.append(True)


def _hold_stops_at_exit() -> None:
    """The command's last exit handler: SIGINT and SIGTERM held back until the process is gone
    (see the module's docstring). Nothing in a library importer's process."""
    if _COMMAND and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def handover() -> None:
    """``entry`` handles interrupts from here: the excepthook goes back. SIGTERM's handler stays
    until ``main`` installs its own (``sim.explore.interrupts.sigterm_as_sigint``)."""
    _restore(sigterm=False)


def _restore(*, sigterm: bool) -> None:
    hook = _REPLACED.pop("excepthook", None)
    if hook is not None and sys.excepthook is _interrupted_quietly:
        sys.excepthook = hook
    if sigterm and "sigterm" in _REPLACED:
        previous: Callable[[int, FrameType | None], Any] | int = _REPLACED.pop("sigterm")
        if signal.getsignal(signal.SIGTERM) is _sigterm_interrupts:
            signal.signal(signal.SIGTERM, previous)


def _running_the_command() -> bool:
    """Whether this process is ``durable-sim`` (its console script, or ``python -m sim``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", None) == "sim.__main__":
        return True
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return script.removesuffix(".exe") == "durable-sim"


def _interrupted_quietly(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        _REPLACED.get("excepthook", sys.__excepthook__)(kind, value, traceback)
        return
    with contextlib.suppress(Exception):  # a closed or broken stdout: the line still goes out
        sys.stdout.flush()
    print(INTERRUPTED, file=sys.stderr, flush=True)
    raise SystemExit(130)  # from an excepthook: the interpreter exits with it, quietly


def _sigterm_interrupts(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt("SIGTERM")
