"""The ``pause`` crash kind (docs/crash-model.md, "Crash kinds"): a process stopped before a store
operation past its lease, a standby's takeover, then the zombie going on from where it stopped.

Fast: single runs of ``lease_takeover`` (about a second each on the file store)."""

from __future__ import annotations

import pytest

from sim.explore import forking
from sim.explore.mutants import mutant_named, planted
from sim.explore.plan import SweepPlan
from sim.explore.sweep import sweep
from sim.judgement.judge import judge
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, ScheduleError, When, parse_schedule, tries_kind
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

TAKEOVER = "lease_takeover"
#: ``lease_takeover``'s first commit on the file store (``store.commit#1``: ``lease_acquired``).
FIRST_COMMIT = "7:before:pause"


def _run(schedule: str, name: str = TAKEOVER) -> RunResult:
    scenario = load_scenario(name)
    return run_scenario(scenario, seed=0, store="file", schedule=parse_schedule(schedule))


def test_the_text_form_round_trips_and_a_pause_is_before_only() -> None:
    schedule = parse_schedule("3:after:process,7:before:pause")
    assert schedule.text() == "3:after:process,7:before:pause"
    assert schedule.points[-1].kind is CrashKind.PAUSE
    with pytest.raises(ScheduleError, match="before a store operation"):
        parse_schedule("7:after:pause")
    with pytest.raises(ScheduleError, match="tear"):
        parse_schedule("7:before:pause~1")


@pytest.mark.parametrize(
    ("label", "when", "tried"),
    [
        ("store.commit#3", When.BEFORE, True),
        ("store.checkpoint#1", When.BEFORE, True),
        ("sqlite.commit", When.BEFORE, True),
        ("postgres.commit", When.BEFORE, True),
        ("store.commit#3", When.AFTER, False),
        ("store.lease.acquire#1", When.BEFORE, False),  # carries the caller's clock reading
        ("store.lease.renew#2", When.BEFORE, False),
        ("fs.append:c1/events.jsonl", When.BEFORE, False),  # synchronous inside FileStore
        ("tool.effect:payments.charge#call-1", When.BEFORE, False),
    ],
)
def test_where_a_sweep_tries_a_pause(label: str, when: When, tried: bool) -> None:
    assert tries_kind(CrashKind.PAUSE, when, label) is tried


def test_every_store_can_take_a_pause() -> None:
    assert all(kind.can_inject(CrashKind.PAUSE) for kind in StoreKind)


def test_a_paused_owner_is_taken_over_and_its_write_refused() -> None:
    """The zombie stops before its first commit; the standby is granted epoch 2 and waits at
    its first commit until the zombie's append is over: the store refuses it (fenced), and
    the zombie's operation is numbered after the grant (re-entered), so I8 orders them right.
    Without the pause there is no grant before the zombie's commit, and no refusal."""
    result = _run(FIRST_COMMIT)
    labels = [b.label for b in result.trace.boundaries]
    grant = next(g for g in result.leases.grants if g.granted.epoch == 2)
    again = [b.index for b in result.trace.boundaries if b.label == "store.commit#1"]
    assert len(again) == 2 and again[0] == 7 < grant.boundary < again[1], labels[:20]
    assert [(a.owner_id, a.epoch) for a in result.leases.accepted][:1] == [("owner-2", 2)]
    assert all(a.owner_id == "owner-2" for a in result.leases.accepted)
    reference = _run("none")
    assert judge(result, reference, determinism=False).verdict == "pass"
    assert [g.granted.epoch for g in reference.leases.grants if g.boundary < 8] == [1]


def test_the_fence_outside_the_write_is_caught_only_with_the_pause() -> None:
    """The mutant's zombie write lands in the new owner's window, I8 reports it; the same
    mutant under the same schedule without its pause (a kill there instead) passes."""
    mutant = mutant_named("fence-outside-transaction-file")
    with planted(mutant):
        reference = _run("none")
        paused = judge(_run(FIRST_COMMIT), reference, determinism=False)
        killed = judge(_run("7:before:process"), reference, determinism=False)
    assert "I8" in {v.invariant for v in paused.violations}, paused.violations
    assert killed.verdict == "pass", killed.violations


def test_the_same_pause_gives_the_same_fingerprint() -> None:
    first, second = _run(FIRST_COMMIT), _run(FIRST_COMMIT)
    assert first.trace.fingerprint == second.trace.fingerprint
    assert first.trace.fingerprint != _run("none").trace.fingerprint


def test_a_scenario_without_a_standby_has_no_pause_points() -> None:
    scenario = load_scenario("idempotent_payment")
    assert scenario.standby_at_s() is None
    with pytest.raises(ScheduleError, match="no standby"):
        run_scenario(scenario, seed=0, store="file", schedule=parse_schedule("7:before:pause"))
    result = sweep(
        SweepPlan(
            scenario=scenario,
            store=StoreKind.FILE,
            crash_kinds=(CrashKind.PAUSE,),
            determinism="off",
        )
    )
    assert result.expansion.skipped_pause and result.schedules == 1  # the fault-free run only
    assert result.crash_kinds == ["pause"]  # asked for: every sweep of a command shares them


def test_the_standby_scenarios_sweep_pauses() -> None:
    """Each standby scenario's pause points: one per store operation that writes (a dozen on
    the file store), every one passing."""
    for name in ("lease_takeover", "graceful_shutdown_takeover"):
        result = sweep(
            SweepPlan(
                scenario=load_scenario(name), store=StoreKind.FILE, crash_kinds=(CrashKind.PAUSE,)
            )
        )
        assert result.crash_kinds == ["pause"]
        assert result.schedules > 5 and result.verdicts["pass"] == result.schedules, name


@pytest.mark.skipif(not forking.AVAILABLE, reason="os.fork is not available")
def test_a_forked_child_pauses_as_a_fresh_run_does() -> None:
    """The fast sweep takes a pause in a child forked at the boundary (the pause returns, the
    child runs on); its verdicts are the naive sweep's, schedule by schedule, with the file
    mutant planted so that some of them fail."""
    scenario = load_scenario(TAKEOVER)
    plan = SweepPlan(
        scenario=scenario, store=StoreKind.FILE, crash_kinds=(CrashKind.PAUSE,), determinism="off"
    )
    with planted(mutant_named("fence-outside-transaction-file")):
        naive = sweep(plan, fast=False)
        fast = sweep(plan, fast=True, fork_from=0)
    verdicts = [(m["index"], m["when"], m["kind"], m["verdict"]) for m in naive.matrix]
    assert verdicts == [(m["index"], m["when"], m["kind"], m["verdict"]) for m in fast.matrix]
    assert {v for *_, v in verdicts} == {"pass", "safety"}


def test_sweeps_with_and_without_a_standby_share_one_results_document() -> None:
    """``make sweep`` asks every scenario for pauses; one without a standby gets none, and says
    so (``skipped_pause``), while its crash kinds stay the command's: the results document
    refuses sweeps of different kinds, and once refused ``make sweep`` at its very end."""
    from sim.explore.results import results_document

    kinds = (CrashKind.PROCESS, CrashKind.PAUSE)
    standby = sweep(
        SweepPlan(scenario=load_scenario("lease_takeover"), store=StoreKind.FILE, crash_kinds=kinds)
    )
    alone = sweep(
        SweepPlan(
            scenario=load_scenario("idempotent_payment"), store=StoreKind.FILE, crash_kinds=kinds
        )
    )
    assert (standby.expansion.skipped_pause, alone.expansion.skipped_pause) == (False, True)
    assert any(cell["kind"] == "pause" for cell in standby.matrix)
    assert not any(cell["kind"] == "pause" for cell in alone.matrix)
    doc = results_document([standby, alone], wall_s=1.0)
    assert doc["config"]["crash"] == "process,pause"
    assert [s["skipped_pause"] for s in doc["scenarios"]] == [False, True]
