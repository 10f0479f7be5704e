"""The mutant catalogue in reduced form: each mutant against its smallest killing scenario, so a
change that blinds an oracle fails CI (the full kill matrix is ``durable-sim mutants``)."""

from __future__ import annotations

from typing import Any

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
    class Base:
        inherited = 0

    class Box(Base):
        value = 1
        helper = staticmethod(len)

    table = {"a": 1}
    patches = Patches()
    patches.setattr(Box, "value", 2)
    patches.setattr(Box, "inherited", 3)
    patches.setattr(Box, "helper", staticmethod(abs))
    patches.setitem(table, "a", 5)
    assert (Box.value, Box.inherited, Box.helper(-1), table) == (2, 3, 1, {"a": 5})
    patches.undo()
    assert (Box.value, Box.inherited, table) == (1, 0, {"a": 1})
    assert "inherited" not in Box.__dict__ and Box.helper("ab") == 2


def test_patches_refuse_what_does_not_exist() -> None:
    class Box:
        value = 1

    patches = Patches()
    with pytest.raises(AttributeError, match="renamed"):
        patches.setattr(Box, "renamed", 2)
    with pytest.raises(KeyError, match="'b'"):
        patches.setitem({"a": 1}, "b", 2)
    assert not hasattr(Box, "renamed")


def test_planting_is_undone_even_when_a_mutant_fails_half_way() -> None:
    class Box:
        value = 1

    def half(mp: Any) -> None:
        mp.setattr(Box, "value", 2)
        mp.setattr(Box, "renamed", 3)

    broken = Mutant("half", "a mutant whose second target was renamed", half, "idempotent_payment")
    with pytest.raises(AttributeError), planted(broken):
        pass
    assert Box.value == 1
