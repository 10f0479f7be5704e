"""Crash schedules' text form: every kind, enumerated tears, and one-line errors; crash points,
schedules and the sweep refuse what cannot exist where it is given, naming it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from sim.errors import StoreKindError, UserError
from sim.explore import sweep as sweep_module
from sim.explore.plan import SweepPlan
from sim.explore.sweep import prepare
from sim.run.runner import run_scenario
from sim.world.faults import (
    CRASH_KINDS,
    CrashKind,
    CrashPoint,
    Schedule,
    ScheduleError,
    When,
    crash_points,
    parse_schedule,
    tries_kind,
)
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind


@pytest.mark.parametrize(
    "text",
    [
        "none",
        "3:before:process",
        "14:after:power,20:before:process",
        "7:after:storage",
        "12:after:power~3",
        "2:after:power~1,9:after:storage",
    ],
)
def test_text_round_trips(text: str) -> None:
    assert parse_schedule(text).text() == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("12:after:process~2", "only a power crash can tear"),
        ("12:after:storage~1", "only a power crash can tear"),
        ("12:after:power~0", "malformed crash point"),
        ("12:after:power~", "malformed crash point"),
        ("12:after:disk", "malformed crash point"),
        ("3:after:power,3:before:process", "same boundary index"),
    ],
)
def test_malformed_schedules_say_why(text: str, why: str) -> None:
    with pytest.raises(ScheduleError, match=why):
        parse_schedule(text)


def test_a_power_point_lists_its_tears_after_an_operation_only() -> None:
    assert crash_points(5, When.AFTER, CrashKind.POWER, 3) == [
        CrashPoint(5, When.AFTER, CrashKind.POWER),
        CrashPoint(5, When.AFTER, CrashKind.POWER, 1),
        CrashPoint(5, When.AFTER, CrashKind.POWER, 2),
        CrashPoint(5, When.AFTER, CrashKind.POWER, 3),
    ]
    assert crash_points(5, When.BEFORE, CrashKind.POWER, 3) == [
        CrashPoint(5, When.BEFORE, CrashKind.POWER)
    ]
    assert crash_points(5, When.AFTER, CrashKind.PROCESS, 3) == [
        CrashPoint(5, When.AFTER, CrashKind.PROCESS)
    ]


def test_storage_faults_are_tried_after_acknowledged_store_operations_only() -> None:
    assert tries_kind(CrashKind.STORAGE, When.AFTER, "store.commit#3")
    assert tries_kind(CrashKind.STORAGE, When.AFTER, "store.checkpoint#1")
    assert tries_kind(CrashKind.STORAGE, When.AFTER, "store.lease.renew#2")
    assert not tries_kind(CrashKind.STORAGE, When.BEFORE, "store.commit#3")
    assert not tries_kind(CrashKind.STORAGE, When.AFTER, "fs.fsync:c1/events.jsonl")
    assert not tries_kind(CrashKind.STORAGE, When.AFTER, "tool.effect:payments.charge#call-1")
    assert tries_kind(CrashKind.POWER, When.BEFORE, "fs.fsync:c1/events.jsonl")


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: CrashPoint(1, "sideways", "powr"), "'sideways'"),  # type: ignore[arg-type]  # bad
        (lambda: CrashPoint(1, "after", "powr"), "'powr'"),  # type: ignore[arg-type]  # bad kind
        (lambda: CrashPoint(-1, When.AFTER, CrashKind.POWER), "-1"),
        (lambda: CrashPoint(True, When.AFTER, CrashKind.POWER), "True"),  # a bool is not an index
        (lambda: CrashPoint(1, When.AFTER, CrashKind.POWER, -2), "-2"),
        (lambda: CrashPoint(1, When.AFTER, CrashKind.POWER, 1000), "1000"),
        (lambda: Schedule(("3:after:power",)), "'3:after:power'"),  # type: ignore[arg-type]  # text
    ],
    ids=["when", "kind", "index", "bool-index", "tear", "big-tear", "not-a-point"],
)
def test_a_crash_point_that_cannot_exist_is_refused_where_it_is_made(
    make: Callable[[], object], named: str
) -> None:
    with pytest.raises(ScheduleError) as refused:
        make()
    assert named in str(refused.value)
    assert isinstance(refused.value, UserError)  # one line and exit 2 on the command line


def test_crash_kinds_and_sides_are_enums_that_read_as_their_text() -> None:
    point = parse_schedule("12:after:power~3").points[0]
    assert point.when is When.AFTER and point.kind is CrashKind.POWER
    assert point == CrashPoint(12, "after", "power", 3)  # type: ignore[arg-type]  # text works too
    assert f"{point.kind}" == "power" and point.text() == "12:after:power~3"
    assert json.dumps([point.when, point.kind]) == '["after", "power"]'
    assert CRASH_KINDS == ("process", "power", "storage", "pause")


def test_sweep_refuses_an_unknown_crash_kind_before_it_runs_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def ran(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run started before the crash kinds were checked")

    monkeypatch.setattr(prepare, "run_scenario", ran)  # where a sweep starts its first run
    scenario = load_scenario("idempotent_payment")
    for store in StoreKind:
        with pytest.raises(ScheduleError, match="unknown crash kind 'powr'"):
            plan = SweepPlan(
                scenario=scenario,
                store=store,
                crash_kinds=("powr",),  # type: ignore[arg-type]  # refused, as tested
            )
            sweep_module.sweep(plan)


def test_run_scenario_refuses_an_unknown_store_kind_before_it_runs() -> None:
    with pytest.raises(StoreKindError, match="unknown store kind 'tape'"):
        run_scenario(load_scenario("idempotent_payment"), seed=0, store="tape")
