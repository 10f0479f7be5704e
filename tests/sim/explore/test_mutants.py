"""The mutant registry: every record valid, every mutant plants and undoes cleanly (fast), and
the depth-1 sweep of each mutant's own scenario kills it first by its headline invariant at its
recorded schedule (slow: what ``durable-sim mutants`` runs, one scenario and store each)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from sim.errors import UsageError
from sim.explore import mutants as mutants_pkg
from sim.explore.mutants import (
    MUTANTS,
    Mutant,
    MutantError,
    Patches,
    judge_witness,
    kill,
    mutant_named,
    planted,
)
from sim.explore.mutants.core import RUNTIME_CODES
from sim.explore.sweep import base_schedule, twins
from sim.judgement.judge import judge
from sim.run.labels import LabelledCrash
from sim.run.runner import run_scenario
from sim.world.faults import CrashKind, When, parse_schedule
from sim.world.scenario import bundled_names, load_scenario
from sim.world.stores import StoreKind

SWEPT = [m for m in MUTANTS if m.swept]


class _Recording(Patches):
    """``Patches`` that also remembers every attribute and item it replaced, with its value."""

    def __init__(self) -> None:
        super().__init__()
        self.before: list[tuple[Any, Any, Any, bool]] = []  # (target, name, value, is an item)

    def setattr(self, target: Any, name: str, value: Any) -> None:
        had = getattr(target, "__dict__", {}).get(name, getattr(target, name, None))
        super().setattr(target, name, value)
        self.before.append((target, name, had, False))

    def setitem(self, mapping: Any, key: Any, value: Any) -> None:
        had = mapping.get(key)
        super().setitem(mapping, key, value)
        self.before.append((mapping, key, had, True))


def _current(target: Any, name: Any, item: bool) -> Any:
    if item:
        return target.get(name)
    return getattr(target, "__dict__", {}).get(name, getattr(target, name, None))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_plants_and_undoes(mutant: Mutant) -> None:
    """Every target a mutant patches exists (``Patches`` refuses to create one, so a renamed
    target fails here), the mutant changes it, and ``undo`` puts back exactly what was there."""
    patches = _Recording()
    try:
        mutant.apply(patches)
        assert patches.before, f"{mutant.name} patches nothing"
        changed = [(t, n, i) for t, n, had, i in patches.before if _current(t, n, i) is not had]
        assert changed, f"{mutant.name} changed nothing"
    finally:
        patches.undo()
    for target, name, had, item in patches.before:
        assert _current(target, name, item) is had, f"{mutant.name}: {name!r} not restored"


def test_registry_is_valid() -> None:
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names)
    assert all(m.scenario in bundled_names() for m in MUTANTS)
    for m in MUTANTS:
        assert m.caught_by and all(c in RUNTIME_CODES for c in (*m.caught_by, *m.also)), m.name
    assert [m.name for m in MUTANTS if not m.swept] == ["forgets-intent-on-second-recovery"]
    assert mutant_named("key-per-attempt").apply is MUTANTS[names.index("key-per-attempt")].apply
    with pytest.raises(UsageError, match="unknown mutant 'nope'"):
        mutant_named("nope")


def test_every_mutant_function_is_registered() -> None:
    """A mutant function without a record would be one no test and no sweep runs."""
    applied = {m.apply for m in MUTANTS}
    for area in mutants_pkg.AREAS:
        public = [
            f
            for name, f in inspect.getmembers(area, inspect.isfunction)
            if f.__module__ == area.__name__ and not name.startswith("_")
        ]
        assert public and all(f in applied for f in public), area.__name__


def _record(**overrides: Any) -> Mutant:
    fields: dict[str, Any] = {
        "name": "a-mutant",
        "bug_class": "a bug",
        "apply": lambda mp: None,
        "scenario": "idempotent_payment",
        "caught_by": ("I1",),
        "witness": (
            LabelledCrash(label="store.commit#3", when=When.AFTER, kind=CrashKind.PROCESS),
        ),
        "first_kill": "14:after:process",
    }
    return Mutant(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"name": "Not A Name"}, "lowercase words"),
        ({"scenario": "no_such_scenario"}, "not bundled"),
        ({"store": "tape"}, "unknown store"),
        ({"crash_kinds": ("process", "meteor")}, "crash_kinds"),
        ({"store": "postgres", "crash_kinds": ("process", "storage")}, "cannot inject"),
        ({"caught_by": ()}, "names no invariant"),
        ({"caught_by": ("X1",)}, "invalid invariant codes"),
        ({"caught_by": ("I99",)}, "invalid invariant codes"),
        ({"also": ("I1",)}, "listed twice"),
        ({"first_kill": "14:sideways:process"}, "first_kill"),
        ({"first_kill": "none"}, "fault-free run exactly when"),
        ({"witness": ()}, "fault-free run exactly when"),
        ({"first_kill": None}, "two crashes or more"),
        ({"crash_kinds": ("power",)}, "witness crash of a kind"),
    ],
)
def test_an_inconsistent_record_is_refused(overrides: dict[str, Any], problem: str) -> None:
    _record()  # the base record is valid
    with pytest.raises(MutantError, match=problem):
        _record(**overrides)


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
    helped = Box.helper(-1)  # type: ignore[arg-type]  # abs now: len's type is all mypy sees
    assert (Box.value, Box.inherited, helped, table) == (2, 3, 1, {"a": 5})
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

    broken = _record(apply=half)
    with pytest.raises(AttributeError), planted(broken):
        pass
    assert Box.value == 1
    key = mutant_named("key-per-attempt")
    with planted(key):
        assert judge_witness(key).verdict != "pass"
    assert judge_witness(key).verdict == "pass"


@pytest.mark.slow
@pytest.mark.parametrize("mutant", SWEPT, ids=lambda m: m.name)
def test_mutant_is_killed_by_its_scenario(mutant: Mutant) -> None:
    """What ``durable-sim mutants`` runs first for each mutant (its own scenario and store, I10
    included): the same first killing schedule, headline and run-by-run verdicts every time."""
    result = kill(mutant, scenarios=[mutant.scenario], stores=(mutant.store,))
    assert result.killed, f"{mutant.name} ({mutant.bug_class}) survived {mutant.scenario}"
    assert (result.invariant, result.schedule) == (mutant.caught_by[0], mutant.first_kill), (
        result.invariants,
        result.explanation,
    )
    assert set(result.invariants) <= {*mutant.caught_by, *mutant.also}, result.invariants
    _assert_folding_keeps_the_first_failure(mutant, result.schedule)


def _assert_folding_keeps_the_first_failure(mutant: Mutant, schedule: str | None) -> None:
    """A fast sweep folds schedules with identical futures (``sim.explore.folding``) and judges
    a folded failure on its own run; its first failure is the naive sweep's (``kill`` runs the
    naive path) exactly when that schedule's twin fails too. Checked for every mutant, which is
    what the equivalence of the two sweeps needs on them."""
    assert schedule is not None
    scenario = load_scenario(mutant.scenario)
    store = StoreKind(mutant.store)
    if not store.forks:
        return  # a postgres sweep runs every schedule from scratch: nothing is folded
    with planted(mutant):
        twin = twins(scenario, store=store, crash_kinds=mutant.crash_kinds).get(schedule)
        if twin is None:
            return  # the fast sweep runs this schedule itself
        base = base_schedule(scenario, seed=0, store=store)
        reference = run_scenario(scenario.without_faults(), seed=0, store=store, schedule=base)
        folded = run_scenario(scenario, seed=0, store=store, schedule=parse_schedule(twin))
        verdict = judge(folded, reference, determinism=False).verdict
    assert verdict != "pass", f"{mutant.name}: {schedule} fails, its twin {twin} passes"


def test_fleet_mutants_are_records_checked_when_made() -> None:
    """The fleet's mutants are registry records too (``FleetMutant``): a bad one fails when its
    module is imported, an unknown name is a usage error, and each plants and undoes cleanly."""
    from sim.explore.mutants import FLEET_MUTANTS, FleetMutant, Patches, fleet_mutant_named

    assert [m.name for m in FLEET_MUTANTS] == [
        "file-lock-dropped",
        "renew-ignores-epoch",
        "fence-outside-transaction",
    ]
    for bad, problem in (
        ({"name": "Bad_Name"}, "lowercase words"),
        ({"bug_class": " "}, "no bug class"),
        ({"stores": ()}, "stores"),
        ({"stores": ("tape",)}, "stores"),
    ):
        fields: dict[str, Any] = {
            "name": "fine-name",
            "bug_class": "a bug",
            "apply": lambda mp: None,
            "stores": (StoreKind.FILE,),
        }
        with pytest.raises(MutantError, match=problem):
            FleetMutant(**(fields | bad))
    with pytest.raises(UsageError, match="unknown fleet mutant 'nope'"):
        fleet_mutant_named("nope")
    for fleet_mutant in FLEET_MUTANTS:
        patches = Patches()
        fleet_mutant.apply(patches)  # raises if it patches a name that no longer exists
        patches.undo()
