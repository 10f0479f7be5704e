"""I21 and I22, the halves of docs/architecture.md 1.5 no other oracle states: only an input
accepted to steer is placed into a running run (a follow-up waits for the next run), and a
graceful shutdown settles nothing (the next owner resumes what was in flight). Each on the
unbroken runtime (passes) and on the mutant that breaks it (the oracle itself reports it, and
nothing else must: without the oracle, the run passes)."""

from __future__ import annotations

from sim.explore.mutants import mutant_named, planted
from sim.judgement.oracles import check, check_fencing, check_shutdown, check_steering_mode
from sim.run.runner import RunResult, run_scenario
from sim.world.scenario import load_scenario


def _run(scenario: str) -> RunResult:
    return run_scenario(load_scenario(scenario), seed=0, store="file")


def _accepted(result: RunResult, request_id: str) -> str:
    (sid,) = [
        r.event.submission_id
        for r in result.durable.records
        if r.event.type == "input_accepted" and r.event.request_id == request_id
    ]
    return sid


def test_steering_inputs_steered_pass() -> None:
    result = _run("steer_and_follow_up_queued")
    steered = [r for r in result.durable.records if r.event.type == "inputs_steered"]
    assert steered, "the scenario steers nothing: I21 would judge nothing"
    assert check_steering_mode(result) == []


def test_a_follow_up_steered_into_the_running_run_is_an_i21_violation() -> None:
    with planted(mutant_named("steer-follow-ups")):  # its reducer too: I2 would see it
        result = _run("steer_and_follow_up_queued")
        others = [v.invariant for v in check(result, result)]
    follow_up = _accepted(result, "tickets-2")
    (violation,) = check_steering_mode(result)
    assert violation.invariant == "I21"
    assert f"input {follow_up}, accepted as follow_up" in violation.explanation
    assert "input_accepted" in violation.witness[0] and "inputs_steered" in violation.witness[1]
    # Only I21 sees it: every other oracle passes the run against itself.
    assert others == ["I21"]


def test_a_shutdown_that_leaves_the_run_in_flight_passes() -> None:
    result = _run("graceful_shutdown_takeover")
    first = result.trace.boundaries[0].process
    shut_down = [p for p, _ in result.leases.shutdowns]
    assert shut_down[0] == first, "the first worker's shutdown was not recorded"
    assert check_shutdown(result) == []


def test_a_shutdown_that_aborts_the_run_is_an_i22_violation() -> None:
    with planted(mutant_named("shutdown-aborts-run")):
        result = _run("graceful_shutdown_takeover")
    (violation,) = check_shutdown(result)
    assert violation.invariant == "I22"
    assert "settled the run during its graceful shutdown" in violation.explanation
    assert any("run_stopped" in w and "aborted" in w for w in violation.witness)
    assert [v.invariant for v in check(result, result)] == ["I22"]


def test_work_after_the_release_is_i8s_not_i22s() -> None:
    """I22 ends at the lease release; what comes after it is I8's (no work after a release)."""
    with planted(mutant_named("release-before-drain")):
        result = _run("graceful_shutdown_takeover")
    assert check_shutdown(result) == []
    assert [v.invariant for v in check_fencing(result)] == ["I8"]
