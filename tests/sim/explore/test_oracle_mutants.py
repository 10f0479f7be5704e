"""Mutation tests for the oracles: each oracle must catch a broken runtime
(docs/architecture.md, 2.6).

Every registered mutant (``sim.explore.mutants``, one record per mutant, next to its function)
names the crashes that expose it -- its witness, by boundary label, resolved at run time so an
added boundary elsewhere does not break the test -- and the invariants that must report it
(``caught_by``) or may report it besides (``also``: cascades). Planted, its witness must report
every ``caught_by`` code and nothing outside ``caught_by | also``; the unbroken runtime must
pass the same crashes. The reference run is the planted runtime's own fault-free run, exactly
what a sweep over the broken runtime compares against (so I9 and I11 see only what a crash
changes). That the sweep reaches each mutant first at its recorded schedule is the slow test of
``tests/sim/explore/test_mutants.py``.

Limits found while writing these, and how they were closed: power outcomes were drawn once per
seed (now per crash point); I4's "task ran again" check needed a log that reduces (now it reads
the raw log); I8 read only the log a reader returns (now every accepted append is checked against
the lease grants).
"""

from __future__ import annotations

import pytest

from sim.explore.mutants import MUTANTS, Mutant, judge_witness, mutant_named, planted
from sim.explore.mutants.core import RUNTIME_CODES
from sim.explore.plan import SweepPlan
from sim.explore.sweep import sweep
from sim.judgement.judge import ScheduleOutcome
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind


def describe(outcome: ScheduleOutcome) -> str:
    lines = [f"schedule {outcome.schedule.text()} -> {outcome.verdict}"]
    lines += [f"  {v.invariant}: {v.explanation} {v.witness[:2]}" for v in outcome.violations]
    return "\n".join(lines)


def assert_caught(mutant: Mutant, outcome: ScheduleOutcome) -> None:
    found = {v.invariant for v in outcome.violations}
    missing = set(mutant.caught_by) - found
    assert not missing, f"{mutant.name}: {sorted(missing)} not reported\n{describe(outcome)}"
    unexpected = found - set(mutant.caught_by) - set(mutant.also)
    assert not unexpected, f"{mutant.name}: {sorted(unexpected)} reported\n{describe(outcome)}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_oracle_catches_mutant(mutant: Mutant) -> None:
    with planted(mutant):
        outcome = judge_witness(mutant)
    assert_caught(mutant, outcome)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_unbroken_runtime_passes_the_same_crashes(mutant: Mutant) -> None:
    outcome = judge_witness(mutant)
    assert outcome.violations == [], describe(outcome)
    assert outcome.verdict == "pass"


def test_every_invariant_has_a_mutant_it_must_catch() -> None:
    """docs/architecture.md, 2.6: an oracle no mutant exercises could be blind unnoticed."""
    caught = {code for m in MUTANTS for code in m.caught_by}
    assert sorted(RUNTIME_CODES - caught) == []


# Mutants the fault-free run already shows, and whose bug must survive a restart too: a second
# witness each, a crash while the misplaced or misordered steering input is in play.
AFTER_A_CRASH = [
    # The re-sent steer-2 lands mid-read again.
    (
        "steer-anywhere",
        LabelledCrash(label="tool.effect:workspace.read", when=When.BEFORE, kind=CrashKind.PROCESS),
    ),
    # The recovered turn places steer-4 before steer-3.
    (
        "steer-reversed",
        LabelledCrash(label="tool.effect:workspace.read", when=When.AFTER, kind=CrashKind.PROCESS),
    ),
]


@pytest.mark.parametrize(("name", "crash"), AFTER_A_CRASH, ids=[n for n, _ in AFTER_A_CRASH])
def test_oracle_catches_mutant_after_a_crash(name: str, crash: LabelledCrash) -> None:
    mutant = mutant_named(name)
    with planted(mutant):
        outcome = judge_witness(mutant, witness=(crash,))
    assert_caught(mutant, outcome)
    assert outcome.schedule.points, "the crash was not scheduled"
    assert judge_witness(mutant, witness=(crash,)).verdict == "pass"


# The sweep on the other store: the compensation and sub-agent mutants are killed by the default
# depth-1 sweep of their scenario on SQLite too, first by the same invariant.
ON_SQLITE = [
    "compensate-forward-order",
    "compensation-key-per-attempt",
    "subagent-fresh-request-id",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ON_SQLITE)
def test_the_sqlite_sweep_kills_it_too(name: str) -> None:
    mutant = mutant_named(name)
    assert mutant.store == "file"
    with planted(mutant):
        result = sweep(
            SweepPlan(
                scenario=load_scenario(mutant.scenario),
                store=StoreKind.SQLITE,
                crash_kinds=mutant.crash_kinds,
                determinism="off",
                stop_at_first_failure=True,
            )
        )
    assert result.failures, f"{name}: the sqlite sweep found nothing"
    first = result.failures[0]
    assert first.invariant == mutant.caught_by[0], (first.schedule, first.explanation)
