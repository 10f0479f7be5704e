"""The pydantic-ai target on Prefect durable execution (``--durability prefect``): the payment
agent with pydantic-ai's ``PrefectDurability`` in a Prefect flow, a local Prefect API served
inside each child on the point's SQLite database, killed for real and restarted the way
``prefect flow-run retry`` restarts a flow run (the same flow run, so cached task results
replay).

The known duplicate must be found: a tool's effect lands before Prefect persists the tool
task's result, so a kill in between re-runs the tool on the retry -- with the same tool call id,
the model request replayed from its persisted result -- and the run's history shows one charge.
Once the tool's result is persisted the retry replays it (the report that on Prefect tool
results never replay does not reproduce with this pydantic-ai). Keyed by the flow run's name and
the tool call id, the same points sweep clean. Each child imports and starts Prefect's API,
so even the fixed variant's check is in the slow tier. Skipped, with the reason, where
pydantic-ai's prefect extra is not installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from targetkit import applied_rows
from testkit import needs

from sim.targets.host import Crash
from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import replay_line, sweep_target
from sim.world.faults import When

pytestmark = [
    needs("prefect", reason="needs pydantic-ai's prefect extra: pydantic-ai-slim[prefect]"),
    needs(
        "pydantic_ai.durable_exec.prefect",
        reason="needs pydantic-ai's prefect extra: pydantic-ai-slim[prefect]",
    ),
]

CHARGE = "effect:payments.charge#"
SECOND_REQUEST = "model.request#2"
TIMEOUT_S = 300.0  # a child imports and starts Prefect's API: slow on a loaded machine


def _charge_then_next_request(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the charge's effect (the tool task's result not yet persisted), and just
    before the second model request (the charge's result persisted): chosen by label."""
    charge = next(i for i, label in enumerate(labels) if label.startswith(CHARGE))
    second = labels.index(SECOND_REQUEST)
    return [(charge, "after"), (second, "before")]


@pytest.mark.slow
def test_a_retried_flow_run_calls_the_tool_whose_result_was_not_persisted_again() -> None:
    result = sweep_target(
        get_target("pydantic-ai"),
        TargetOptions(durability="prefect"),
        choose=_charge_then_next_request,
        timeout_s=TIMEOUT_S,
    )
    # The charge lands, the kill comes before its task result is persisted: charged twice.
    # Once the result is persisted, the retry replays it: the tool is not called again.
    assert [c["verdict"] for c in result.matrix] == ["safety", "pass"]
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"]
    applied = applied_rows(failure.witness)
    assert [("by p1" in applied[0]), ("by p2" in applied[1])] == [True, True]
    # One tool call: the retry got the model's response back from Prefect's cache.
    assert "call=call_p1_1 " in applied[0] and "call=call_p1_1 " in applied[1]
    charge = failure.schedule.split(":")[0]
    assert failure.repro == (
        f"durable-sim target replay pydantic-ai --durability prefect --schedule {charge}:after"
    )


@pytest.mark.slow
def test_effects_keyed_by_flow_run_name_and_tool_call_id_sweep_clean() -> None:
    result = sweep_target(
        get_target("pydantic-ai"),
        TargetOptions(durability="prefect", variant="idempotent"),
        choose=lambda labels: _charge_then_next_request(labels)[:1],
        timeout_s=TIMEOUT_S,
    )
    assert result.schedules == 1
    assert result.verdicts["pass"] == 1, [f.explanation for f in result.failures]


def _options(**given: Any) -> TargetOptions:
    return check_options(get_target("pydantic-ai"), TargetOptions(**given))


def test_prefect_takes_its_defaults_and_its_two_restarts() -> None:
    options = _options(durability="prefect")
    assert (options.variant, options.resume, options.saver) == ("as_is", "recovery", "sqlite")
    assert _options(durability="prefect", variant="idempotent", resume="rerun").resume == "rerun"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"durability": "prefect", "variant": "step"}, "prefect takes --variant as_is|idempotent"),
        ({"durability": "prefect", "variant": "child_workflow"}, "as_is|idempotent"),
        ({"durability": "agent", "resume": "rerun"}, "rerun needs --durability prefect"),
        ({"resume": "rerun"}, "rerun needs --durability prefect"),
        ({"variant": "child_workflow"}, "child_workflow needs --durability capability"),
        ({"durability": "agent", "variant": "child_workflow"}, "needs --durability capability"),
        ({"durability": "prefect", "app": parse_app("t", AppArgs(app="x:make"))}, "runs on DBOS"),
    ],
)
def test_options_prefect_cannot_run_are_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(TargetError, match=message):
        _options(**given)


def test_the_replay_line_names_the_durability_and_a_rerun() -> None:
    target = get_target("pydantic-ai")
    options = _options(durability="prefect", resume="rerun")
    line = replay_line(target, options, Crash(3, When.AFTER, f"{CHARGE}call_p1_1"))
    expected = "pydantic-ai --durability prefect --resume rerun --schedule 3:after"
    assert line == f"durable-sim target replay {expected}"


def test_the_target_module_never_imports_prefect() -> None:
    code = (
        "import sys; from sim.targets.registry import get_target; "
        "t = get_target('pydantic-ai'); t.missing(); "
        "assert 'prefect' not in sys.modules, 'prefect imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_point_without_a_prefect_database_has_no_state(tmp_path: Path) -> None:
    state = get_target("pydantic-ai").read_state(tmp_path, _options(durability="prefect"))
    assert not state.exists and not state.finished
