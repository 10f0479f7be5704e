"""Progress of long commands: a bar on a terminal, plain lines everywhere else.

A CI log is not a terminal: a command that prints nothing for ten minutes looks hung, and is
killed as hung. So when stderr is not a terminal every step (a scenario on a store, a mutant, a
fuzzed scenario) gets a line when it starts and when it ends, and a long step a heartbeat line
every ``heartbeat_s`` of wall time. Wall time is read here only to pace the output; nothing the
simulator computes depends on it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # rich is imported only when a bar is drawn (see ``__enter__``)
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

HEARTBEAT_S = 15.0


@dataclass
class _Step:
    """One step's count and clock (wall time paces the lines, nothing else)."""

    started: float
    last_line: float
    done: int = 0


class Progress:
    """``with Progress(...) as p: p.start("step"); p.advance(n); p.finish("summary")``."""

    _task: TaskID  # the bar's one task: set with ``_bar``, and read only while it is drawn

    def __init__(
        self,
        *,
        command: str,
        unit: str,
        enabled: bool = True,
        stream: TextIO | None = None,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        assert heartbeat_s > 0
        self._command = command
        self._unit = unit
        self._enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._heartbeat_s = heartbeat_s
        self._bar: Bar | None = None
        self._label = ""  # the step started last
        self._steps: dict[str, _Step] = {}  # the steps begun and not yet finished

    @property
    def on_terminal(self) -> bool:
        return bool(getattr(self._stream, "isatty", lambda: False)())

    def __enter__(self) -> Progress:
        if self._enabled and self.on_terminal:
            # rich, only when a bar is drawn on a terminal (workers import this and draw none)
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(self._unit),
                console=Console(file=self._stream),
                transient=True,
                # No refresh thread: the sweep forks, and a thread holding a lock at fork time
                # (the console's) would deadlock the child. Refreshed on every update instead.
                auto_refresh=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self._command, total=None)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
            self._bar = None

    def start(self, label: str) -> None:
        """A new step begins. Steps may overlap (``sweep --jobs``): each keeps its own count and
        clock, and ``advance``/``finish`` name theirs (default: the one started last)."""
        self._label = label
        now = time.monotonic()
        self._steps[label] = _Step(started=now, last_line=now)
        if self._bar is not None:
            self._bar.update(self._task, description=label, refresh=True)
        else:
            self._line(f"{label} ...")

    def advance(self, n: int = 1, *, label: str | None = None) -> None:
        label = label if label is not None else self._label
        step = self._steps.setdefault(label, _Step(time.monotonic(), time.monotonic()))
        step.done += n
        if self._bar is not None:
            self._bar.update(self._task, advance=n, description=label, refresh=True)
            return
        now = time.monotonic()
        if now - step.last_line >= self._heartbeat_s:
            step.last_line = now
            self._line(f"{label} {step.done} {self._unit} ({now - step.started:.0f} s)")

    def finish(self, summary: str, *, label: str | None = None) -> None:
        """The step ended: one line saying how (also on a terminal, above the bar)."""
        label = label if label is not None else self._label
        step = self._steps.pop(label, None)
        elapsed = time.monotonic() - step.started if step is not None else 0.0
        text = f"{label} {summary} ({elapsed:.1f} s)"
        if self._bar is not None:
            self._bar.console.print(f"{self._command}: {text}", markup=False, highlight=False)
        else:
            self._line(text)

    def _line(self, text: str) -> None:
        if not self._enabled:
            return
        print(f"{self._command}: {text}", file=self._stream, flush=True)
