"""A reduced sweep of the real DBOS target: a DBOS workflow on a SQLite system database, killed
for real between a step's effect and ``record_operation_result``, recovered by ``DBOS.launch``
in a fresh interpreter.

The known duplicate must be found (the step runs again on recovery: two charges, one recorded
step output); a step whose effect carries an idempotency key of the workflow id and the step id
must sweep the same points clean. Skipped, with the reason, where the ``dbos`` extra is not
installed.
"""

from __future__ import annotations

import pytest
from testkit import needs

from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("dbos", reason="needs the dbos extra: pip install -e '.[dbos]'"),
]

CHARGE = "effect:payments.charge#"


def _around_the_charge(labels: list[str]) -> list[tuple[int, str]]:
    """Just before and just after the charge step's effect (its output not yet recorded)."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    return [(charge, "before"), (charge, "after")]


@pytest.mark.slow
def test_a_kill_before_record_operation_result_charges_twice() -> None:
    result = sweep_target(get_target("dbos"), TargetOptions(), choose=_around_the_charge)
    charge = next(i for i, label in enumerate(result.reference.labels) if label.startswith(CHARGE))
    assert [c["verdict"] for c in result.matrix] == ["pass", "safety"]
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"]
    applied = [w for w in failure.witness if w.startswith("ledger#") and w.endswith("[applied]")]
    assert [("by p1" in applied[0]), ("by p2" in applied[1])] == [True, True]
    assert "call=pay-INV-42:1 " in applied[0] and "call=pay-INV-42:1 " in applied[1]
    assert failure.repro == f"durable-sim target replay dbos --schedule {charge}:after"


def test_a_step_keyed_by_workflow_and_step_id_sweeps_clean() -> None:
    result = sweep_target(
        get_target("dbos"),
        TargetOptions(variant="idempotent"),
        choose=lambda labels: _around_the_charge(labels)[1:],
    )
    assert result.schedules == 1
    assert result.verdicts["pass"] == 1, [f.explanation for f in result.failures]
