"""A user's own pydantic-ai agent (``examples/pydantic_ai_booking/travel_agent.py``, not in
``sim/``), swept unmodified through ``--app FILE.py:FACTORY``: the factory gets the scripted
``FunctionModel``, the harness wraps the agent in ``DBOSAgent`` (or runs a ``DBOSDurability``
agent in a workflow of its own), the app's service clients are the effects.

Its first version books the hotel twice after a kill between the booking and the record of the
model step that follows (a function tool is no DBOS step: the recovered workflow calls it
again); the version keyed by the tool call id sweeps the same points clean. The sweeps are slow
(pydantic-ai and DBOS children); skipped where the ``pydantic-ai`` extra is not installed.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from testkit import REPO, needs

from sim.targets.kit.declarations import AppError
from sim.targets.kit.options import app_spec, check_options
from sim.targets.kit.spec import AppArgs
from sim.targets.protocol import ChildContext, TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("pydantic_ai", reason="needs the pydantic-ai extra: pip install -e '.[pydantic-ai]'"),
    needs("dbos", reason="needs the pydantic-ai extra: pip install -e '.[pydantic-ai]'"),
]

APPS = REPO / "examples" / "pydantic_ai_booking"
BOOKING = "effect:app.reserve_room#"
OUTCOME = "dbos.update_workflow_outcome#"


def _options(factory: str, durability: str = "agent", **changes: object) -> TargetOptions:
    words: dict[str, object] = {
        "app": f"{APPS / 'travel_agent.py'}:{factory}",
        "effects": ("reserve_room,send_email",),
        "input": str(APPS / "input.json"),
        "model_script": str(APPS / "script.json"),
        **changes,
    }
    variant = str(words.pop("variant", ""))
    target = get_target("pydantic-ai")
    spec = app_spec(target, AppArgs(**words))  # type: ignore[arg-type]  # AppArgs' own words
    given = TargetOptions(durability=durability, variant=variant, app=spec)
    return check_options(target, given)


def _around_the_booking(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the booking's effect, and just before the workflow's outcome (every model
    step recorded, the tools still run again): chosen by label, as the bundled agent's tests."""
    booking = next(i for i, label in enumerate(labels) if label.startswith(BOOKING))
    outcome = next(i for i, label in enumerate(labels) if label.startswith(OUTCOME))
    return [(booking, "after"), (outcome, "before")]


@pytest.mark.slow
def test_the_users_agent_books_twice_and_its_keyed_fix_does_not() -> None:
    target = get_target("pydantic-ai")
    first = sweep_target(target, _options("build_agent"), choose=_around_the_booking)
    assert first.name == "pydantic-ai+app"
    assert [c["verdict"] for c in first.matrix] == ["safety", "safety"]
    after_booking, before_outcome = first.failures
    # Two bookings applied, one book_hotel result in the run's messages: the history hides it.
    assert after_booking.invariants == before_outcome.invariants == ["I1", "H1"]
    assert "reserve_room is declared exactly_once" in after_booking.explanation
    assert "--app " in after_booking.repro and "--model-script " in after_booking.repro
    # The recovered workflow replays the recorded model step: the same tool call id, run again.
    applied = [w for w in after_booking.witness if w.endswith("[applied]")]
    assert [w.split(" by ")[1][:2] for w in applied] == ["p1", "p2"]
    assert all("idempotency_key=None" in w for w in applied)
    # Every model step recorded, the workflow not yet over: the email is sent again too.
    assert any(w.startswith("also I1: send_email") for w in before_outcome.witness)
    keyed = sweep_target(target, _options("build_keyed_agent"), choose=_around_the_booking)
    assert [c["verdict"] for c in keyed.matrix] == ["pass", "pass"], keyed.failures


@pytest.mark.slow
def test_the_capability_way_finds_the_same_duplicate_and_the_same_fix() -> None:
    target = get_target("pydantic-ai")
    after = lambda labels: _around_the_booking(labels)[:1]  # noqa: E731
    first = sweep_target(target, _options("build_durable_agent", "capability"), choose=after)
    assert [f.invariant for f in first.failures] == ["I1"]
    keyed = sweep_target(target, _options("build_keyed_durable_agent", "capability"), choose=after)
    assert keyed.verdicts["pass"] == 1, keyed.failures


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_script": "nope.json"}, "--model-script nope.json: FileNotFoundError"),
        ({"input": str(APPS / "script.json")}, "--input .*: expected a JSON string"),
        ({"effects": ()}, "--app needs its effects"),
        ({"variant": "idempotent"}, "--variant is the bundled agent's"),
        ({"app": "travel_agent.py"}, "--app is FILE.py:FUNCTION"),
        ({"model_script": str(APPS / "input.json")}, "expected a JSON list"),
        ({"model_script": ""}, "pydantic-ai: --app needs --model-script"),
    ],
)
def test_bad_app_options_are_one_line(changes: dict[str, str], message: str) -> None:
    with pytest.raises(TargetError, match=message):
        _options("build_agent", **changes)


def test_a_malformed_script_turn_is_named(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "x"}]}, {"tool_calls": "x"}]))
    with pytest.raises(TargetError, match="turn 2 is not"):
        _options("build_agent", model_script=str(script))


def test_the_bundled_agent_takes_no_model_script() -> None:
    with pytest.raises(TargetError, match="--model-script need --app"):
        app_spec(get_target("pydantic-ai"), AppArgs(model_script="x.json"))


def _context(tmp_path: Path, options: TargetOptions) -> ChildContext:
    from sim.targets.boundaries import Boundaries, TraceLog
    from sim.targets.ledger import Ledger

    log = TraceLog(tmp_path / "trace.jsonl")
    ledger = Ledger.create(tmp_path / "ledger.sqlite")
    return ChildContext(tmp_path, "p1", options, Boundaries(log, "p1", None), ledger)


def _build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, app: str, durability: str) -> Any:
    """The child's agent, built in this process (the child chdirs: the test's directory is
    restored after it)."""
    from sim.targets.pydantic_ai.app import build_agent

    monkeypatch.chdir(tmp_path)
    options = _options("build_agent", durability)
    assert options.app is not None
    where, function = app.rsplit(":", 1)
    spec = replace(options.app, app=where, function=function)
    return build_agent(_context(tmp_path, replace(options, app=spec)))


@pytest.mark.parametrize(
    ("source", "durability", "message"),
    [
        (
            "def factory(model):\n    return 42\n",
            "agent",
            "returned a int, not a pydantic_ai.Agent",
        ),
        ("import no_such_module\n", "agent", "importing it raised ModuleNotFoundError"),
        ("def factory():\n    return None\n", "capability", "the factory must take the model"),
        (
            "from pydantic_ai import Agent\ndef factory(model):\n    return Agent(model)\n",
            "capability",
            "needs an agent with DBOSDurability",
        ),
    ],
)
def test_a_factory_that_gives_no_usable_agent_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, durability: str, message: str
) -> None:
    (tmp_path / "app.py").write_text(
        "def reserve_room(): ...\ndef send_email(): ...\n" + source, encoding="utf-8"
    )
    with pytest.raises(AppError, match=message):
        _build(tmp_path, monkeypatch, f"{tmp_path / 'app.py'}:factory", durability)


def test_an_effect_the_module_lacks_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app.py").write_text("def reserve_room(): ...\ndef factory(model): ...\n")
    with pytest.raises(AppError, match="--effect send_email: durable_sim_app has no attribute"):
        _build(tmp_path, monkeypatch, f"{tmp_path / 'app.py'}:factory", "agent")


def _scripted_run(script: list[dict[str, Any]]) -> Any:
    """The example's agent on the script model, run without DBOS (what a child's model sees)."""
    from pydantic_ai.models.function import FunctionModel

    from sim.targets.pydantic_ai.app import ScriptModel

    spec = importlib.util.spec_from_file_location("travel_agent", APPS / "travel_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.build_agent(FunctionModel(ScriptModel(script, "p1")))
    return agent.run_sync(json.loads((APPS / "input.json").read_text(encoding="utf-8")))


def test_the_script_answers_turn_by_turn_with_ids_of_the_process() -> None:
    result = _scripted_run(json.loads((APPS / "script.json").read_text(encoding="utf-8")))
    assert result.output.startswith("Booked 2 nights at Hotel Alma")
    calls = [p for m in result.all_messages() for p in m.parts if p.part_kind == "tool-call"]
    assert [(c.tool_name, c.tool_call_id) for c in calls] == [
        ("book_hotel", "call_p1_1_0"),
        ("email_confirmation", "call_p1_2_0"),
    ]


def test_a_script_that_runs_out_or_calls_a_missing_tool_names_the_turn() -> None:
    script = json.loads((APPS / "script.json").read_text(encoding="utf-8"))
    with pytest.raises(AppError, match="has 2 turns; the agent asked for turn 3"):
        _scripted_run(script[:2])
    missing = [script[0], {"tool_calls": [{"name": "cancel_booking", "args": {}}]}]
    with pytest.raises(AppError, match="turn 2 calls 'cancel_booking', a tool the agent does not"):
        _scripted_run(missing)


DEPS_APP = """
from dataclasses import dataclass

from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSDurability


@dataclass
class Customer:
    email: str
    tier: str = "basic"


def send_email(to, body, idempotency_key=None):
    return f"sent to {to}"


def _agent(model, durable):
    agent = Agent(
        model,
        name="notify_agent",
        deps_type=Customer,
        capabilities=[DBOSDurability()] if durable else [],
    )

    @agent.tool
    async def notify(ctx: RunContext[Customer], text: str) -> str:
        return send_email(ctx.deps.email, f"[{ctx.deps.tier}] {text}")

    return agent


def build_agent(model):
    return _agent(model, durable=False)


def build_durable_agent(model):
    return _agent(model, durable=True)
"""


@pytest.mark.parametrize(
    ("factory", "durability"),
    [
        ("build_agent", "agent"),
        pytest.param("build_durable_agent", "capability", marks=pytest.mark.slow),
    ],
)
def test_deps_given_as_json_reach_the_agents_tools(
    tmp_path: Path, factory: str, durability: str
) -> None:
    """``--deps`` is validated into the agent's ``deps_type`` (a dataclass here) and handed to
    the run, on both DBOS ways: the tool's effect sees the customer the JSON names."""
    from sim.targets.sweep import reference_run

    (tmp_path / "notify.py").write_text(DEPS_APP, encoding="utf-8")
    (tmp_path / "deps.json").write_text('{"email": "ada@example.com", "tier": "gold"}')
    (tmp_path / "input.json").write_text('"Tell the customer the refund is on its way."')
    script = [{"tool_calls": [{"name": "notify", "args": {"text": "refund sent"}}]}]
    (tmp_path / "script.json").write_text(json.dumps([*script, {"content": "Done."}]))
    options = _options(
        factory,
        durability,
        app=f"{tmp_path / 'notify.py'}:{factory}",
        effects=("send_email",),
        input=str(tmp_path / "input.json"),
        model_script=str(tmp_path / "script.json"),
        deps=str(tmp_path / "deps.json"),
    )
    reference = reference_run(get_target("pydantic-ai"), options, timeout_s=120.0)
    (row,) = reference.ledger
    assert "'ada@example.com', '[gold] refund sent'" in row.detail, row.detail


def test_deps_that_do_not_fit_the_deps_type_are_one_line(tmp_path: Path) -> None:
    from pydantic_ai import Agent

    from sim.targets.pydantic_ai.app import agent_deps

    agent: Agent[object, object] = Agent("test", deps_type=int)
    assert agent_deps(agent, "42") == 42
    with pytest.raises(AppError, match="--deps: not a int") as caught:
        agent_deps(agent, {"no": "int"})
    assert "\n" not in str(caught.value)
