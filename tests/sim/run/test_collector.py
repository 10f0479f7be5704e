"""``sim.run.collector``: collection happens between runs only, garbage stays bounded, and the
collector's state is given back afterwards."""

from __future__ import annotations

import gc
import weakref

import pytest

from sim.run import collector
from sim.run.collector import between_runs, collect_if_due
from sim.run.runner import run_scenario
from sim.world.scenario import load_scenario


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_no_collection_inside_the_block_until_collect_if_due_and_then_the_garbage_goes() -> None:
    with between_runs():
        assert not gc.isenabled()
        cycles = [_Cycle() for _ in range(2_000)]
        first = weakref.ref(cycles[0])
        del cycles
        [_Cycle() for _ in range(10)]  # allocations that would trigger a default collection
        assert first() is not None  # cyclic garbage is not collected inside a run
        assert collect_if_due(collect_after_objects=1_000) is True
        assert first() is None  # ... but between runs


def test_collect_if_due_does_not_collect_below_the_threshold() -> None:
    with between_runs():
        cycle = _Cycle()
        ref = weakref.ref(cycle)
        del cycle
        assert collect_if_due(collect_after_objects=10_000_000) is False
        assert ref() is not None
    gc.collect()


def test_every_run_starts_by_collecting_if_due(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one call site: ``run_scenario`` collects before its run, so every loop of runs, every
    re-run and both fuzzers stay bounded without a call of their own."""
    scenario = load_scenario("idempotent_payment").without_faults()
    monkeypatch.setattr(collector, "COLLECT_AFTER_OBJECTS", 1_000)
    with between_runs():
        cycles = [_Cycle() for _ in range(2_000)]
        first = weakref.ref(cycles[0])
        del cycles
        run_scenario(scenario, seed=0, store="file")
        assert first() is None


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


def test_collect_if_due_with_automatic_collection_on_does_nothing() -> None:
    gc.disable()
    try:
        cycles = [_Cycle() for _ in range(2_000)]
        ref = weakref.ref(cycles[0])
        del cycles
        assert collect_if_due(collect_after_objects=1_000) is True  # off: bounded
        assert ref() is None
    finally:
        gc.enable()
    assert collect_if_due(collect_after_objects=10_000_000) is False  # on: never due


def test_a_bad_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="collect_after_objects"):
        collect_if_due(collect_after_objects=0)
