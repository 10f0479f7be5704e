"""A reduced sweep of the real llama-index target: a LlamaIndex Workflow of two steps with the
checkpoint loop of upstream's durable-workflows page (``ctx.to_dict()`` saved to SQLite at each
step's end), killed for real, resumed by ``Context.from_dict`` and ``run(ctx=...)`` in a fresh
interpreter.

The known finding must be found: a step whose effect landed before the next snapshot was saved
runs again on resume (the page: "Resume is at-least-once") -- the receipt step re-run from the
snapshot that holds it in progress, under the same work item id; and the charge step, which no
snapshot covers yet, re-run by a process that starts the run over. Effects keyed by the run id
and the work item id must sweep the same points clean. Skipped, with the reason, where the
``llama-index`` extra is not installed.
"""

from __future__ import annotations

import pytest
from targetkit import applied_rows
from testkit import needs

from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("workflows", reason="needs the llama-index extra: pip install -e '.[llama-index]'"),
]

CHARGE = "effect:payments.charge#"
SEND = "effect:outbox.send#"


def _after_each_effect(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the charge's effect (no snapshot saved yet) and just after the receipt's
    (the last snapshot holds the receipt step in progress): chosen by label, not index."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    send = next(i for i, label in enumerate(labels) if label.startswith(SEND))
    return [(charge, "after"), (send, "after")]


@pytest.mark.slow
def test_a_step_in_flight_at_the_kill_runs_again_on_resume() -> None:
    result = sweep_target(get_target("llama-index"), TargetOptions(), choose=_after_each_effect)
    assert [c["verdict"] for c in result.matrix] == ["safety", "safety"]
    after_charge, after_send = result.failures
    # No snapshot yet: the restart starts the run over and charges again.
    assert after_charge.invariants == ["I1", "H1", "P1"]
    charged = applied_rows(after_charge.witness)
    assert [("by p1" in charged[0]), ("by p2" in charged[1])] == [True, True]
    # The snapshot holds send_receipt in progress: resumed, it runs again under the same id.
    assert after_send.invariants == ["I1", "H1"]
    sent = applied_rows(after_send.witness)
    assert [("by p1" in sent[0]), ("by p2" in sent[1])] == [True, True]
    same = "call=pay-INV-42:work_item_2 "
    assert same in sent[0] and same in sent[1]
    send = after_send.schedule.split(":")[0]
    assert after_send.repro == f"durable-sim target replay llama-index --schedule {send}:after"


@pytest.mark.slow
def test_the_keyed_workflow_with_a_first_step_sweeps_clean_after_each_effect() -> None:
    """The resumed step's key is the one the killed process sent (the work item id is in the
    snapshot), and the first step does nothing outside, so a kill after the charge resumes from
    a snapshot instead of starting over (no P1)."""
    result = sweep_target(
        get_target("llama-index"),
        TargetOptions(variant="idempotent"),
        choose=_after_each_effect,
    )
    assert result.schedules == 2
    assert result.verdicts["pass"] == 2, [f.explanation for f in result.failures]


def test_the_defaults_are_the_checkpoint_loop_on_sqlite() -> None:
    options = check_options(get_target("llama-index"), TargetOptions())
    assert (options.durability, options.saver, options.resume) == ("step", "sqlite", "running")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (TargetOptions(variant="step"), "llama-index: --variant must be as_is|idempotent"),
        (TargetOptions(durability="dbos"), "llama-index: --durability must be step"),
        (TargetOptions(resume="next"), "llama-index: --resume must be running"),
        (
            TargetOptions(app=parse_app("t", AppArgs(app="app:build", effects=("f",)))),
            "llama-index: takes no --app",
        ),
    ],
)
def test_bad_options_are_refused_in_one_line(options: TargetOptions, message: str) -> None:
    with pytest.raises(TargetError, match=message) as refused:
        check_options(get_target("llama-index"), options)
    assert "\n" not in str(refused.value)
