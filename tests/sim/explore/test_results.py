"""The results document is built by the library (``sim.explore.results``), not the command line:
a caller of ``sweep()`` gets the very ``results.json`` that ``durable-sim sweep`` writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.explore.plan import SweepPlan
from sim.explore.results import ResultsError, results_document
from sim.explore.sweep import sweep
from sim.outputs.cli import main
from sim.outputs.options import DEFAULT_CRASH_KINDS
from sim.world.faults import CrashKind
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

SCENARIO = "idempotent_payment"


def _without_wall_times(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc["totals"].pop("wall_s")
    for one in doc["scenarios"]:
        one.pop("wall_s")
    return doc


@pytest.mark.slow
def test_the_library_builds_the_document_the_cli_writes(tmp_path: Path) -> None:
    assert main(["sweep", SCENARIO, "--out", str(tmp_path), "--quiet"]) == 0
    written = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    scenario = load_scenario(SCENARIO)
    kinds = DEFAULT_CRASH_KINDS  # the command line's default, which the library leaves to it
    sweeps = [
        sweep(SweepPlan(scenario=scenario, ref=SCENARIO, store=store, crash_kinds=kinds))
        for store in (StoreKind.FILE, StoreKind.SQLITE)
    ]
    built = results_document(sweeps, wall_s=1.0)
    assert _without_wall_times(built) == _without_wall_times(written)
    assert built["config"]["store"] == "both" and built["config"]["crash"] == ",".join(kinds)


def test_sweeps_of_different_runs_cannot_share_a_document() -> None:
    scenario = load_scenario(SCENARIO)
    one = sweep(
        SweepPlan(scenario=scenario, store=StoreKind.FILE, seed=0, crash_kinds=(CrashKind.PROCESS,))
    )
    other = sweep(
        SweepPlan(scenario=scenario, store=StoreKind.FILE, seed=1, crash_kinds=(CrashKind.PROCESS,))
    )
    with pytest.raises(ResultsError, match="different seed"):
        results_document([one, other], wall_s=0.0)
    with pytest.raises(ResultsError, match="at least one"):
        results_document([], wall_s=0.0)
