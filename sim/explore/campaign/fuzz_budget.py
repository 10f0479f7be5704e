"""Fuzzing for as long as a budget lasts (``durable-sim fuzz --budget DURATION``, for nightly jobs),
as campaign units on the same engines as sweeps.

A fuzz unit is one fuzzer -- each scenario's schedule fuzzer, and the world machine -- searching
with one Hypothesis seed for a fixed number of examples (``fuzz_unit``). The driver hands out
units in rounds (round r runs every fuzzer with seed ``seed + r``), a wave of them at a time to
the engine, and starts another wave while the budget lasts; so the command ends within one
wave's time after the budget. A fuzzer that found a failure leaves the rotation (its next seeds
would find the same bug again; of one wave's, the lowest seed's is kept); every failure comes
back shrunk and is saved to the corpus by the caller. Which units run depends on the machine's
speed -- a budget is a time, not a plan -- but each unit's search depends on its specification
only, so a finding replays anywhere. The wall clock is read here, by the driver only, to end
the budget.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sim.explore.campaign.address import digest, project_version
from sim.explore.campaign.document import UnitFileError, verified
from sim.explore.campaign.fuzz_unit import finding_from_json
from sim.explore.campaign.plan import Unit
from sim.explore.campaign.tasks import Engine, Task
from sim.explore.fuzz import Finding
from sim.world.scenario import Scenario

#: Examples per unit: long enough that a unit's start (a fork, or a fresh interpreter on Dask)
#: is small beside it, short enough that the budget is kept to within a few units.
UNIT_EXAMPLES = 50
WAVE_PER_JOB = 2  # units per job and wave: a wave waits for its slowest unit


@dataclass(frozen=True)
class Fuzzer:
    """A scenario's schedule fuzzer (``ref``, ``content``), or the world machine (neither)."""

    name: str
    ref: str | None = None
    content: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"schedules of {self.ref}" if self.ref is not None else "world machine"


def fuzzers_of(scenarios: Sequence[tuple[str, Scenario]], *, machine: bool) -> list[Fuzzer]:
    found = [Fuzzer("schedules", ref, s.model_dump(mode="json")) for ref, s in scenarios]
    return [*found, Fuzzer("machine")] if machine else found


@dataclass
class FuzzRun:
    """What a budget's units found."""

    units: int = 0
    examples: int = 0
    findings: list[Finding] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0


def fuzz_units(
    fuzzers: Sequence[Fuzzer],
    *,
    store: str,
    examples: int,
    seed: int,
    live: Callable[[Fuzzer], bool] = lambda fuzzer: True,
) -> Iterator[tuple[Fuzzer, Task]]:
    """Units round after round: every fuzzer still ``live``, with seed ``seed + round``."""
    version = project_version()
    for round_ in itertools.count():
        for fuzzer in fuzzers:
            if not live(fuzzer):
                continue
            spec = {
                "kind": "fuzz",
                "fuzzer": fuzzer.name,
                "scenario": fuzzer.ref,
                "scenario_sha256": None if fuzzer.content is None else digest(fuzzer.content),
                "store": store,
                "seed": seed + round_,
                "examples": examples,
                "version": version,
            }
            label = f"{fuzzer.label}[{store}] seed {seed + round_}"
            unit = Unit(digest(spec), spec, label, float(examples), examples)
            yield fuzzer, Task(unit, {"spec": spec, "scenario": fuzzer.content})


def fuzz_for(
    fuzzers: Sequence[Fuzzer],
    *,
    budget_s: float,
    engine: Engine,
    store: str = "file",
    examples: int = UNIT_EXAMPLES,
    seed: int = 0,
    wave: int = 2,
    clock: Callable[[], float] = time.monotonic,
) -> FuzzRun:
    """Run fuzz units, ``wave`` at a time, until ``budget_s`` has passed; what they found."""
    started = clock()
    run = FuzzRun()
    # Per fuzzer, the failure of its lowest seed: units of one wave may find the same bug twice.
    found: dict[str, tuple[int, Finding]] = {}
    by_unit: dict[str, Fuzzer] = {}

    def live(fuzzer: Fuzzer) -> bool:
        return fuzzer.label not in found

    def done(task: Task, doc: dict[str, Any] | None, error: str | None) -> str:
        run.units += 1
        try:
            doc = verified(doc, address=task.unit.address) if doc is not None else None
        except UnitFileError as exc:
            doc, error = None, str(exc)
        if doc is None:
            run.errors.append((task.unit.label, error or "no result"))
            return "ERROR"
        result = doc["result"]
        run.examples += result["examples"]
        if result["finding"] is None:
            return f"{result['examples']} examples, no failure"
        finding = finding_from_json(json.loads(json.dumps(result["finding"])))
        label, seed = by_unit[task.unit.address].label, task.unit.spec["seed"]
        if label not in found or seed < found[label][0]:
            found[label] = (seed, finding)
        first = finding.violations[0].invariant if finding.violations else "?"
        return f"FAILED {first} (shrunk; saved to the corpus)"

    units = fuzz_units(fuzzers, store=store, examples=examples, seed=seed, live=live)
    while clock() - started < budget_s and any(live(f) for f in fuzzers):
        batch = list(itertools.islice(units, wave))
        by_unit.update((task.unit.address, fuzzer) for fuzzer, task in batch)
        engine.run([task for _, task in batch], done)
    run.findings = [found[f.label][1] for f in fuzzers if f.label in found]
    run.wall_s = clock() - started
    return run
