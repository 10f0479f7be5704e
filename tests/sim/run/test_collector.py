"""``sim.run.collector``: collection happens between runs only, garbage stays bounded, and the
collector's state is given back afterwards."""

from __future__ import annotations

import gc
import weakref

import pytest

from sim.run.collector import between_runs, run_done


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_no_collection_inside_the_block_until_run_done_and_then_the_garbage_goes() -> None:
    with between_runs(collect_after_objects=1_000) as between:
        assert not gc.isenabled()
        cycles = [_Cycle() for _ in range(2_000)]
        first = weakref.ref(cycles[0])
        del cycles
        [_Cycle() for _ in range(10)]  # allocations that would trigger a default collection
        assert first() is not None  # cyclic garbage is not collected inside a run
        between.run_done()
        assert between.collections == 1
        assert first() is None  # ... but between runs


def test_run_done_does_not_collect_below_the_threshold() -> None:
    with between_runs(collect_after_objects=10_000_000) as between:
        cycle = _Cycle()
        ref = weakref.ref(cycle)
        del cycle
        between.run_done()
        assert between.collections == 0
        assert ref() is not None
    gc.collect()


def test_the_collector_state_is_restored() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with between_runs():
        assert gc.get_freeze_count() >= frozen
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
    gc.disable()
    try:
        with between_runs():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_a_bad_threshold_is_refused() -> None:
    with (
        pytest.raises(ValueError, match="collect_after_objects"),
        between_runs(collect_after_objects=0),
    ):
        pass


def test_run_done_outside_a_block_bounds_garbage_only_when_collection_is_off() -> None:
    gc.disable()
    try:
        cycles = [_Cycle() for _ in range(2_000)]
        ref = weakref.ref(cycles[0])
        del cycles
        assert run_done(collect_after_objects=1_000) is True
        assert ref() is None
    finally:
        gc.enable()
    assert run_done(collect_after_objects=10_000_000) is False  # automatic collection is on
