"""The GitHub Action's logic (``action.yml`` at the repository root runs ``python -m
sim.outputs.action``): read the inputs the runner passes as ``INPUT_*`` variables, build the
``durable-sim`` command line, run it in this process (``sim.outputs.cli.main.main``), decide the
step's status by ``fail-on``, and leave on the job's page what it found -- annotations, the step
summary, the step's outputs (docs/ci-github-actions.md).

Why Python and not the YAML: the YAML of a composite action has no tests and no types, and a
shell step that splices inputs into a command line is one quoting mistake from running something
else. Here each input is checked (a bad one is one line and exit 2, as a bad option of the
command line is), the command line is a list, and the same entry point runs under the tests with
the environment a runner sets (tests/sim/outputs/test_action.py). The YAML only wires the inputs
to it, installs the project and uploads what it wrote.

What it reuses rather than re-implements: the annotations and the step summary are the campaign
command's (``sim.outputs.cli.campaign.annotate``, ``step_summary``; a campaign writes them itself,
given ``--github``), pointed for a sweep at the file and line of each failure in the SARIF log the
command wrote (``sim.outputs.report.sarif``: a scenario's file, an app's effect call site).

``fail-on`` maps the command's exit status (README, "Exit status") to the step's:

- ``safety``: the step fails (1) when a schedule broke a safety invariant; liveness and
  nondeterminism findings are annotated and reported but let it pass;
- ``any``: the step fails with the command's status on any finding;
- ``never``: findings never fail the step.

Whatever ``fail-on`` says, bad input (2), a harness error (5) and an interrupted run (130) fail
it: they are not findings, and a report that could not be made must not pass as a clean one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlsplit

from sim.errors import UsageError
from sim.judgement.oracles import worst_verdict
from sim.outputs.cli.campaign import _escape_data as escape_data
from sim.outputs.cli.campaign import annotate, step_summary
from sim.outputs.cli.common import EXIT
from sim.outputs.cli.main import main as durable_sim

#: The inputs the entry point reads, with the defaults ``action.yml`` declares for them (a test
#: checks the two agree). ``extras``, ``python-version`` and ``artifact`` are the YAML's own:
#: they install the project and name the uploaded report.
DEFAULTS: dict[str, str] = {
    "command": "sweep",
    "scenarios": "",
    "shard": "",
    "target": "python",
    "app": "",
    "effects": "",
    "input": "",
    "model-script": "",
    "points": "",
    "max-points": "",
    "args": "",
    "fail-on": "safety",
    "out": "durable-sim-report",
    "sarif": "true",
}
INPUTS = tuple(DEFAULTS)
#: The step's outputs, written to ``$GITHUB_OUTPUT`` (``_write_outputs``; action.yml's outputs).
OUTPUTS = ("exit-code", "verdict", "failures", "report", "sarif")
COMMANDS = ("sweep", "campaign", "target")
FAIL_ON = ("safety", "any", "never")
#: The inputs that only one command takes; given to another, they are a mistake, not ignored.
ONLY_FOR = {
    "shard": "campaign",
    "max-points": "campaign",
    "app": "target",
    "effects": "target",
    "input": "target",
    "model-script": "target",
    "points": "target",
}
#: The SARIF log's name in the report directory: written on every run (the annotations point
#: where it does); ``sarif: true`` uploads it to code scanning.
SARIF_NAME = "durable-sim.sarif"
FINDINGS = (EXIT["safety"], EXIT["liveness"], EXIT["nondeterminism"])
MAX_POINTS_PER_UNIT = 10_000_000  # as ``durable-sim campaign --points-per-unit``
TITLE = "durable-sim action"


@dataclass(frozen=True)
class Run:
    """What one step runs: the command line (after ``durable-sim``), where its report and SARIF
    log go, and how its status is judged."""

    command: str
    argv: list[str]
    out: Path
    sarif: Path
    upload_sarif: bool
    fail_on: str


def read_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """Each input from the environment: ``INPUT_FAIL-ON``, as a runner names an action's input,
    or ``INPUT_FAIL_ON``, as a composite step can spell it in ``env:``; else its default."""
    found: dict[str, str] = {}
    for name, default in DEFAULTS.items():
        runner = f"INPUT_{name.upper()}"
        value = env.get(runner, env.get(runner.replace("-", "_")))
        found[name] = default if value is None else value.strip()
    return found


def plan(inputs: Mapping[str, str]) -> Run:
    """The run the inputs ask for; a ``UsageError`` naming the input otherwise."""
    command = _choice(inputs, "command", COMMANDS)
    fail_on = _choice(inputs, "fail-on", FAIL_ON)
    sarif = _choice(inputs, "sarif", ("true", "false"), lower=True)
    for name, only in ONLY_FOR.items():
        if inputs[name] and command != only:
            raise UsageError(f"input {name} applies to command {only} only, not {command}")
    out = Path(inputs["out"] or DEFAULTS["out"])
    try:
        extra = shlex.split(inputs["args"])
    except ValueError as exc:
        raise UsageError(f"input args: {exc} in {inputs['args']!r}") from None
    argv = _words(command, inputs) + extra
    argv += ["--out", str(out), "--sarif", str(out / SARIF_NAME)]
    return Run(command, argv, out, out / SARIF_NAME, sarif == "true", fail_on)


def _choice(
    inputs: Mapping[str, str], name: str, allowed: tuple[str, ...], *, lower: bool = False
) -> str:
    value = inputs[name].lower() if lower else inputs[name]
    if value not in allowed:
        raise UsageError(f"input {name}: {inputs[name]!r} is not one of {', '.join(allowed)}")
    return value


def _words(command: str, inputs: Mapping[str, str]) -> list[str]:
    """The command's own words: its scenarios or target, and the options the inputs name."""
    scenarios = [s for s in re.split(r"[\s,]+", inputs["scenarios"]) if s]
    if command == "sweep":
        return ["sweep", *scenarios]
    if command == "campaign":
        words = ["campaign", *scenarios, "--github"]
        if inputs["shard"]:
            words += ["--shard", inputs["shard"]]
        if inputs["max-points"]:
            words += ["--points-per-unit", str(_count(inputs["max-points"]))]
        return words
    if scenarios:
        raise UsageError("input scenarios applies to commands sweep and campaign, not target")
    words = ["target", "sweep", inputs["target"] or DEFAULTS["target"]]
    for flag, name in (("--app", "app"), ("--input", "input"), ("--model-script", "model-script")):
        if inputs[name]:
            words += [flag, inputs[name]]
    # One --effect per line: a line's commas are the kit's own list (``charge,notify=...``).
    for line in inputs["effects"].splitlines():
        if line.strip():
            words += ["--effect", line.strip()]
    if inputs["points"]:
        words += ["--points", inputs["points"]]
    return words


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_POINTS_PER_UNIT:
        raise UsageError(f"input max-points: {text!r} is not a number of points, 1 or more")
    return int(text)


def main(env: Mapping[str, str] | None = None) -> int:
    """The step: plan, run, report, decide. Its status is the step's (see the module docstring)."""
    env = os.environ if env is None else env
    try:
        run = plan(read_inputs(env))
    except UsageError as exc:
        print(f"::error title={TITLE}::{escape_data(str(exc))}", file=sys.stderr)
        return EXIT["usage"]
    print(f"{TITLE}: durable-sim {shlex.join(run.argv)}", flush=True)
    for stale in (run.out / "results.json", run.sarif):  # a runner's workspace may be reused:
        with contextlib.suppress(OSError):  # what is read below is this run's, or nothing
            stale.unlink()
    status = durable_sim(run.argv)
    sys.stdout.flush()
    document = _results(run.out)
    sweeps = _sweeps(document)
    verdicts = _verdicts(document, status)
    if run.command != "campaign":  # a campaign writes its own (``--github``)
        _github_output(run, sweeps, document)
    step = step_status(status, verdicts, run.fail_on)
    lines = _explain(run, status, verdicts, step)
    _append(env.get("GITHUB_STEP_SUMMARY"), "\n".join(["", *lines, ""]))
    level = "error" if step != 0 else "notice"
    print(f"::{level} title={TITLE}::{escape_data(' '.join(lines))}", flush=True)
    _write_outputs(env.get("GITHUB_OUTPUT"), run, status, verdicts)
    return step


def step_status(status: int, verdicts: Mapping[str, int], fail_on: str) -> int:
    """The step's exit status: the command's, unless ``fail-on`` lets its findings pass."""
    if status not in FINDINGS:  # pass, bad input, a harness error, an interrupt
        return status
    if fail_on == "any":
        return status
    if fail_on == "safety" and (verdicts.get("safety", 0) or status == EXIT["safety"]):
        return EXIT["safety"]
    return EXIT["pass"]


def _results(out: Path) -> dict[str, Any] | None:
    """The report's results document, None where no report was written (bad input; a shard)."""
    try:
        document: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document


def _sweeps(document: dict[str, Any] | None) -> list[Any]:
    """The document's sweeps as the campaign's GitHub output reads them (name, store, ref,
    schedules, failures)."""
    if document is None:
        return []
    return [
        SimpleNamespace(
            name=one["name"],
            store=one["store"],
            ref=one["name"],
            schedules=one["schedules"],
            failures=[SimpleNamespace(**failure) for failure in one["failures"]],
        )
        for one in document["scenarios"]
    ]


def _verdicts(document: dict[str, Any] | None, status: int) -> dict[str, int]:
    """The verdict counts of the report, or, without one, what the exit status says."""
    if document is not None:
        return {k: int(v) for k, v in document["totals"]["verdicts"].items()}
    named = {code: verdict for verdict, code in EXIT.items()}
    return {named[status]: 1} if status in FINDINGS else {}


def _github_output(run: Run, sweeps: list[Any], document: dict[str, Any] | None) -> None:
    """A sweep's annotations, where its SARIF log points each failure, and its step summary:
    the campaign's own (``sim.outputs.cli.campaign``)."""
    if document is None:
        return
    places = _places(run.sarif)
    annotate(sweeps, locate=lambda one, f: places.get((one.name, one.store, f.schedule), ("", 0)))
    what = " ".join(run.argv[: 3 if run.command == "target" else 1])
    wall_s = float(document["totals"].get("wall_s", 0.0))
    step_summary(
        sweeps,
        document["totals"]["verdicts"],
        complete=True,
        shard=None,
        unit_s=wall_s,
        command=what,
    )


def _places(sarif: Path) -> dict[tuple[str, str, str], tuple[str, int]]:
    """Each result's file and line in the SARIF log, by scenario, store and schedule (a file
    outside the checkout by its path: an annotation names a path, not a URI)."""
    try:
        log = json.loads(sarif.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    places: dict[tuple[str, str, str], tuple[str, int]] = {}
    for result in log["runs"][0]["results"]:
        props = result["properties"]
        for location in result.get("locations", [])[:1]:
            physical = location["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            path = unquote(urlsplit(uri).path) if uri.startswith("file:") else uri
            key = (props["scenario"], props["store"], props["schedule"])
            places[key] = (path, int(physical["region"]["startLine"]))
    return places


def _explain(run: Run, status: int, verdicts: Mapping[str, int], step: int) -> list[str]:
    """What the step decided and why, in a line or two for the summary and an annotation."""
    named = {code: verdict for verdict, code in EXIT.items()}
    found = ", ".join(f"{v} {n}" for v, n in verdicts.items() if v != "pass" and n)
    said = f"durable-sim {run.command} exited {status} ({named.get(status, 'interrupted')})"
    if status in FINDINGS:
        result = "the step fails" if step else "the step passes"
        return [f"{said}: {found or 'findings'}; fail-on {run.fail_on}: {result}."]
    if status == EXIT["pass"]:
        return [f"{said}: every schedule passed."]
    return [f"{said}: the step fails whatever fail-on says (see the log)."]


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(text + "\n")


def _write_outputs(path: str | None, run: Run, status: int, verdicts: Mapping[str, int]) -> None:
    """The step's outputs (``action.yml``'s ``outputs``): the command's exit code, the worst
    verdict, the number of failing schedules, the report directory and, when it is to be
    uploaded, the SARIF log."""
    failures = sum(n for verdict, n in verdicts.items() if verdict != "pass")
    sarif = str(run.sarif) if run.upload_sarif and run.sarif.is_file() else ""
    named = {code: verdict for verdict, code in EXIT.items()}
    verdict = worst_verdict(dict(verdicts)) if verdicts else named.get(status, "interrupted")
    values = {
        "exit-code": status,
        "verdict": verdict,
        "failures": failures,
        "report": run.out,
        "sarif": sarif,
    }
    assert tuple(values) == OUTPUTS, "action.yml's outputs are OUTPUTS"
    _append(path, "\n".join(f"{name}={value}" for name, value in values.items()))


if __name__ == "__main__":
    sys.exit(main())
