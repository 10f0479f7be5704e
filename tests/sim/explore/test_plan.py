"""A sweep plan (``sim.explore.plan.SweepPlan``) is one frozen, keyword-only record of what a
sweep runs: validated when it is built, in the exceptions a sweep has always raised, with one
JSON form that reads back to an equal plan and one digest that tells any two plans apart."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from sim.errors import StoreKindError
from sim.explore.plan import EVERY_POINT, Roots, SweepPlan
from sim.world.faults import CrashKind, ScheduleError
from sim.world.scenario import load_scenario
from sim.world.seeded import SEED_MAX
from sim.world.stores import StoreKind

SCENARIO = load_scenario("idempotent_payment")


def _plan(**changes: Any) -> SweepPlan:
    return SweepPlan(**{"scenario": SCENARIO, "store": StoreKind.FILE, **changes})


def test_a_plan_round_trips_through_json_with_its_digest() -> None:
    plan = _plan(
        seed=7,
        crash_kinds=("storage", "process"),
        determinism="full",
        roots=Roots(3, 40),
        exhaustive=False,
        stop_at_first_failure=True,
        ref="path/to/pay.json",
    )
    text = json.dumps(plan.to_json())  # plain JSON values only
    again = SweepPlan.from_json(json.loads(text))
    assert again == plan and again.digest() == plan.digest()
    assert plan.to_json()["roots"] == [3, 40] and plan.to_json()["store"] == "file"
    assert SweepPlan.from_json(_plan().to_json()).roots == EVERY_POINT


#: One different value for every field of a plan.
CHANGES: dict[str, Any] = {
    "scenario": load_scenario("read_edit_answer"),
    "store": StoreKind.SQLITE,
    "seed": 1,
    "crash_kinds": (CrashKind.PROCESS,),
    "depth": 2,
    "determinism": "off",
    "roots": Roots(0, 10),
    "exhaustive": False,
    "stop_at_first_failure": True,
    "ref": "idempotent_payment",
}


def test_every_field_is_in_the_digest() -> None:
    assert set(CHANGES) == {f.name for f in dataclasses.fields(SweepPlan)}
    base = _plan()
    assert _plan().digest() == base.digest()  # the same plan, the same digest
    digests = {base.digest()}
    for name, value in CHANGES.items():
        changed = _plan(**{name: value})
        assert changed != base and changed.digest() != base.digest(), name
        digests.add(changed.digest())
    assert len(digests) == len(CHANGES) + 1
    # The order of the crash kinds is the results' order: a different plan.
    power_first = _plan(crash_kinds=("power", "process"))
    assert power_first.digest() != base.digest()


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"store": "tape"}, StoreKindError, "unknown store kind 'tape'"),
        ({"crash_kinds": ("powr",)}, ScheduleError, "unknown crash kind 'powr'"),
        ({"depth": 3}, ValueError, "depth must be 1 or 2"),
        ({"depth": 0}, ValueError, "depth must be 1 or 2"),
        ({"determinism": "some"}, ValueError, "determinism must be one of full, sample, off"),
        ({"seed": -1}, ValueError, "seed must be in"),
        ({"seed": SEED_MAX + 1}, ValueError, "seed must be in"),
        ({"seed": "3"}, TypeError, "seed must be an integer"),
        ({"roots": (0, 10)}, TypeError, "roots must be a Roots"),
        ({"roots": Roots(picked=frozenset())}, ValueError, "exhaustive=False samples"),
        ({"scenario": "idempotent_payment"}, TypeError, "a loaded Scenario"),
    ],
)
def test_bad_values_are_refused_when_the_plan_is_built(
    changes: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _plan(**changes)


def test_a_document_that_is_not_a_plan_is_refused() -> None:
    doc = _plan().to_json()
    with pytest.raises(ValueError, match="missing keys \\['seed'\\]"):
        SweepPlan.from_json({k: v for k, v in doc.items() if k != "seed"})
    with pytest.raises(ValueError, match="unknown keys \\['jobs'\\]"):
        SweepPlan.from_json({**doc, "jobs": 2})
    with pytest.raises(StoreKindError):
        SweepPlan.from_json({**doc, "store": "tape"})


def test_names_become_enums_and_booleans_modes() -> None:
    plan = _plan(store="sqlite", crash_kinds=["pause", "process"], determinism=True)
    assert plan.store is StoreKind.SQLITE
    assert plan.crash_kinds == (CrashKind.PAUSE, CrashKind.PROCESS)
    assert all(type(kind) is CrashKind for kind in plan.crash_kinds)
    assert plan.determinism == "full" and _plan(determinism=False).determinism == "off"
    assert plan == _plan(
        store=StoreKind.SQLITE, crash_kinds=(CrashKind.PAUSE, CrashKind.PROCESS), determinism="full"
    )
    assert _plan().crash_kinds == (CrashKind.PROCESS, CrashKind.POWER)


def test_a_plan_is_frozen_and_keyword_only() -> None:
    plan = _plan()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 1  # type: ignore[misc]  # frozen: the refusal is what is tested
    with pytest.raises(TypeError):
        SweepPlan(SCENARIO, StoreKind.FILE)  # type: ignore[call-arg]  # keyword-only, tested
    assert dataclasses.replace(plan, seed=2).seed == 2 and plan.seed == 0


def test_the_sweep_package_re_exports_the_plan_and_its_parts() -> None:
    from sim.explore import sweep
    from sim.explore.sweep import modes, parts

    assert sweep.SweepPlan is SweepPlan and sweep.Roots is Roots is parts.Roots
    assert sweep.EVERY_POINT is EVERY_POINT
    assert sweep.determinism_mode is modes.determinism_mode
