"""Crash schedules' text form: every kind, enumerated tears, and one-line errors."""

from __future__ import annotations

import pytest

from sim.world.faults import CrashPoint, ScheduleError, crash_points, parse_schedule, tries_kind


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
    assert crash_points(5, "after", "power", 3) == [
        CrashPoint(5, "after", "power"),
        CrashPoint(5, "after", "power", 1),
        CrashPoint(5, "after", "power", 2),
        CrashPoint(5, "after", "power", 3),
    ]
    assert crash_points(5, "before", "power", 3) == [CrashPoint(5, "before", "power")]
    assert crash_points(5, "after", "process", 3) == [CrashPoint(5, "after", "process")]


def test_storage_faults_are_tried_after_acknowledged_store_operations_only() -> None:
    assert tries_kind("storage", "after", "store.commit#3")
    assert tries_kind("storage", "after", "store.checkpoint#1")
    assert tries_kind("storage", "after", "store.lease.renew#2")
    assert not tries_kind("storage", "before", "store.commit#3")
    assert not tries_kind("storage", "after", "fs.fsync:c1/events.jsonl")
    assert not tries_kind("storage", "after", "tool.effect:payments.charge#call-1")
    assert tries_kind("power", "before", "fs.fsync:c1/events.jsonl")
