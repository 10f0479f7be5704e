"""A crash named by a boundary label (``sim.run.labels``) resolves to the index of that boundary
in the run it extends, counting from the schedule's last crash, and says which label it could
not find."""

from __future__ import annotations

import pytest

from sim.run.labels import LabelledCrash, LabelNotFound, point_at_label, schedule_at_label
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When
from sim.world.scenario import load_scenario


@pytest.fixture(scope="module")
def plain() -> RunResult:
    return run_scenario(load_scenario("read_edit_answer"), seed=0, store="file")


def _indexes(run: RunResult, prefix: str) -> list[int]:
    return [b.index for b in run.trace.boundaries if b.label.startswith(prefix)]


def test_the_nth_boundary_with_the_label(plain: RunResult) -> None:
    appends = _indexes(plain, "fs.append:c1/events.jsonl")
    crash = LabelledCrash(
        label="fs.append:c1/events.jsonl", when=When.AFTER, kind=CrashKind.POWER, nth=2
    )
    assert point_at_label(plain, crash) == CrashPoint(appends[1], When.AFTER, CrashKind.POWER)
    torn = LabelledCrash(label="store.commit#3", when=When.AFTER, kind=CrashKind.POWER, tear=2)
    commit = _indexes(plain, "store.commit#3")[0]
    assert schedule_at_label(plain, torn) == Schedule.of(
        CrashPoint(commit, When.AFTER, CrashKind.POWER, 2)
    )


def test_counting_starts_after_the_base_schedule(plain: RunResult) -> None:
    """A base crash at the first commit: "the first commit" is then the one after it."""
    commits = _indexes(plain, "store.commit")
    base = Schedule.of(CrashPoint(commits[0], When.AFTER, CrashKind.PROCESS))
    crash = LabelledCrash(label="store.commit", when=When.BEFORE, kind=CrashKind.PROCESS)
    schedule = schedule_at_label(plain, crash, base=base)
    assert schedule == Schedule.of(
        *base.points, CrashPoint(commits[1], When.BEFORE, CrashKind.PROCESS)
    )


def test_a_missing_label_is_named(plain: RunResult) -> None:
    crash = LabelledCrash(
        label="tool.effect:workspace.append_line", when=When.AFTER, kind=CrashKind.PROCESS
    )
    count = len(_indexes(plain, crash.label))
    missing = LabelledCrash(
        label=crash.label, when=When.AFTER, kind=CrashKind.PROCESS, nth=count + 1
    )
    with pytest.raises(LabelNotFound, match=r"no boundary #\d+ labelled 'tool.effect:workspace"):
        point_at_label(plain, missing)
    with pytest.raises(LabelNotFound, match="read_edit_answer on the file store"):
        point_at_label(
            plain, LabelledCrash(label="no.such", when=When.AFTER, kind=CrashKind.PROCESS)
        )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"label": ""}, "needs a label"),
        ({"when": "during"}, "when must be"),
        ({"kind": "meteor"}, "kind must be"),
        ({"nth": 0}, "counts from 1"),
        ({"tear": 1}, "only a power crash"),
    ],
)
def test_an_impossible_crash_is_refused(fields: dict[str, object], problem: str) -> None:
    base: dict[str, object] = {"label": "store.commit", "when": "after", "kind": "process"}
    with pytest.raises(ValueError, match=problem):
        LabelledCrash(**{**base, **fields})  # type: ignore[arg-type]  # refused, as tested
