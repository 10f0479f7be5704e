"""``durable-sim target record``: the app runs once with the model its factory builds, and the
model's turns become a ``--model-script`` the sweep then runs offline.

No provider is reachable from this machine, so the app's "own" model here is a local chat model
written in the app file (``HouseModel``), answering as a provider would; what is tested is the
recording: every response captured, in the script's format, and a sweep on the recorded script
finding what the hand-written one finds. Recording from a real provider is the same code path
with a network. Skipped where the langgraph extra is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from targetkit import app_options
from testkit import REPO, needs

from sim.outputs.cli.main import main
from sim.targets.protocol import TargetError
from sim.targets.recording import record_script
from sim.targets.registry import get_target
from sim.targets.shapes import ScriptTurn
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("langgraph", reason="needs the langgraph extra: pip install -e '.[langgraph]'"),
]

EXAMPLE = REPO / "examples" / "langgraph_support"

HOUSE_APP = f'''
import sys
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

sys.path.insert(0, {str(EXAMPLE)!r})
from support_graph import build_graph as build_support_graph

BODY = "Your refund of 30 EUR for A-17 is on its way."


class HouseModel(BaseChatModel):
    """The app's own model: answers the support case as the team's provider does."""

    @property
    def _llm_type(self) -> str:
        return "house"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done == 0:
            call = {{"name": "refund_order", "args": {{"order_id": "A-17", "amount_eur": 30}}}}
        elif done == 1:
            call = {{"name": "email_customer", "args": {{"to": "ada@example.com", "body": BODY}}}}
        else:
            message = AIMessage(content="Refunded 30 EUR for order A-17 and emailed you.")
            return ChatResult(generations=[ChatGeneration(message=message)])
        message = AIMessage(content="", tool_calls=[{{**call, "id": f"house_{{done}}"}}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_graph(model: Any = None) -> Any:
    return build_support_graph(model or HouseModel())


def build_without_default(model: Any) -> Any:
    return build_support_graph(model)
'''


def _app(tmp_path: Path) -> Path:
    app = tmp_path / "house_app.py"
    app.write_text(HOUSE_APP, encoding="utf-8")
    return app


def test_the_recorded_turns_are_the_models_in_the_scripts_format(tmp_path: Path) -> None:
    out = tmp_path / "recorded.json"
    turns = record_script(
        "langgraph",
        app=f"{_app(tmp_path)}:build_graph",
        app_input=str(EXAMPLE / "input.json"),
        out=out,
    )
    written = json.loads(out.read_text(encoding="utf-8"))
    assert turns == written
    handwritten = json.loads((EXAMPLE / "script.json").read_text(encoding="utf-8"))
    assert [t["tool_calls"] for t in written] == [t.get("tool_calls", []) for t in handwritten]
    assert written[-1]["content"] == handwritten[-1]["content"]


@pytest.mark.slow
def test_a_sweep_on_the_recorded_script_finds_the_double_refund(tmp_path: Path) -> None:
    """The recorded script drives the scripted model as a hand-written one does: the support
    graph's double refund after a kill past the refund's effect is found again."""
    out = tmp_path / "recorded.json"
    house = f"{_app(tmp_path)}:build_graph"
    record_script("langgraph", app=house, app_input=str(EXAMPLE / "input.json"), out=out)
    target = get_target("langgraph")
    options = app_options(
        "langgraph",
        f"{EXAMPLE / 'support_graph.py'}:build_graph",
        durability="sync",
        effects=["refund,send_email"],
        input=str(EXAMPLE / "input.json"),
        model_script=str(out),
    )

    def after_refund(labels: list[str]) -> list[tuple[int, str]]:
        return [
            (next(i for i, x in enumerate(labels) if x.startswith("effect:app.refund#")), "after")
        ]

    result = sweep_target(target, options, choose=after_refund)
    (failure,) = result.failures
    assert failure.invariant == "I1" and "refund" in failure.explanation


def test_record_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = _app(tmp_path)
    given = str(EXAMPLE / "input.json")
    with pytest.raises(TargetError, match="'model' needs a default that builds it"):
        record_script(
            "langgraph",
            app=f"{app}:build_without_default",
            app_input=given,
            out=tmp_path / "a.json",
        )
    with pytest.raises(TargetError, match="has no model to record"):
        record_script("dbos", app=f"{app}:build_graph", app_input=given, out=tmp_path / "b.json")
    existing = tmp_path / "exists.json"
    existing.write_text("[]", encoding="utf-8")
    status = main(
        [
            "target",
            "record",
            "langgraph",
            "--app",
            f"{app}:build_graph",
            "--input",
            given,
            "--out",
            str(existing),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1 and "never overwrites" in err


BOOKING = REPO / "examples" / "pydantic_ai_booking"

HOUSE_AGENT = f'''
import sys
from typing import Any

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

sys.path.insert(0, {str(BOOKING)!r})
from travel_agent import build_agent as build_travel_agent


def house(messages: Any, info: Any) -> ModelResponse:
    """The app's own model (a provider's, in production): book, email, answer."""
    done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
    if done == 0:
        args = {{"hotel": "Hotel Alma, Lisbon", "check_in": "2025-06-12", "nights": 2}}
        return ModelResponse(parts=[ToolCallPart("book_hotel", args)])
    if done == 1:
        args = {{"to": "ada@example.com", "booking": "BK-HOTEL-2025-06-12"}}
        return ModelResponse(parts=[ToolCallPart("email_confirmation", args)])
    return ModelResponse(parts=[TextPart("Booked and emailed.")])


def build_agent(model: Any = None) -> Any:
    return build_travel_agent(model or FunctionModel(house))
'''


def test_a_pydantic_ai_agents_own_model_is_recorded(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="needs the pydantic-ai extra")
    app = tmp_path / "house_agent.py"
    app.write_text(HOUSE_AGENT, encoding="utf-8")
    out = tmp_path / "recorded.json"
    turns = record_script(
        "pydantic-ai", app=f"{app}:build_agent", app_input=str(BOOKING / "input.json"), out=out
    )
    handwritten = json.loads((BOOKING / "script.json").read_text(encoding="utf-8"))
    assert [t["tool_calls"] for t in turns] == [t.get("tool_calls", []) for t in handwritten]
    last: ScriptTurn = {"content": "Booked and emailed.", "tool_calls": []}
    assert turns[-1] == last
