"""A reduced sweep of the real openai-agents target: an OpenAI Agents SDK ``Runner`` with a
scripted ``Model`` and two function tools, durable by a ``SQLiteSession`` or by the caller's
saved ``RunState``, killed for real and re-entered in a fresh interpreter.

The known duplicates must be found. With a session, the tool call and its output are added to
the session together, after the tool ran: a kill between the charge and that write leaves a
session holding only the user's message, the re-entered run asks the model again, and the card
is charged again under a new call id. With a saved ``RunState``, the state is saved at the
approval interruption and at the end: a kill after the approved charge resumes the saved state
and runs the same call (same call id) again. Neither history shows it. A tool keyed by the run id,
the tool and its arguments must sweep the same points clean; one keyed by the tool call id does
not, since the re-asked model mints new call ids. Skipped where the extra is not installed.
"""

from __future__ import annotations

import pytest
from targetkit import applied_rows, just_after
from testkit import needs

from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("agents", reason="needs the openai-agents extra: pip install -e '.[openai-agents]'"),
]

CHARGE = "effect:payments.charge#"
RECEIPT = "effect:outbox.send#"


@pytest.mark.slow
def test_a_session_re_entered_after_the_charge_charges_again_under_a_new_call_id() -> None:
    target = get_target("openai-agents")
    result = sweep_target(target, TargetOptions(durability="session"), choose=just_after(CHARGE))
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"]
    applied = applied_rows(failure.witness)
    # p1's call was never written to the session: p2's model issued a new call.
    assert "call=call_p1_1 " in applied[0] and "by p1" in applied[0]
    assert "call=call_p2_1 " in applied[1] and "by p2" in applied[1]
    index = failure.schedule.split(":")[0]
    assert failure.repro == (
        f"durable-sim target replay openai-agents --durability session --schedule {index}:after"
    )


@pytest.mark.slow
def test_a_saved_run_state_resumed_after_the_approved_charge_runs_it_again() -> None:
    target = get_target("openai-agents")
    result = sweep_target(target, TargetOptions(durability="run_state"), choose=just_after(CHARGE))
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"]
    applied = applied_rows(failure.witness)
    # The saved state holds the approved call: the same call id runs twice.
    assert "call=call_p1_1 " in applied[0] and "by p1" in applied[0]
    assert "call=call_p1_1 " in applied[1] and "by p2" in applied[1]


@pytest.mark.slow
def test_a_key_of_the_tool_call_id_misses_the_call_the_model_is_asked_for_again() -> None:
    target = get_target("openai-agents")
    options = TargetOptions(durability="run_state", variant="call_id")
    result = sweep_target(target, options, choose=just_after(RECEIPT))
    (failure,) = result.failures
    # The charge's call id is in the saved state, so its key deduplicates the re-run; the
    # receipt's call was never saved, and the re-asked model gave it a new id and a new key.
    assert failure.invariants == ["I1", "H1"]
    assert failure.explanation.startswith("send_receipt is declared exactly_once")
    assert not any(w.startswith("also I1: charge_card") for w in failure.witness)
    applied = applied_rows(failure.witness)
    assert "call=call_p1_2 key=pay-INV-42:call_p1_2 by p1" in applied[0]
    assert "call=call_p2_1 key=pay-INV-42:call_p2_1 by p2" in applied[1]


@pytest.mark.slow
def test_tools_keyed_by_run_tool_and_arguments_sweep_clean() -> None:
    target = get_target("openai-agents")
    options = TargetOptions(durability="session", variant="idempotent")
    result = sweep_target(target, options, choose=just_after(CHARGE))
    assert result.schedules == 1
    assert result.verdicts["pass"] == 1, [f.explanation for f in result.failures]


def test_options_are_checked_before_any_child_runs() -> None:
    target = get_target("openai-agents")
    assert target.missing() is None
    assert check_options(target, TargetOptions()).durability == "session"
    assert check_options(target, TargetOptions()).resume == "continue"
    with pytest.raises(TargetError, match="--resume resend needs --durability session"):
        check_options(target, TargetOptions(durability="run_state", resume="resend"))
    with pytest.raises(TargetError, match="takes no --app"):
        check_options(target, TargetOptions(app=parse_app("t", AppArgs(app="x:f", effects=("f",)))))
    with pytest.raises(TargetError, match="--variant must be"):
        check_options(target, TargetOptions(variant="step"))
    assert [t.name for t in target.tools(TargetOptions())] == ["charge_card", "send_receipt"]


def test_session_items_read_as_one_row_each() -> None:
    from sim.targets.openai_agents.state import _fill
    from sim.targets.protocol import TargetState

    state = TargetState(exists=True)
    items: list[object] = [
        {"role": "user", "content": "pay"},
        {"type": "function_call", "name": "charge_card", "call_id": "c1", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "charged"},
    ]
    _fill(state, items)
    assert state.history == ["user: pay", "model: calls charge_card", "tool charge_card: charged"]
    assert state.results == {"charge_card": ["c1"]} and not state.finished
    assert state.pending == ["model call"]
