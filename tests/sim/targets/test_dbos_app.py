"""A user's own DBOS workflow (``examples/dbos_orders/orders.py``, not in ``sim/``), swept
unmodified through ``--app FILE.py:WORKFLOW``: the harness launches DBOS on the point's system
database, the app's payment and mail clients are the effects.

Its first version charges twice after a kill between the charge and the record of the step that
made it (the step also sends the email, so the window spans it); the keyed version sweeps the
same points clean. Slow (DBOS children); skipped where the ``dbos`` extra is not installed. The
one-line refusals of bad options are fast: the parent checks them, or the fault-free run's first
child raises them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit import REPO, needs

from sim.outputs.cli.main import main
from sim.targets.kit.options import app_spec, check_options
from sim.targets.kit.spec import AppArgs
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs("dbos", reason="needs the dbos extra: pip install -e '.[dbos]'"),
]

APPS = REPO / "examples" / "dbos_orders"
CHARGE = "effect:app.charge#"
EMAIL = "effect:app.send_email#"


def _options(workflow: str, **changes: object) -> TargetOptions:
    words: dict[str, object] = {
        "app": f"{APPS / 'orders.py'}:{workflow}",
        "effects": ("charge,send_email",),
        "input": str(APPS / "input.json"),
        **changes,
    }
    variant = str(words.pop("variant", ""))
    target = get_target("dbos")
    spec = app_spec(target, AppArgs(**words))  # type: ignore[arg-type]  # AppArgs' own words
    return check_options(target, TargetOptions(variant=variant, app=spec))


def _around_the_charge(labels: list[str]) -> list[tuple[int, str]]:
    """After the charge, and after the email the same step sends: the two ends of the window
    (by label). A kill before the charge is the bundled workflow's test's point."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    email = next(i for i, label in enumerate(labels) if label.startswith(EMAIL))
    return [(charge, "after"), (email, "after")]


@pytest.mark.slow
def test_the_users_workflow_charges_twice_and_its_keyed_fix_does_not() -> None:
    target = get_target("dbos")
    first = sweep_target(target, _options("place_order"), choose=_around_the_charge)
    assert first.name == "dbos+app"
    assert [c["verdict"] for c in first.matrix] == ["safety", "safety"]
    assert len(first.failures) == 2
    for failure in first.failures:
        assert failure.invariant == "I1"
        assert "charge is declared exactly_once" in failure.explanation
        assert "--app " in failure.repro and "--input " in failure.repro
    keyed = sweep_target(target, _options("place_order_keyed"), choose=_around_the_charge)
    assert [c["verdict"] for c in keyed.matrix] == ["pass", "pass"], keyed.failures


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_script": str(APPS / "input.json")}, "dbos: --model-script is not for its --app"),
        ({"input": "nope.json"}, "--input nope.json: FileNotFoundError"),
        ({"effects": ()}, "--app needs its effects"),
        ({"variant": "idempotent"}, "--variant is the bundled agent's"),
    ],
)
def test_bad_app_options_are_one_line(changes: dict[str, str], message: str) -> None:
    with pytest.raises(TargetError, match=message) as caught:
        _options("place_order", **changes)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "given", ['{"args": [1], "extra": 2}', '{"args": {"a": 1}}', '"order-1001"', "[1"]
)
def test_an_input_of_the_wrong_shape_is_one_line(tmp_path: Path, given: str) -> None:
    path = tmp_path / "input.json"
    path.write_text(given, encoding="utf-8")
    with pytest.raises(TargetError, match=r"^dbos: --input .*(expected|JSONDecodeError)"):
        _options("place_order", input=str(path))


def test_the_bundled_workflow_takes_no_effects() -> None:
    with pytest.raises(TargetError, match="need --app"):
        app_spec(get_target("dbos"), AppArgs(effects=("charge",)))


@pytest.mark.parametrize(
    ("app", "effect", "message"),
    [
        ("orders.py:charge", "charge", "'charge' is not a @DBOS.workflow() function"),
        ("orders.py:collect_payment", "charge", "'collect_payment' is not a @DBOS.workflow()"),
        ("orders.py:place_order", "refund", "--effect refund: durable_sim_app has no attribute"),
        ("broken.py:main", "charge", "importing it raised ZeroDivisionError"),
    ],
)
def test_an_app_dbos_cannot_run_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, app: str, effect: str, message: str
) -> None:
    (tmp_path / "broken.py").write_text("RATE = 1 / 0\n", encoding="utf-8")
    where = APPS if app.startswith("orders") else tmp_path
    argv = ["target", "sweep", "dbos", "--app", str(where / app), "--effect", effect]
    argv += ["--input", str(APPS / "input.json"), "--out", str(tmp_path / "out"), "--quiet"]
    status = main(argv)
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert message in err
