"""A user's own LangGraph graph (``examples/langgraph_support/support_graph.py``, not in ``sim/``),
swept unmodified through ``--app FILE.py:FACTORY``: the factory gets the scripted model, the
harness compiles the graph with its checkpointer, the app's service clients are the effects.

Its first version refunds twice after a kill between the refund and the checkpoint that saves
the tool's result; the keyed version sweeps the same points clean. Slow (LangGraph children);
skipped where the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

import pytest
from testkit import REPO, needs

from sim.targets.kit.options import app_spec, check_options
from sim.targets.kit.spec import AppArgs
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("langgraph", reason="needs the langgraph extra: pip install -e '.[langgraph]'"),
]

APPS = REPO / "examples" / "langgraph_support"
REFUND = "effect:app.refund#"


def _options(factory: str, **changes: object) -> TargetOptions:
    words: dict[str, object] = {
        "app": f"{APPS / 'support_graph.py'}:{factory}",
        "effects": ("refund,send_email",),
        "input": str(APPS / "input.json"),
        "model_script": str(APPS / "script.json"),
        **changes,
    }
    variant = str(words.pop("variant", ""))
    target = get_target("langgraph")
    spec = app_spec(target, AppArgs(**words))  # type: ignore[arg-type]  # AppArgs' own words
    return check_options(target, TargetOptions(durability="sync", variant=variant, app=spec))


def _after_the_refund(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the refund's effect, where the duplicate is (chosen by label, as the bundled
    agent's tests; a kill before the effect is the bundled agent's test's point)."""
    refund = next(i for i, label in enumerate(labels) if label.startswith(REFUND))
    return [(refund, "after")]


@pytest.mark.slow
def test_the_users_graph_refunds_twice_and_its_keyed_fix_does_not() -> None:
    target = get_target("langgraph")
    first = sweep_target(target, _options("build_graph"), choose=_after_the_refund)
    assert first.name == "langgraph+app"
    assert [c["verdict"] for c in first.matrix] == ["safety"]
    (failure,) = first.failures
    assert failure.invariant == "I1" and "refund is declared exactly_once" in failure.explanation
    # The refund_order tool's one result in the thread's history, for two refunds: H1.
    assert failure.invariants == ["I1", "H1"]
    assert "--app " in failure.repro and "--model-script " in failure.repro
    keyed = sweep_target(target, _options("build_keyed_graph"), choose=_after_the_refund)
    assert [c["verdict"] for c in keyed.matrix] == ["pass"], keyed.failures


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_script": "nope.json"}, "--model-script nope.json: FileNotFoundError"),
        ({"model_script": str(APPS / "input.json")}, "expected a JSON list of turns"),
        ({"effects": ()}, "--app needs its effects"),
        ({"variant": "idempotent"}, "--variant is the bundled agent's"),
        ({"deps": str(APPS / "input.json")}, "langgraph: --deps is not for its --app"),
    ],
)
def test_bad_app_options_are_one_line(changes: dict[str, str], message: str) -> None:
    with pytest.raises(TargetError, match=message):
        _options("build_graph", **changes)


def test_the_bundled_agent_takes_no_model_script() -> None:
    with pytest.raises(TargetError, match="--model-script need --app"):
        app_spec(get_target("langgraph"), AppArgs(model_script="x.json"))


@pytest.mark.slow
def test_a_tool_that_lands_no_declared_effect_is_listed_not_judged() -> None:
    """Only ``refund`` declared: ``email_customer`` still runs, lands nothing the judge counts,
    and the report lists it as an undeclared effect; with both declared, nothing is listed."""
    target = get_target("langgraph")
    one = sweep_target(target, _options("build_graph", effects=("refund",)), choose=lambda _: [])
    assert one.reference.outcome["undeclared_effects"] == {"email_customer": 1}
    both = sweep_target(target, _options("build_graph"), choose=lambda _: [])
    assert "undeclared_effects" not in both.reference.outcome
