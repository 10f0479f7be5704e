"""A reduced sweep of the real LangGraph target: real child processes, a real SIGKILL, a real
``SqliteSaver`` file, resumed in a fresh interpreter.

The known duplicate must be found (a kill between the tool's effect and the checkpointer's
``put_writes`` under ``durability="sync"`` charges the card twice, and LangGraph's own state shows
one charge); the fix docs/targets.md recommends (an idempotency key from the thread id and the tool
call id) must sweep the same points clean. If the harness ever stops seeing the duplicate, the
first test fails. Skipped, with the reason, where the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit import needs

from sim.outputs.report import write_report
from sim.targets.host import PointRun, run_point
from sim.targets.judge import judge_point
from sim.targets.kit.options import check_options
from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import (
    crash_at,
    reference_run,
    sweep_target,
    target_document,
)

pytestmark = [
    needs("langgraph", reason="needs the langgraph extra: pip install -e '.[langgraph]'"),
    needs(
        "langgraph.checkpoint.sqlite",
        reason="needs the langgraph extra: pip install -e '.[langgraph]'",
    ),
]

CHARGE = "effect:payments.charge#"


@pytest.fixture(scope="module")
def sync_reference() -> PointRun:
    """The fault-free run under sync durability, shared by the tests that judge against it."""
    target = get_target("langgraph")
    return reference_run(
        target, check_options(target, TargetOptions(durability="sync")), timeout_s=60.0
    )


def _around_the_charge(labels: list[str]) -> list[tuple[int, str]]:
    """Just before the charge, and just after it (the effect landed; the tool has not returned,
    so nothing of its result can be saved yet): chosen by label, so a longer trace moves no test.

    Not the instant before the ``put_writes`` that saves the result: LangGraph submits that
    write and the next step's ``put`` to a thread pool, and when the pool runs the ``put``
    first, a kill before the ``put_writes`` finds the result already checkpointed (the full
    sweep usually reports a duplicate there, a loaded machine sometimes not)."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    return [(charge, "before"), (charge, "after")]


@pytest.mark.slow
def test_sync_durability_charges_twice_and_its_state_hides_it(
    tmp_path: Path, sync_reference: PointRun
) -> None:
    target = get_target("langgraph")
    result = sweep_target(
        target,
        TargetOptions(durability="sync"),
        choose=_around_the_charge,
        reference=sync_reference,
    )
    charge = next(i for i, label in enumerate(result.reference.labels) if label.startswith(CHARGE))
    verdicts = {(c["index"], c["when"]): c["verdict"] for c in result.matrix}
    assert verdicts[(charge, "before")] == "pass"  # killed before the effect: run once, fine
    assert verdicts[(charge, "after")] == "safety"
    failure = next(f for f in result.failures if f.schedule == f"{charge}:after:process")
    assert failure.invariant == "I1" and "H1" in failure.invariants
    applied = [w for w in failure.witness if w.startswith("ledger#") and w.endswith("[applied]")]
    assert len(applied) == 2
    assert "by p1" in applied[0] and "by p2" in applied[1]
    call = applied[0].split(" call=")[1].split()[0]
    assert f" call={call} " in applied[1]  # the same tool call, executed twice
    assert (
        f"crash: after {result.reference.labels[charge]} (boundary {charge}) killed p1"
        in failure.witness
    )
    assert failure.repro == (
        f"durable-sim target replay langgraph --durability sync --schedule {charge}:after"
    )
    # The report renders the finding with its name.
    write_report(tmp_path, target_document([result], wall_s=result.wall_s, versions={}))
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert 'tests="3" failures="1"' in junit  # the reference run and the two points
    assert "I1 effects match policy" in report
    assert "also H1: the runtime's own state hides it" in report


@pytest.mark.slow
def test_an_idempotency_key_from_thread_and_call_id_sweeps_clean() -> None:
    target = get_target("langgraph")
    result = sweep_target(
        target,
        TargetOptions(durability="sync", variant="idempotent"),
        choose=lambda ls: _around_the_charge(ls)[1:],
    )
    assert result.schedules == 1
    assert result.verdicts["pass"] == 1, [f.explanation for f in result.failures]


def test_exit_durability_loses_the_run_and_charges_again() -> None:
    target = get_target("langgraph")
    result = sweep_target(
        target,
        TargetOptions(durability="exit"),
        choose=lambda ls: [(next(i for i, x in enumerate(ls) if x.startswith(CHARGE)), "after")],
    )
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1", "P1"]
    assert any(w == "p2: start" for w in failure.witness)


@pytest.mark.slow
def test_the_async_saver_charges_twice_too() -> None:
    target = get_target("langgraph")
    result = sweep_target(
        target,
        TargetOptions(durability="sync", saver="aiosqlite"),
        choose=lambda ls: _around_the_charge(ls)[1:2],
    )
    assert result.store == "aiosqlite-sync"
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"]


def _before_the_checkpoint_after_the_first_model_call(labels: list[str]) -> list[tuple[int, str]]:
    agent = labels.index("node:agent#1")
    put = next(i for i, label in enumerate(labels) if i > agent and label.startswith("saver.put#"))
    return [(put, "before")]


#: Runs of the ``next`` point until the restart finds the trap (see the test's docstring).
TRAP_ATTEMPTS = 3


@pytest.mark.slow
def test_a_restart_that_trusts_next_abandons_a_run_with_saved_writes(
    sync_reference: PointRun,
) -> None:
    """Killed after the model's writes were saved but before the step's checkpoint: LangGraph's
    ``next`` is empty, so a restart that resumes on ``next`` never charges at all; the harness's
    default rule (any task left) resumes and passes.

    LangGraph hands the ``put_writes`` and the next ``put`` to a thread pool; a kill at the
    ``put``'s entry usually finds the writes saved (the trap), but a pool that ran them the other
    way round leaves no trap to fall in. So the point is run until the restart finds the trap, at
    most ``TRAP_ATTEMPTS`` times, and every run is judged by what it found."""
    target = get_target("langgraph")
    trusting = check_options(target, TargetOptions(durability="sync", resume="next"))
    reference = reference_run(target, trusting, timeout_s=60.0)
    ((index, when),) = _before_the_checkpoint_after_the_first_model_call(reference.labels)
    trapped = False
    for _ in range(TRAP_ATTEMPTS):
        run = run_point(target, trusting, crash_at(reference, index, when))
        verdict = judge_point(run, reference, target.tools(trusting))
        (found,) = [r for r in run.rows if r["t"] == "note"]
        if found["next"] or not found["saved"]:
            assert verdict.verdict == "pass", verdict.violations  # no trap: resumed normally
            continue
        trapped = True
        assert run.actions == {"p2": "none"}
        liveness = next(v for v in verdict.violations if v.invariant == "I7")
        assert "p2 found: next=[] tasks=['agent'] with saved writes=['agent']" in liveness.witness
        break
    assert trapped, f"the restart never found next=() with saved writes in {TRAP_ATTEMPTS} runs"
    default = sweep_target(
        target,
        TargetOptions(durability="sync"),
        choose=_before_the_checkpoint_after_the_first_model_call,
        reference=sync_reference,
    )
    assert default.verdicts["pass"] == 1


@pytest.mark.slow
def test_the_replay_line_reproduces_the_duplicate(
    sync_reference: PointRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repro line a failure carries, run as a command: the same duplicate, exit status 1."""
    from sim.outputs.cli.main import main

    point = f"{_around_the_charge(sync_reference.labels)[1][0]}:after"
    replay = f"durable-sim target replay langgraph --durability sync --schedule {point}"
    assert main(replay.split()[1:]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("verdict     safety\n")
    assert "I1: charge_card is declared exactly_once, but the payments ledger shows 2" in printed
    assert "H1: the runtime's own state hides it" in printed
