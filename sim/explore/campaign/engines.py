"""Executors: how the units a campaign still needs get run. Thin and swappable: an engine takes
tasks and calls ``done`` in this process once per task, with the unit's document or the error
that stopped it; the driver verifies and files each result as it arrives
(``sim.explore.campaign.run``). Nothing here imports an engine's library: ``dask_engine`` does,
and only when ``--engine dask`` is chosen (``engine_named``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sim.explore import interrupts, parallel
from sim.explore.campaign.tasks import Done, Engine, EngineUnavailable, Task
from sim.explore.campaign.unit import run_unit
from sim.explore.progress import Progress

ENGINES = ("local", "dask")
__all__ = ["ENGINES", "Done", "Engine", "EngineUnavailable", "LocalEngine", "Task", "engine_named"]


@dataclass
class LocalEngine:
    """This machine's cores: ``jobs`` units at once, each in a worker forked from this process
    (``sim.explore.parallel``, the pool ``durable-sim sweep`` runs its sweeps in), costliest
    first. A unit's own sweep runs one forked child at a time, so ``jobs`` is the cores used."""

    jobs: int
    progress: Progress | None = None

    def run(self, tasks: Sequence[Task], done: Done) -> None:
        steps = [
            parallel.Step(task.unit.label, partial(_guarded, task.payload), task.unit.cost)
            for task in tasks
        ]
        by_step = {id(step): task for step, task in zip(steps, tasks, strict=True)}

        def finished(step: parallel.Step, result: tuple[Any, str | None]) -> str:
            # A result that arrives after a stop is not filed: its unit may have been stopped
            # in a way its own process could not see (``interrupts.record_dropped``).
            interrupts.stop_if_requested()
            doc, error = result
            return done(by_step[id(step)], doc, error)

        # ``finished`` is called as each step ends only through a progress object: a silent one
        # when nobody watches.
        progress = self.progress or Progress(command="campaign", unit="schedules", enabled=False)
        watched: Any = _Stopping(progress)
        parallel.run_steps(steps, jobs=self.jobs, progress=watched, finished=finished)


class _Stopping:
    """A progress object that also stops the pool when a stop was requested
    (``sim.explore.interrupts``): the pool checks the request itself while it waits; this stops
    it as well between two reports of a worker."""

    def __init__(self, inner: Progress) -> None:
        self._inner = inner

    def start(self, label: str) -> None:
        interrupts.stop_if_requested()
        self._inner.start(label)

    def advance(self, n: int = 1, *, label: str | None = None) -> None:
        interrupts.stop_if_requested()
        self._inner.advance(n, label=label)

    def finish(self, summary: str, *, label: str | None = None) -> None:
        self._inner.finish(summary, label=label)
        interrupts.stop_if_requested()


def _guarded(
    payload: dict[str, Any], *, progress: Callable[[int], None]
) -> tuple[dict[str, Any] | None, str | None]:
    """In a worker: the unit's document, or the traceback of what stopped it -- one unit's
    failure must not stop the others (an interrupt still does)."""
    try:
        return run_unit(payload, progress=progress), None
    except Exception:
        return None, traceback.format_exc()


def engine_named(
    name: str, *, jobs: int, scheduler: str | None, progress: Progress | None
) -> Engine:
    """The engine ``--engine`` names. Dask is imported here, and only for ``dask``."""
    if name == "local":
        if scheduler is not None:
            raise EngineUnavailable("--scheduler needs --engine dask")
        return LocalEngine(jobs, progress)
    if name == "dask":
        # the dask extra (the engine imports distributed): only when asked for
        from sim.explore.campaign.dask_engine import DaskEngine

        return DaskEngine.create(jobs=jobs, scheduler=scheduler, progress=progress)
    raise EngineUnavailable(f"--engine takes {' or '.join(ENGINES)}, got {name!r}")
