"""The plan: a campaign's deterministic list of units, their costs, and a shard's share.

A sweep unit is one scenario x store x crash kinds x seed x determinism mode, restricted to the
crash points whose fold root lies in a range of boundary indexes (``sim.explore.sweep.Roots``),
so a long trace is split inside itself. To draw the ranges the planner runs each scenario x
store's traced run once (deterministic, one run each, a few seconds for every bundled scenario)
and estimates each crash point's cost as the boundaries it re-runs: the suffix after it when the
sweep forks, the whole run when it does not (a run shorter than ``FORK_FROM_BOUNDARIES``), plus
a constant for the point's own work (a fork, the judging). Folding is not known at plan time;
it lowers every unit's cost by a similar factor.

The ranges of one sweep cover every index: the first starts at 0 and the last has no end, so a
point no unit would own cannot exist, whatever the units' traced runs say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sim.errors import UserError
from sim.explore import parallel
from sim.explore.campaign.address import digest, project_version, sweep_spec
from sim.explore.sweep import (
    FORK_FROM_BOUNDARIES,
    Roots,
    SweepPlan,
    determinism_mode,
    listed_schedules,
)
from sim.world.faults import CRASH_KINDS, CrashKind
from sim.world.scenario import Scenario, ScenarioError
from sim.world.stores import StoreKind

FORMAT = "durable-sim-campaign-plan"
#: 2: a sweep unit's specification carries its ``SweepPlan`` (scenario content included), and
#: the plan document no longer lists the scenarios apart.
SCHEMA_VERSION = 2

#: A unit's estimated cost is at most this (unless one boundary index alone costs more), in
#: boundaries run: ``long_horizon`` (~1,300-1,700 boundaries, ~6,600 points per store) becomes
#: ~25 units per store, every other bundled scenario one unit.
DEFAULT_UNIT_COST = 200_000.0
#: A crash point's own work (fork, recovery, judging) in boundaries' worth.
POINT_OVERHEAD = 50
#: What every unit repeats before its first point (the reference, traced and forking runs).
UNIT_OVERHEAD_RUNS = 3


class PlanError(UserError, ValueError):
    """A campaign that cannot be planned (bad options): one line for the user."""


@dataclass(frozen=True)
class Unit:
    """One unit of work: ``spec`` is what its ``address`` hashes (``address.digest``). A sweep
    unit's spec is its ``SweepPlan``'s JSON and the code version (``address.sweep_spec``); a
    fuzzing unit's is its fuzzer's options (``fuzz_budget``)."""

    address: str
    spec: dict[str, Any]
    label: str
    cost: float
    points: int

    @property
    def group(self) -> tuple[str, str]:
        """The sweep it is a part of: (scenario ref, store)."""
        plan = self.spec["plan"]
        return plan["ref"], plan["store"]

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "label": self.label,
            "cost": self.cost,
            "points": self.points,
            "spec": self.spec,
        }


@dataclass
class Plan:
    """Every unit of a campaign in plan order (scenario, store, range) and the options that made
    it. Each unit's spec carries its scenario (``SweepPlan.to_json``)."""

    config: dict[str, Any]
    units: list[Unit] = field(default_factory=list)
    version: str = ""

    @property
    def identity(self) -> str:
        """Two plans are the same plan when they list the same units in the same order."""
        return digest([unit.address for unit in self.units])

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "version": self.version,
            "identity": self.identity,
            "config": self.config,
            "units": [unit.to_json() for unit in self.units],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Plan:
        if doc.get("format") != FORMAT or doc.get("schema_version") != SCHEMA_VERSION:
            raise PlanError("not a campaign plan of this version of durable-sim")
        units = [
            Unit(u["address"], u["spec"], u["label"], u["cost"], u["points"]) for u in doc["units"]
        ]
        if any(digest(unit.spec) != unit.address for unit in units):
            raise PlanError("a unit's address does not match its specification")
        plan = cls(doc["config"], units, doc["version"])
        if plan.identity != doc.get("identity"):
            raise PlanError("the plan's identity does not match its units")
        return plan

    def task(self, unit: Unit) -> dict[str, Any]:
        """What a worker needs to run ``unit``: its specification (its plan holds the scenario)."""
        assert unit in self.units, unit.label
        return {"spec": unit.spec}


@dataclass(frozen=True)
class Split:
    """How sweeps are cut into units: at most ``points`` crash points, or at most ``cost``
    estimated cost, per unit (one of the two)."""

    points: int | None = None
    cost: float | None = DEFAULT_UNIT_COST

    def __post_init__(self) -> None:
        if (self.points is None) == (self.cost is None):
            raise PlanError("a split takes a number of points or a cost per unit, not both")
        if self.points is not None and self.points < 1:
            raise PlanError("--points-per-unit must be at least 1")
        if self.cost is not None and not self.cost > 0:
            raise PlanError("--unit-cost must be positive")

    def over(self, points: int, cost: float) -> bool:
        if self.points is not None:
            return points > self.points
        return cost > (self.cost or 0)

    def to_json(self) -> dict[str, Any]:
        return {"points_per_unit": self.points, "unit_cost": self.cost}


def plan_sweeps(
    scenarios: Sequence[tuple[str, Scenario]],
    *,
    stores: Sequence[str],
    crash_kinds: Sequence[str],
    seed: int = 0,
    determinism: str = "sample",
    split: Split | None = None,
    jobs: int = 1,
) -> Plan:
    """The units of a depth-1 sweep of every scenario (``(ref, scenario)``, ``ref`` as the
    command line names it) on every store, in the order ``durable-sim sweep`` lists them."""
    split = split or Split()
    mode = determinism_mode(determinism)
    bad = [kind for kind in crash_kinds if kind not in CRASH_KINDS]
    if bad or not crash_kinds:
        raise PlanError(f"crash kinds must be some of {', '.join(CRASH_KINDS)}: {bad}")
    refs = [ref for ref, _ in scenarios]
    twice = sorted({ref for ref in refs if refs.count(ref) > 1})
    if twice or len(set(stores)) != len(stores):
        raise PlanError(f"a scenario or store is named twice: {', '.join(twice) or stores}")
    for store in stores:
        if not StoreKind(store).forks:
            raise PlanError(f"a campaign forks its sweeps; the {store} store cannot be forked")
    version = project_version()
    groups = [(ref, scenario, store) for ref, scenario in scenarios for store in stores]
    steps = [
        parallel.Step(
            f"plan {scenario.name}[{store}]",
            partial(_points_by_index, scenario, store, seed, tuple(crash_kinds)),
        )
        for _, scenario, store in groups
    ]
    traced = parallel.run_steps(steps, jobs=jobs)
    refused = [counts for _, counts in traced if isinstance(counts, str)]
    if refused:
        raise PlanError(refused[0])
    units: list[Unit] = []
    for (ref, scenario, store), (boundaries, counts) in zip(groups, traced, strict=True):
        ranges = _ranges(counts, boundaries, split)
        for first, stop, points, cost in ranges:
            part = SweepPlan(
                scenario=scenario,
                store=StoreKind(store),
                seed=seed,
                crash_kinds=tuple(CrashKind(kind) for kind in crash_kinds),
                determinism=mode,
                roots=Roots(first, stop),
                ref=ref,
            )
            spec = sweep_spec(part, version=version)
            label = f"{scenario.name}[{store}]"
            if len(ranges) > 1:
                label += f" {first}-{'end' if stop is None else stop}"
            unit_cost = cost + UNIT_OVERHEAD_RUNS * boundaries
            units.append(Unit(digest(spec), spec, label, float(unit_cost), points))
    config = {
        "kind": "sweep",
        "stores": [str(s) for s in stores],
        "crash": list(crash_kinds),
        "seed": seed,
        "determinism": mode,
        "split": split.to_json(),
    }
    return Plan(config, units, version)


def _points_by_index(
    scenario: Scenario, store: str, seed: int, kinds: tuple[str, ...], *, progress: Any
) -> tuple[int, list[tuple[int, int]] | str]:
    """In a worker: the traced run's boundary count and, per boundary index, how many crash
    points the sweep lists there; or the one line saying why the scenario cannot be swept (its
    base crash names no boundary), for the planner to raise in the parent."""
    try:
        boundaries, schedules = listed_schedules(
            scenario,
            store=StoreKind(store),
            seed=seed,
            crash_kinds=kinds,
        )
    except ScenarioError as exc:
        return 0, str(exc)
    counts: dict[int, int] = {}
    for schedule in schedules:
        index = schedule.points[-1].index
        counts[index] = counts.get(index, 0) + 1
    progress(1)
    return boundaries, sorted(counts.items())


def point_cost(index: int, boundaries: int) -> int:
    """What one crash point at ``index`` costs, in boundaries run (see the module's text)."""
    rerun = boundaries if boundaries < FORK_FROM_BOUNDARIES else boundaries - index
    return rerun + POINT_OVERHEAD


def _ranges(
    counts: list[tuple[int, int]], boundaries: int, split: Split
) -> list[tuple[int, int | None, int, float]]:
    """Consecutive ranges ``[first, stop)`` of boundary indexes, each as large as the split
    allows (never cutting one index); with their points and estimated cost."""
    ranges: list[tuple[int, int | None, int, float]] = []
    first, points, cost = 0, 0, 0.0
    for index, n in counts:
        more = n * point_cost(index, boundaries)
        if points and split.over(points + n, cost + more):
            ranges.append((first, index, points, cost))
            first, points, cost = index, 0, 0.0
        points += n
        cost += more
    ranges.append((first, None, points, cost))
    return ranges


def shard_of(units: Sequence[Unit], *, shard: int, shards: int) -> list[Unit]:
    """Shard ``shard`` (1-based) of ``shards``: a deterministic share balanced by estimated
    cost -- the costliest unit first, each to the shard with the least cost so far (ties: the
    lower shard) -- so a long scenario's units are spread over every shard. In plan order."""
    if not 1 <= shard <= shards:
        raise PlanError(f"shard {shard}/{shards}: K must be between 1 and N")
    loads = [0.0] * shards
    owner: dict[int, int] = {}
    for i in sorted(range(len(units)), key=lambda i: (-units[i].cost, i)):
        least = min(range(shards), key=lambda s: (loads[s], s))
        loads[least] += units[i].cost
        owner[i] = least
    return [unit for i, unit in enumerate(units) if owner[i] == shard - 1]


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N): which shard of how many."""
    head, sep, tail = text.partition("/")
    if not sep or not head.isdigit() or not tail.isdigit():
        raise PlanError(f"--shard takes K/N (e.g. 2/4), got {text!r}")
    k, n = int(head), int(tail)
    if not 1 <= k <= n:
        raise PlanError(f"--shard {text}: K must be between 1 and N")
    return k, n
