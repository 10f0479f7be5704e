"""The mutant catalogue in reduced form: each mutant against its smallest killing scenario, so a
change that blinds an oracle fails CI (the full kill matrix is ``durable-sim mutants``)."""

from __future__ import annotations

import pytest

from sim.explore.mutants import CATALOGUE, Mutant, Patches, kill, planted
from sim.explore.sweep import base_schedule, judge, sweep, twins
from sim.run.runner import StoreKind, run_scenario
from sim.world.faults import parse_schedule
from sim.world.scenario import bundled_names, load_scenario


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda m: m.name)
def test_mutant_is_killed_by_its_scenario(mutant: Mutant) -> None:
    result = kill(
        mutant,
        scenarios=[mutant.scenario],
        stores=(mutant.store,),
        determinism=mutant.name == "leaky-counter",
    )
    assert result.killed, f"{mutant.name} ({mutant.bug_class}) survived {mutant.scenario}"
    assert result.invariants
    _assert_folding_keeps_the_first_failure(mutant, result.schedule)


def _assert_folding_keeps_the_first_failure(mutant: Mutant, schedule: str | None) -> None:
    """A fast sweep folds schedules with identical futures (``sim.explore.folding``) and judges
    a folded failure on its own run; its first failure is the naive sweep's (``kill`` runs the
    naive path) exactly when that schedule's twin fails too. Checked for every mutant, which is
    what the equivalence of the two sweeps needs on them."""
    assert schedule is not None
    scenario = load_scenario(mutant.scenario)
    store = StoreKind(mutant.store)
    with planted(mutant):
        twin = twins(scenario, store=store, crash_kinds=mutant.crash_kinds).get(schedule)  # type: ignore[arg-type]
        if twin is None:
            return  # the fast sweep runs this schedule itself
        base = base_schedule(scenario, seed=0, store=store)
        reference = run_scenario(scenario.without_faults(), seed=0, store=store, schedule=base)
        folded = run_scenario(scenario, seed=0, store=store, schedule=parse_schedule(twin))
        verdict = judge(folded, reference, determinism=False).verdict
    assert verdict != "pass", f"{mutant.name}: {schedule} fails, its twin {twin} passes"


def test_catalogue_covers_the_issue_classes() -> None:
    assert len(CATALOGUE) >= 14
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    assert all(m.scenario in bundled_names() for m in CATALOGUE)


def test_planting_is_undone() -> None:
    """After a mutant block the unbroken runtime passes the same sweep again."""
    mutant = next(m for m in CATALOGUE if m.name == "key-per-attempt")
    with planted(mutant):
        pass
    result = sweep(load_scenario(mutant.scenario), store="file", determinism=False)
    assert result.failures == []


def test_patches_restore_attributes_and_items() -> None:
    class Box:
        value = 1

    table = {"a": 1}
    patches = Patches()
    patches.setattr(Box, "value", 2)
    patches.setitem(table, "a", 5)
    patches.setitem(table, "b", 6)
    assert (Box.value, table) == (2, {"a": 5, "b": 6})
    patches.undo()
    assert (Box.value, table) == (1, {"a": 1})
