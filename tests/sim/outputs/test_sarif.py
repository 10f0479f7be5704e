"""``--sarif FILE`` (``sim.outputs.report.sarif``): a SARIF 2.1.0 log valid against the published
schema (tests/data/), a result per failing schedule under its invariant's rule, located at the
scenario file's line of its name -- a bundled scenario's and a user's file alike -- or, for a
user's app, at the line where the app calls the effect the failure is about (noted by the kit's
wrappers, ``sim.targets.kit.landing.app_site``); the same sweep, the same bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
from testkit import REPO

from sim.explore.mutants import mutant_named, planted
from sim.judgement.invariants import INVARIANTS
from sim.outputs.cli.main import main
from sim.outputs.report import sarif
from sim.targets.kit.effects import _wrapper
from sim.targets.kit.http import Router, _hook_requests
from sim.targets.kit.landing import SITE_NOTE, Landing
from sim.targets.kit.spec import EffectSpec, parse_http
from sim.world.scenario import SCENARIO_DIR

SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
#: A planted bug whose sweep of its own scenario fails at a few schedules, in half a second.
MUTANT = mutant_named("key-per-attempt")
SWEEP = ["--store", "file", "--crash", "process", "--quiet", "--jobs", "1"]
DEMO = REPO / "sim" / "targets" / "python_app" / "demo_job.py"


def valid(log: dict[str, Any]) -> dict[str, Any]:
    """``log``, after checking it against the SARIF 2.1.0 schema (every error listed)."""
    validator = jsonschema.Draft4Validator(SCHEMA)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert not errors, "\n".join(errors)
    return log


def _line(path: Path, text: str) -> int:
    """The 1-based line of ``path`` where ``text`` first occurs."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def _failing_sweep(tmp: Path, scenario: str, name: str) -> tuple[str, dict[str, Any]]:
    """Sweep ``scenario`` with the planted bug into ``tmp/name``: the SARIF text and the
    results document."""
    out = tmp / name
    with planted(MUTANT):
        status = main(["sweep", scenario, *SWEEP, "--out", str(out), "--sarif", f"{out}.sarif"])
    assert status == 1
    return Path(f"{out}.sarif").read_text(), json.loads((out / "results.json").read_text())


def test_a_failing_sweep_is_one_result_per_failure_at_the_scenarios_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # a CI job's checkout: bundled scenarios are relative to it
    text, document = _failing_sweep(tmp_path, MUTANT.scenario, "one")
    run = valid(json.loads(text))["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [record.code for record in INVARIANTS]
    for rule, record in zip(rules, INVARIANTS, strict=True):
        assert rule["shortDescription"]["text"] == record.title
        assert record.verifies in rule["help"]["text"] and record.leaves in rule["help"]["text"]
    failures = document["scenarios"][0]["failures"]
    assert len(run["results"]) == len(failures) > 1
    bundled = SCENARIO_DIR / f"{MUTANT.scenario}.json"
    name_line = _line(Path(str(bundled)), f'"name": "{MUTANT.scenario}"')
    for result, failure in zip(run["results"], failures, strict=True):
        assert result["ruleId"] == failure["invariant"] == rules[result["ruleIndex"]]["id"]
        message = result["message"]["text"]
        assert failure["schedule"] in message and f"replay: {failure['repro']}" in message
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"] == {
            "uri": os.path.relpath(str(bundled), REPO),
            "uriBaseId": "%SRCROOT%",
        }
        assert physical["region"] == {"startLine": name_line}
    again, _ = _failing_sweep(tmp_path, MUTANT.scenario, "two")
    assert again == text  # the same sweep, the same bytes: nothing of the run's time or place


def test_a_campaigns_log_is_the_sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A campaign (here one shard of one) writes the log the one-process sweep writes, byte for
    byte: its units' failures merged are the sweep's, and nothing of how they ran is in it."""
    monkeypatch.chdir(REPO)
    swept, _ = _failing_sweep(tmp_path, MUTANT.scenario, "sweep")
    out = tmp_path / "campaign"
    args = ["campaign", MUTANT.scenario, *SWEEP, "--shard", "1/1", "--out", str(out)]
    with planted(MUTANT):
        assert main([*args, "--sarif", str(out / "x.sarif")]) == 1
    assert (out / "x.sarif").read_text() == swept


def test_a_user_scenario_file_is_located_at_the_line_of_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario given by path: the path as given, at the line of its top-level name (not a
    tool's ``name``, which comes first in this file)."""
    doc = json.loads((Path(str(SCENARIO_DIR)) / f"{MUTANT.scenario}.json").read_text())
    moved = {"tools": doc.pop("tools"), **doc}
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "pay.json").write_text(json.dumps(moved, indent=2) + "\n")
    monkeypatch.chdir(tmp_path)
    text, _ = _failing_sweep(tmp_path, "mine/pay.json", "out")
    results = valid(json.loads(text))["runs"][0]["results"]
    name_line = _line(tmp_path / "mine" / "pay.json", f'"name": "{MUTANT.scenario}"')
    assert name_line > 3  # after the tools and their names
    places = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in results
    }
    assert places == {("mine/pay.json", name_line)}


def test_an_apps_failure_points_at_the_line_that_calls_the_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The python target's demo charges an order before recording it: a kill right after the
    charge charges it again (I1 on ``charge``), and the result is at the app's ``charge(...)``
    line, which the fault-free run's child noted and the sweep carried into its results."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "demo"
    app = ["--app", "sim.targets.python_app.demo_job:main", "--effect", "charge"]
    args = ["target", "sweep", "python", *app, "--points", "0:after", "--quiet"]
    assert main([*args, "--out", str(out), "--sarif", str(out / "x.sarif")]) == 1
    call = _line(DEMO, "charge(order_id, amount")
    outcome = json.loads((out / "results.json").read_text())["scenarios"][0]["reference_outcome"]
    assert outcome["effect_sites"] == {
        "charge": {"file": "sim/targets/python_app/demo_job.py", "line": call}
    }
    (result,) = valid(json.loads((out / "x.sarif").read_text()))["runs"][0]["results"]
    assert result["ruleId"] == "I1" and "--schedule 0:after" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "sim/targets/python_app/demo_job.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": call},
    }


def _app_sweep(explanation: str, invariant: str = "I1") -> SimpleNamespace:
    failure = SimpleNamespace(
        verdict="safety",
        invariant=invariant,
        invariants=[invariant],
        explanation=explanation,
        schedule="3:after:process",
        repro="durable-sim target replay python --schedule 3:after",
    )
    outcome = {
        "app": "sim.targets.python_app.demo_job:main",
        "effect_sites": {
            "charge": {"file": "app/pay.py", "line": 7},
            "payments:charge": {"file": "app/payments.py", "line": 9},
        },
    }
    return SimpleNamespace(
        name="python",
        store="files",
        ref="python",
        failures=[failure],
        reference=SimpleNamespace(outcome=outcome),
    )


@pytest.mark.parametrize(
    ("explanation", "invariant", "where"),
    [
        ("charge is declared exactly_once, but ...", "I1", ("app/pay.py", 7)),
        # The longest name that occurs: ``charge`` occurs in ``payments:charge`` too.
        ("payments:charge is declared exactly_once, but ...", "I1", ("app/payments.py", 9)),
        ("the runtime's history records 1 charge result(s)", "H1", ("app/pay.py", 7)),
        # No effect named ("charged" is not "charge"): the app's entry point.
        ("a process charged twice and kept no record", "P1", (str(DEMO), "def main(")),
        ("harness error: the child hung", "?", (str(DEMO), "def main(")),
    ],
)
def test_a_failure_is_placed_at_the_effect_it_names_else_at_the_entry_point(
    monkeypatch: pytest.MonkeyPatch, explanation: str, invariant: str, where: tuple[str, Any]
) -> None:
    monkeypatch.chdir(REPO)
    log = valid(sarif.sarif_log([_app_sweep(explanation, invariant)]))
    (result,) = log["runs"][0]["results"]
    physical = result["locations"][0]["physicalLocation"]
    file, line = where
    if isinstance(line, str):  # the entry point: its def line, relative to the checkout
        file, line = os.path.relpath(file, REPO), _line(Path(file), line)
    assert (physical["artifactLocation"]["uri"], physical["region"]["startLine"]) == (file, line)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    assert (result["ruleId"] == sarif.UNJUDGED) == (invariant == "?")


# -- where the kit notes a call site -------------------------------------------------------------


class _Boundaries:
    def __init__(self) -> None:
        self.notes: list[dict[str, Any]] = []

    def note(self, **fields: Any) -> None:
        self.notes.append(fields)


class _Ledger:
    def effect(self, boundaries: Any, **row: Any) -> bool:
        return True

    def rows(self) -> list[Any]:
        return []


def _landing() -> tuple[Landing, _Boundaries]:
    boundaries = _Boundaries()
    ctx = SimpleNamespace(boundaries=boundaries, ledger=_Ledger(), process="p1")
    return Landing(ctx), boundaries  # type: ignore[arg-type]  # the two parts land() uses


def _sites(boundaries: _Boundaries) -> list[tuple[str, str, int]]:
    return [(n["effect"], n["file"], n["line"]) for n in boundaries.notes if n["what"] == SITE_NOTE]


def test_the_site_is_the_apps_line_past_the_wrapper_and_a_library_that_called_it() -> None:
    """An effect called back by a library (``json`` calling its ``object_hook``): the site is
    the app's ``json.loads`` line, not the library's frame nor the wrapper's; noted once for
    the effect however often it is called."""
    landing, boundaries = _landing()
    spec = EffectSpec(module="", qualname="record", policy="exactly_once", declared="exactly_once")
    hook = _wrapper(landing, spec, lambda obj: obj, skip_self=False)
    json.loads('[{"a": 1}, {"b": 2}]', object_hook=hook)  # the app's call: two effects
    assert _sites(boundaries) == [("record", __file__, _line(Path(__file__), "object_hook=hook)"))]


def test_an_http_calls_site_is_the_apps_requests_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A declared HTTP call through ``requests``: past the kit's hook of the adapter and
    ``requests``' own frames, the site is the app's ``requests.post`` line."""
    import requests
    from requests.adapters import HTTPAdapter

    monkeypatch.setattr(HTTPAdapter, "send", HTTPAdapter.send)  # the hook is undone after
    landing, boundaries = _landing()
    effect = parse_http("python", "POST https://pay.example.com/v1/refunds")
    options = SimpleNamespace(http=(effect,), http_stub=None)  # the two fields Router reads
    _hook_requests(Router(landing, options))  # type: ignore[arg-type]  # options: see above
    answer = requests.post("https://pay.example.com/v1/refunds", json={"order": 1}, timeout=5)
    assert answer.status_code == 200
    assert _sites(boundaries) == [
        (effect.name, __file__, _line(Path(__file__), "answer = requests.post("))
    ]
