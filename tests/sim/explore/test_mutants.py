"""The mutant catalogue in reduced form: each mutant against its smallest killing scenario, so a
change that blinds an oracle fails CI (the full kill matrix is ``durable-sim mutants``)."""

from __future__ import annotations

import pytest

from sim.explore.mutants import CATALOGUE, Mutant, Patches, kill, planted
from sim.explore.sweep import sweep
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
