"""The GitHub Action (``action.yml``, its logic in ``sim.outputs.action``), run as a runner runs
it: the environment a composite step gets (``GITHUB_*``, the ``INPUT_*`` its ``env:`` maps, a
step summary file and an output file), on a passing sweep, a failing target sweep of the python
target's demo under each ``fail-on``, a campaign, and bad inputs; and ``action.yml`` itself, read
as YAML: every input it declares is read by the entry point or used by one of its own steps, and
the worked workflow in docs/ci-github-actions.md gives it only inputs it declares."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from testkit import REPO

from sim.outputs import action

ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
#: The inputs the YAML uses itself, never the entry point: what to install and where the report
#: goes, each with the step that must use it.
YAML_ONLY = {
    "python-version": "actions/setup-python",
    "extras": "install durable-sim",
    "artifact": "actions/upload-artifact",
}
DEMO = ["sim.targets.python_app.demo_job:main", "charge"]


def env_name(name: str) -> str:
    """How the run step's ``env:`` passes an input: ``fail-on`` as ``INPUT_FAIL_ON``."""
    return "INPUT_" + name.upper().replace("-", "_")


def _steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = ACTION["runs"]["steps"]
    return steps


def _step(named: str) -> dict[str, Any]:
    """The step that uses the action ``named`` (any version) or has that name."""
    return next(
        s for s in _steps() if named in (s.get("uses", "").split("@")[0], s.get("name", ""))
    )


class Runner:
    """A runner's environment for one step: its files, and the step's stdout and stderr."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.summary = tmp / "step_summary.md"
        self.output = tmp / "github_output"
        self.out = tmp / "report"
        self.monkeypatch = monkeypatch
        monkeypatch.chdir(REPO)  # the job's checkout
        for name, value in {
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(REPO),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_OUTPUT": str(self.output),
        }.items():
            monkeypatch.setenv(name, value)
        for name in action.INPUTS:  # as the YAML's env: sets every input, defaults included
            monkeypatch.setenv(env_name(name), action.DEFAULTS[name])
        monkeypatch.setenv(env_name("out"), str(self.out))

    def run(self, capsys: pytest.CaptureFixture[str], **inputs: str) -> tuple[int, list[str]]:
        for name, value in inputs.items():
            self.monkeypatch.setenv(env_name(name.replace("_", "-")), value)
        status = action.main()
        captured = capsys.readouterr()
        return status, (captured.out + captured.err).splitlines()

    def outputs(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.output.read_text().splitlines())


def test_a_passing_sweep_passes_with_a_summary_a_notice_and_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = Runner(tmp_path, monkeypatch)
    runner.summary.write_text("an earlier step's summary\n")
    args = "--store file --crash process --quiet"
    status, lines = runner.run(capsys, scenarios="idempotent_payment", args=args)
    assert status == 0
    assert not [line for line in lines if line.startswith("::error")], lines
    assert "::notice title=durable-sim action::durable-sim sweep exited 0" in "\n".join(lines)
    summary = runner.summary.read_text()
    assert summary.startswith("an earlier step's summary\n## durable-sim sweep: 101 schedules")
    assert "No failures." in summary and "every schedule passed" in summary
    sarif = runner.out / action.SARIF_NAME
    assert {"results.json", "index.html", "report.md", "junit.xml", sarif.name} <= {
        p.name for p in runner.out.iterdir()
    }
    assert json.loads(sarif.read_text())["runs"][0]["results"] == []
    assert runner.outputs() == {
        "exit-code": "0",
        "verdict": "pass",
        "failures": "0",
        "report": str(runner.out),
        "sarif": str(sarif),
    }


@pytest.mark.parametrize(("fail_on", "step"), [("safety", 1), ("never", 0)])
def test_a_failing_target_sweep_is_annotated_at_the_charge_and_judged_by_fail_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fail_on: str,
    step: int,
) -> None:
    """The demo charges an order again after a kill right after its charge: I1, annotated at
    the app's ``charge(...)`` line; ``fail-on`` decides the step, the files are there either
    way (``sarif: false`` leaves the log in the report but names none to upload)."""
    runner = Runner(tmp_path, monkeypatch)
    sarif = "true" if fail_on == "safety" else "false"
    status, lines = runner.run(
        capsys,
        command="target",
        app=DEMO[0],
        effects=DEMO[1],
        points="0:after",
        args="--quiet",
        fail_on=fail_on,
        sarif=sarif,
    )
    assert status == step
    demo = REPO / "sim" / "targets" / "python_app" / "demo_job.py"
    call = 1 + demo.read_text().splitlines().index(
        "        charge(order_id, amount, idempotency_key=order_id if keyed else None)"
    )
    (error,) = [line for line in lines if line.startswith("::error file=")]
    assert error.startswith(f"::error file=sim/targets/python_app/demo_job.py,line={call},")
    assert "title=safety I1 python[files] 0%3Aafter%3Aprocess::" in error
    assert "repro: durable-sim target replay python --app " in error
    decided = f"fail-on {fail_on}: the step {'fails' if step else 'passes'}."
    verdict_line = [line for line in lines if line.startswith("::") and decided in line]
    assert len(verdict_line) == 1 and verdict_line[0].startswith("::error" if step else "::notice")
    summary = runner.summary.read_text()
    assert summary.startswith("## durable-sim target sweep python: 1 schedules")
    assert "| python | files | 1 | 1 |" in summary and decided in summary
    assert "--schedule 0:after`" in summary
    outputs = runner.outputs()
    assert (outputs["exit-code"], outputs["verdict"], outputs["failures"]) == ("1", "safety", "1")
    log = runner.out / action.SARIF_NAME
    assert outputs["sarif"] == (str(log) if sarif == "true" else "")
    assert len(json.loads(log.read_text())["runs"][0]["results"]) == 1


@pytest.mark.parametrize(
    ("status", "verdicts", "fail_on", "step"),
    [
        (1, {"safety": 2}, "safety", 1),
        (1, {"safety": 2}, "any", 1),
        (1, {"safety": 2}, "never", 0),
        (3, {"liveness": 1}, "safety", 0),
        (3, {"liveness": 1}, "any", 3),
        (4, {"nondeterminism": 1}, "never", 0),
        (0, {"pass": 5}, "any", 0),
        (5, {"error": 1, "safety": 1}, "never", 5),  # a harness error fails whatever fail-on
        (2, {}, "never", 2),  # bad input too
        (130, {}, "never", 130),  # and an interrupt
    ],
)
def test_fail_on_maps_the_commands_status_to_the_steps(
    status: int, verdicts: dict[str, int], fail_on: str, step: int
) -> None:
    assert action.step_status(status, verdicts, fail_on) == step


def test_a_campaign_writes_its_own_github_output_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A campaign's summary and annotations are the command's own (``--github``): the step adds
    its verdict line, not a second summary; ``max-points`` is ``--points-per-unit``."""
    runner = Runner(tmp_path, monkeypatch)
    status, lines = runner.run(
        capsys,
        command="campaign",
        scenarios="idempotent_payment",
        max_points="40",
        args="--store file --crash process --quiet --jobs 1",
    )
    assert status == 0
    assert "--points-per-unit 40" in lines[0] and "--github" in lines[0]
    summary = runner.summary.read_text()
    assert summary.count("## durable-sim") == 1 and summary.startswith("## durable-sim campaign:")
    assert "durable-sim campaign exited 0 (pass)" in summary
    plan = json.loads((runner.out / "plan.json").read_text())
    assert plan["config"]["split"]["points_per_unit"] == 40


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({"command": "deploy"}, "input command: 'deploy' is not one of sweep, campaign, target"),
        ({"fail_on": "sometimes"}, "input fail-on: 'sometimes' is not one of safety, any, never"),
        ({"sarif": "yes"}, "input sarif: 'yes' is not one of true, false"),
        ({"shard": "1/2"}, "input shard applies to command campaign only, not sweep"),
        ({"command": "campaign", "max_points": "many"}, "input max-points: 'many' is not a"),
        ({"command": "target", "scenarios": "x"}, "input scenarios applies to commands sweep"),
        ({"args": "--store 'file"}, "input args: No closing quotation"),
    ],
)
def test_a_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, str],
    says: str,
) -> None:
    runner = Runner(tmp_path, monkeypatch)
    status, lines = runner.run(capsys, **inputs)
    assert status == 2
    assert len(lines) == 1 and lines[0].startswith(f"::error title=durable-sim action::{says}")
    assert not runner.out.exists() and not runner.output.exists()  # nothing ran


def test_the_yaml_wires_every_input_to_the_entry_point_or_one_of_its_steps() -> None:
    assert ACTION["runs"]["using"] == "composite"
    declared = ACTION["inputs"]
    assert all(spec.get("description") for spec in declared.values())
    run = _step("run durable-sim")
    assert run["run"].strip() == "python3 -m sim.outputs.action" and run["id"] == "run"
    # The run step passes exactly the entry point's inputs, each under its INPUT_ name ...
    assert run["env"] == {env_name(n): f"${{{{ inputs.{n} }}}}" for n in action.INPUTS}
    # ... with the defaults the entry point falls back on.
    assert {n: str(declared[n]["default"]) for n in action.INPUTS} == action.DEFAULTS
    # Every other input is the YAML's own, used by the step it is for.
    assert set(declared) - set(action.INPUTS) == set(YAML_ONLY)
    for name, step in YAML_ONLY.items():
        assert f"inputs.{name}" in json.dumps(_step(step)), (name, step)
    install = _step("install durable-sim")
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert "--editable" in install["run"] and "$ACTION_PATH" in install["run"]
    upload = _step("actions/upload-artifact")
    assert "steps.run.outputs.report" in upload["with"]["path"] and "!cancelled()" in upload["if"]
    sarif = _step("github/codeql-action/upload-sarif")
    assert sarif["with"]["sarif_file"] == "${{ steps.run.outputs.sarif }}"
    assert "steps.run.outputs.sarif != ''" in sarif["if"]
    outputs = ACTION["outputs"]
    assert {n: o["value"] for n, o in outputs.items()} == {
        n: f"${{{{ steps.run.outputs.{n} }}}}" for n in action.OUTPUTS
    }


def test_the_worked_workflow_gives_the_action_only_inputs_it_declares() -> None:
    """docs/ci-github-actions.md's workflow runs ``uses: ./`` on a bundled scenario and on
    examples/orders_job: each use names declared inputs, and the files it names exist."""
    text = (REPO / "docs" / "ci-github-actions.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)]
    uses = [
        step
        for block in blocks
        for job in block.get("jobs", {}).values()
        for step in job.get("steps", [])
        if step.get("uses") == "./"
    ]
    assert len(uses) >= 2, "the worked workflow uses the action twice"
    for step in uses:
        assert set(step.get("with", {})) <= set(ACTION["inputs"]), step
    given = {key: str(value) for step in uses for key, value in step.get("with", {}).items()}
    assert given["command"] == "target" and Path(REPO, given["app"].split(":")[0]).is_file()
    scenarios = [str(s.get("with", {}).get("scenarios", "")) for s in uses]
    assert any((REPO / "sim" / "scenarios" / f"{name}.json").is_file() for name in scenarios)
