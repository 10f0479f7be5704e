"""The issue-3 acceptance sweep: every depth-1 schedule of the three seed scenarios, both stores."""

from __future__ import annotations

import pytest
from tiers import tiered

from sim.explore.plan import SweepPlan
from sim.explore.sweep import sweep
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

SEED_SCENARIOS = ("read_edit_answer", "idempotent_payment", "model_error_then_message")


@pytest.mark.parametrize("store", tiered(["file", "sqlite"], fast=["file"]))
@pytest.mark.parametrize("name", tiered(SEED_SCENARIOS, fast=["idempotent_payment"]))
def test_depth1_sweep_passes(name: str, store: str) -> None:
    plan = SweepPlan(scenario=load_scenario(name), store=StoreKind(store), determinism="full")
    result = sweep(plan)
    assert result.failures == []
    expected = 1 + result.reference.boundaries * 2 * 2  # process and power crashes, on both stores
    # Enumerated power-loss tears: the file store's text log only (SQLite's write-ahead log is
    # torn by each point's seeded draw).
    expected += result.expansion.tear_schedules
    assert (result.expansion.tear_schedules > 0) == (store == "file")
    assert result.schedules == expected
    assert result.verdicts["pass"] == expected


def test_every_boundary_kind_is_in_the_traces() -> None:
    kinds: set[str] = set()
    for name in SEED_SCENARIOS:
        for store in (StoreKind.FILE, StoreKind.SQLITE):
            result = sweep(
                SweepPlan(
                    scenario=load_scenario(name), store=store, crash_kinds=(), determinism="off"
                )
            )
            kinds |= set(result.reference.boundary_kinds)
    for kind in (
        "commit",
        "fs.write",
        "fs.fsync",
        "fs.rename",
        "fs.dir-fsync",
        "tool",
        "model",
        "lease",
        "checkpoint",
    ):
        assert kind in kinds, f"no {kind} boundary in any trace"
