"""The mutant hunt's sweep (``kill``): the fast path, stopped at the first failure, records
exactly the schedules the naive path records when it stops there -- the same first failure,
the same count, the same verdicts -- whether it forks at every crash point or splits the naive
path over workers (a short run). ``tests/sim/explore/test_mutants.py``'s slow test holds every
registered mutant's first killing schedule on it."""

from __future__ import annotations

import pytest

from sim.explore.mutants import mutant_named, planted
from sim.explore.plan import SweepPlan
from sim.explore.recording import ScenarioSweep
from sim.explore.sweep import sweep
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

# Its first killing schedule (a commit's ``after``) is folded into a point inside that commit,
# which the forking run reaches first and the sweep's order lists after it: the fast path must
# neither skip that twin nor stop before the folded point.
MUTANT = "recover-without-progress"


@pytest.fixture(scope="module")
def naive() -> ScenarioSweep:
    mutant = mutant_named(MUTANT)
    with planted(mutant):
        return sweep(
            SweepPlan(
                scenario=load_scenario(mutant.scenario),
                store=StoreKind.FILE,
                determinism="off",
                stop_at_first_failure=True,
            ),
            fast=False,
        )


@pytest.mark.parametrize("fork_from", [0, 10**6], ids=["forked", "split"])
def test_a_stopping_fast_sweep_stops_where_the_naive_one_does(
    naive: ScenarioSweep, fork_from: int
) -> None:
    mutant = mutant_named(MUTANT)
    with planted(mutant):
        fast = sweep(
            SweepPlan(
                scenario=load_scenario(mutant.scenario),
                store=StoreKind.FILE,
                determinism="sample",
                stop_at_first_failure=True,
            ),
            fork_from=fork_from,
            jobs=2,
        )
    assert [f.schedule for f in naive.failures] == [mutant.first_kill]
    assert [f.schedule for f in fast.failures] == [mutant.first_kill]
    # Every schedule up to the first failure, each with its verdict (the crash matrix's cells).
    assert (fast.schedules, fast.matrix) == (naive.schedules, naive.matrix)
