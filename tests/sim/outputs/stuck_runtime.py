"""A runtime seam for ``realcrash --preempt`` tests, in a module of its own: the real processes
load it by ``FILE.py:NAME``, so it imports nothing from the test suite."""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from durable.runtime import Runtime

#: Longer than any grace a test gives: the parent must SIGKILL the process first.
STUCK_S = 60.0


@asynccontextmanager
async def stuck_shutdown_runtime(**keywords: Any) -> AsyncIterator[Any]:
    """A swapped ``open_runtime`` seam whose graceful shutdown, once the process got SIGTERM,
    never ends in wall time (a blocking wait, as a runtime stuck joining a thread): the grace
    must run out. It notes the signal by chaining the handler the child installed."""
    termed: list[int] = []
    installed = signal.getsignal(signal.SIGTERM)

    def note(signum: int, frame: Any) -> None:
        termed.append(signum)
        if callable(installed):
            installed(signum, frame)

    signal.signal(signal.SIGTERM, note)
    async with Runtime.open(**keywords) as runtime:
        yield runtime
        if termed:
            time.sleep(STUCK_S)
