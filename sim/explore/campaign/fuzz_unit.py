"""A fuzz unit's work: one fuzzer (a scenario's schedule fuzzer, or the world machine) searching
with one Hypothesis seed for a number of examples (``sim.explore.fuzz``). Each unit is its own
seeded search, so what it finds depends on its specification only, not on where or beside what
it ran; a failure is shrunk inside the unit, and the driver saves it to the corpus.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from sim.explore.fuzz import Finding, fuzz_machine, fuzz_schedules
from sim.judgement.oracles import Violation
from sim.world import tempdirs
from sim.world.scenario import Scenario
from sim.world.stores import StoreKind

FUZZERS = ("schedules", "machine")


def run_fuzz(
    spec: dict[str, Any], content: dict[str, Any] | None, progress: Callable[[int], None]
) -> dict[str, Any]:
    """Run the fuzz unit ``spec`` (its scenario's ``content`` for a schedule fuzzer); its
    result: examples run and the shrunk finding, if any. Hypothesis keeps its files in a
    directory of the unit's own, removed afterwards (the fuzzers keep no example database)."""
    # hypothesis's settings module, for the fuzz units only (sweep units never load it)
    from hypothesis.configuration import set_hypothesis_home_dir

    examples = 0

    def tick() -> None:
        nonlocal examples
        examples += 1
        progress(1)

    home = tempdirs.make("hypothesis")
    set_hypothesis_home_dir(home)
    try:
        store = StoreKind(spec["store"])
        options = {"store": store, "examples": spec["examples"], "fuzz_seed": spec["seed"]}
        if spec["fuzzer"] == "machine":
            finding = fuzz_machine(on_example=tick, **options)
        else:
            scenario = Scenario.model_validate(content)
            finding = fuzz_schedules(scenario, on_example=tick, **options)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {"examples": examples, "finding": None if finding is None else finding_json(finding)}


def finding_json(finding: Finding) -> dict[str, Any]:
    return {
        "fuzzer": finding.fuzzer,
        "scenario": finding.scenario.model_dump(mode="json"),
        "store": str(finding.store),
        "seed": finding.seed,
        "schedule": finding.schedule,
        "violations": [v.to_json() for v in finding.violations],
        "program": list(finding.program),
        "labels": list(finding.labels),
    }


def finding_from_json(doc: dict[str, Any]) -> Finding:
    return Finding(
        doc["fuzzer"],
        Scenario.model_validate(doc["scenario"]),
        doc["store"],
        doc["seed"],
        doc["schedule"],
        [Violation.from_json(v) for v in doc["violations"]],
        list(doc["program"]),
        list(doc["labels"]),
    )
