"""A reduced sweep of the real pydantic-ai target: an agent with a ``FunctionModel`` on
pydantic-ai's DBOS integration (``DBOSAgent``) and a SQLite system database, killed for real,
recovered by ``DBOS.launch`` in a fresh interpreter.

The known duplicate must be found: the model request is a DBOS step and a function tool is not,
so the recovered workflow replays the recorded model responses and calls the tools again -- the
one in flight at the kill, and every tool before it, even after every step was recorded. A tool
whose effect carries an idempotency key of the workflow id and the tool call id must sweep the
same kind of point clean. Skipped, with the reason, where the ``pydantic-ai`` extra is not
installed.
"""

from __future__ import annotations

import pytest
from targetkit import applied_rows
from testkit import needs

from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("pydantic_ai", reason="needs the pydantic-ai extra: pip install -e '.[pydantic-ai]'"),
    needs("dbos", reason="needs the pydantic-ai extra: pip install -e '.[pydantic-ai]'"),
]

CHARGE = "effect:payments.charge#"
OUTCOME = "dbos.update_workflow_outcome#"


def _charge_and_outcome(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the charge's effect (its result is recorded nowhere yet), and just before the
    workflow's outcome is recorded (every model step is): chosen by label, not index."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    outcome = next(i for i, label in enumerate(labels) if label.startswith(OUTCOME))
    return [(charge, "after"), (outcome, "before")]


@pytest.mark.slow
def test_a_recovered_workflow_calls_its_function_tools_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sim.outputs.cli.main import main

    result = sweep_target(get_target("pydantic-ai"), TargetOptions(), choose=_charge_and_outcome)
    assert [c["verdict"] for c in result.matrix] == ["safety", "safety"]
    after_charge, before_outcome = result.failures
    assert after_charge.invariants == ["I1", "H1"]
    # One tool call (the recorded model response gives p2 the same call id), applied twice.
    applied = applied_rows(after_charge.witness)
    assert [("by p1" in applied[0]), ("by p2" in applied[1])] == [True, True]
    assert "call=call_p1_1 " in applied[0] and "call=call_p1_1 " in applied[1]
    # Every model step recorded, the workflow not yet over: both tools run again.
    also = [w for w in before_outcome.witness if w.startswith("also I1: send_receipt")]
    assert len(applied_rows(before_outcome.witness)) == 2 and len(also) == 1
    charge = after_charge.schedule.split(":")[0]
    repro = f"durable-sim target replay pydantic-ai --durability agent --schedule {charge}:after"
    assert after_charge.repro == repro
    # The repro line, run as a command: the same duplicate, exit status 1.
    assert main(repro.split()[1:]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("verdict     safety\n")
    assert "I1: charge_card is declared exactly_once, but the payments ledger shows 2" in printed
    assert "H1: the runtime's own state hides it" in printed


def test_tools_keyed_by_workflow_and_tool_call_id_sweep_clean() -> None:
    result = sweep_target(
        get_target("pydantic-ai"),
        TargetOptions(variant="idempotent"),
        choose=lambda labels: _charge_and_outcome(labels)[1:],
    )
    assert result.schedules == 1
    assert result.verdicts["pass"] == 1, [f.explanation for f in result.failures]
