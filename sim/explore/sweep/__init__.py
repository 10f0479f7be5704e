"""Exhaustive crash sweeps (docs/architecture.md, 2.5).

A fault-free run of the scenario records its ordered boundary trace (N boundaries). Depth 1 runs
every schedule with one crash: each boundary x {before, after} x the chosen crash kinds. Depth 2
also crashes once more at every boundary that the depth-1 run reached after its first crash (the
recovery and everything after it). Every schedule gets every oracle, I10 included (the schedule is
run twice and the fingerprints compared; ``modes``).

The package, a module per concern: ``prepare`` (what a sweep knows before any crash schedule),
``modes`` (I10's modes), ``naive`` (every schedule from scratch), ``fast`` (the forking and split
paths), ``parts`` (a fast sweep in parts, and how a part is recorded) and ``core`` (``sweep``
and ``sweep_part``). Both take what is swept as one ``SweepPlan`` (``sim.explore.plan``,
re-exported here with its ``Roots`` and determinism modes). What a sweep records of each judged
schedule is ``sim.explore.recording``'s.
"""

from __future__ import annotations

from sim.explore.plan import EVERY_POINT, Roots, SweepPlan
from sim.explore.recording import Failure, Judged, ScenarioSweep, repro_command
from sim.explore.sweep.core import sweep, sweep_part
from sim.explore.sweep.modes import (
    DETERMINISM_MODES,
    DETERMINISM_SAMPLE_EVERY,
    FORK_FROM_BOUNDARIES,
    Determinism,
    determinism_mode,
    judge_as,
    wants_rerun,
)
from sim.explore.sweep.parts import SweepPart, record_part
from sim.explore.sweep.prepare import (
    base_schedule,
    depth1_schedules,
    listed_schedules,
    swept_kinds,
    twins,
)

__all__ = [
    "DETERMINISM_MODES",
    "DETERMINISM_SAMPLE_EVERY",
    "EVERY_POINT",
    "FORK_FROM_BOUNDARIES",
    "Determinism",
    "Failure",
    "Judged",
    "Roots",
    "ScenarioSweep",
    "SweepPart",
    "SweepPlan",
    "base_schedule",
    "depth1_schedules",
    "determinism_mode",
    "judge_as",
    "listed_schedules",
    "record_part",
    "repro_command",
    "sweep",
    "sweep_part",
    "swept_kinds",
    "twins",
    "wants_rerun",
]
