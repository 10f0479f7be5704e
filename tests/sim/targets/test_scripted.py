"""``sim.targets.kit.scripted``: the one rule by which every app mode's scripted model answers a
``--model-script`` turn, and refuses a turn past the script or a tool the agent lacks."""

from __future__ import annotations

import pytest

from sim.targets.kit.declarations import AppError
from sim.targets.kit.scripted import ScriptedCall, scripted_turn
from sim.targets.shapes import Json

SCRIPT: list[dict[str, Json]] = [
    {"content": "", "tool_calls": [{"name": "charge", "args": {"amount_eur": 42}}]},
    {"content": "Paid.", "tool_calls": []},
]


def test_a_turn_gives_its_text_and_its_calls() -> None:
    assert scripted_turn(SCRIPT, 0, {"charge"}) == (
        "",
        [ScriptedCall("charge", {"amount_eur": 42})],
    )
    assert scripted_turn(SCRIPT, 1, {"charge"}) == ("Paid.", [])


def test_a_turn_past_the_script_is_one_line_naming_it() -> None:
    with pytest.raises(AppError, match="has 2 turns; the agent asked for turn 3"):
        scripted_turn(SCRIPT, 2, {"charge"})


def test_a_call_of_a_tool_the_agent_lacks_names_the_turn_and_its_tools() -> None:
    with pytest.raises(AppError, match=r"turn 1 calls 'charge', .* \(it has: refund, send\)"):
        scripted_turn(SCRIPT, 0, {"send", "refund"})


def test_a_framework_that_does_not_name_the_tools_takes_any_call() -> None:
    assert scripted_turn(SCRIPT, 0, None)[1] == [ScriptedCall("charge", {"amount_eur": 42})]
