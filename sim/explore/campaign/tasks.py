"""What an engine is (``engines``): it takes tasks and calls ``done`` in the driver, once per task,
with the unit's document or the error that stopped it. Apart from the engines, so the Dask engine
and the local one share it without importing each other."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sim.errors import UserError
from sim.explore.campaign.plan import Unit
from sim.explore.progress import Progress


@dataclass(frozen=True)
class Task:
    """A unit to run and what a worker needs to run it (``plan.Plan.task``)."""

    unit: Unit
    payload: dict[str, Any]


#: ``done(task, document, error)``: exactly one of the two is None; returns the summary its
#: progress line ends with.
Done = Callable[[Task, dict[str, Any] | None, str | None], str]


class Engine(Protocol):
    progress: Progress | None  # where a line per unit goes (set once the command's is open)

    def run(self, tasks: Sequence[Task], done: Done) -> None: ...


class EngineUnavailable(UserError, RuntimeError):
    """An engine that cannot run here (its optional extra is not installed): one line."""
