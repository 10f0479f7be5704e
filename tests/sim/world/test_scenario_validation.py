"""Bad scenario files: every one ends in a one-line ``ScenarioError`` naming the file and the
problem, from ``load_scenario`` and from the command line (exit 2, one line on stderr, never a
traceback), instead of a parser's ValueError, RecursionError or MemoryError, or a sweep whose
liveness failures only say "unsettled"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError
from testkit import REPO
from tiers import tiered

from durable.events import ReconciliationRequested
from sim.explore.sweep import base_schedule
from sim.run.runner import run_scenario
from sim.world.scenario import (
    EDIT_OPERATIONS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INT_DIGITS,
    SCENARIO_DIR,
    VERIFIABLE_OPERATIONS,
    Operation,
    Scenario,
    ScenarioError,
    bundled_names,
    load_scenario,
    load_scenario_file,
)

CORPUS = REPO / "tests" / "corpus"
CLI_TIMEOUT_S = 120
UNVERIFIABLE = sorted(set(get_args(Operation)) - VERIFIABLE_OPERATIONS)
ARGUMENTS: dict[str, dict[str, Any]] = {
    "workspace.read": {"path": "notes.txt"},
    "workspace.append_line": {"path": "notes.txt", "line": "done"},
    "workspace.replace": {"path": "notes.txt", "old": "start", "new": "done"},
    "workspace.check": {"path": "notes.txt", "expect": "start"},
    "payments.charge": {"amount": 30},
    "outbox.send": {"to": "ann@example.com", "subject": "update"},
    "counter.increment": {},
}
# read_edit_answer's arguments object sits 7 containers deep: document, script, script[0],
# turn, calls, call, arguments.
ARGUMENTS_DEPTH = 7


def scenario_doc(**changes: Any) -> dict[str, Any]:
    """A valid scenario document (bundled ``read_edit_answer``) with ``changes`` applied."""
    doc: dict[str, Any] = json.loads((SCENARIO_DIR / "read_edit_answer.json").read_text())
    doc.update(changes)
    return doc


def one_tool_doc(operation: str, policy: str, **changes: Any) -> dict[str, Any]:
    """One tool call of ``operation`` under ``policy``, then an answer."""
    return scenario_doc(
        name="one_tool",
        tools=[{"name": "act", "operation": operation, "policy": policy}],
        files={"notes.txt": "start"},
        script=[
            [{"calls": [{"tool": "act", "arguments": ARGUMENTS[operation]}]}, {"answer": "ok"}]
        ],
        **changes,
    )


def _with_verifier(mode: str, *, policy: str = "verify_then_continue") -> dict[str, Any]:
    """A verifiable edit whose verifier is made to answer ``unknown`` or fail (no operator)."""
    doc = one_tool_doc("workspace.append_line", policy)
    doc["tools"][0]["verifier"] = mode
    return doc


def with_nested_argument(levels: int) -> str:
    """``read_edit_answer`` whose first call has an argument of ``levels`` nested lists."""
    doc = scenario_doc()
    doc["script"][0][0]["calls"][0]["arguments"]["nested"] = "@@"
    return json.dumps(doc).replace('"@@"', "[" * levels + "1" + "]" * levels)


def write(tmp_path: Path, text: str | bytes, name: str = "bad.json") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def writing(doc: dict[str, Any]) -> Callable[[Path], Path]:
    """A ``Bad.make`` that writes ``doc`` as JSON: built now, so a comprehension's variable is
    read at its own iteration, not at the last."""
    return lambda tmp: write(tmp, json.dumps(doc))


@dataclass(frozen=True)
class Bad:
    """A bad input: ``make`` writes it under ``tmp_path`` (or names a real path) and returns its
    path; ``says`` is what the one-line message must say about it."""

    id: str
    make: Callable[[Path], Path]
    says: str


def _dev_zero(tmp_path: Path) -> Path:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero on this system")
    return Path("/dev/zero")


def _fifo(tmp_path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    path = tmp_path / "pipe.json"
    os.mkfifo(path)  # nobody writes to it: opening it for reading must not block
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.json"
    path.mkdir()
    return path


def _too_large(tmp_path: Path) -> Path:
    """A valid scenario padded with whitespace to one byte over the cap."""
    text = json.dumps(scenario_doc())
    return write(tmp_path, text + " " * (MAX_FILE_BYTES + 1 - len(text)))


BAD_FILES = [
    Bad(
        "5000-digit-integer",
        lambda tmp: write(tmp, '{"name": ' + "7" * 5000 + "}"),
        f"unusable number: an integer has 5000 digits (at most {MAX_INT_DIGITS})",
    ),
    Bad(
        "100000-deep-array",
        lambda tmp: write(tmp, "[" * 100_000 + "]" * 100_000),
        f"nested more than {MAX_DEPTH} levels deep",
    ),
    Bad(
        "100000-deep-object",
        lambda tmp: write(tmp, '{"a": ' * 100_000 + "1" + "}" * 100_000),
        f"nested more than {MAX_DEPTH} levels deep",
    ),
    # Parses and validates (pydantic takes any depth of ``Any``), but the runtime cannot
    # serialise an event holding it: the run would never settle.
    Bad(
        "500-deep-tool-argument",
        lambda tmp: write(tmp, with_nested_argument(500)),
        f"nested more than {MAX_DEPTH} levels deep",
    ),
    Bad("dev-zero", _dev_zero, "not a regular file (a character device)"),
    Bad("named-pipe", _fifo, "not a regular file (a named pipe)"),
    Bad("directory", _directory, "not a regular file (a directory)"),
    Bad("over-1-MiB", _too_large, f"larger than the {MAX_FILE_BYTES}-byte (1 MiB) cap"),
    Bad("not-utf8", lambda tmp: write(tmp, b'{"name": "\xff"}'), "not UTF-8 text"),
    Bad("not-json", lambda tmp: write(tmp, '{"name": '), "not valid JSON (line 1: "),
    Bad("nan", lambda tmp: write(tmp, '{"name": NaN}'), "NaN is not a JSON number"),
    Bad("float-overflow", lambda tmp: write(tmp, '{"x": 1e400}'), "1e400 is out of range"),
    Bad("missing", lambda tmp: tmp / "nope.json", "No such file or directory"),
]

BAD_SCENARIOS = [
    *(
        Bad(
            f"verify_then_continue-on-{operation}",
            writing(one_tool_doc(operation, "verify_then_continue")),
            f"tool 'act' has the verify_then_continue policy but its operation {operation} has "
            "no verifier, and the scenario has no operator: after a crash its call would wait "
            "for manual reconciliation forever; bind it to an operation with a verifier "
            f"({', '.join(sorted(VERIFIABLE_OPERATIONS))}) or add an operator",
        )
        for operation in UNVERIFIABLE
    ),
    Bad(
        "manual-without-operator",
        lambda tmp: write(tmp, json.dumps(one_tool_doc("payments.charge", "manual"))),
        "tool 'act' has the manual policy and the scenario has no operator: after a crash its "
        "call would wait for manual reconciliation forever; add an operator",
    ),
    *(
        Bad(
            f"verifier-{mode}-without-operator",
            writing(_with_verifier(mode)),
            f"tool 'act' has a verifier that always {says}, and the scenario has no operator: "
            "after a crash its call would wait for manual reconciliation forever; add an operator",
        )
        for mode, says in (("unknown", "answers unknown"), ("fails", "fails"))
    ),
    Bad(
        "unknown-inbox-mode",
        lambda tmp: write(
            tmp,
            json.dumps(
                scenario_doc(
                    inputs=[{"content": "Fix it", "request_id": "r1", "mode": "interrupt"}]
                )
            ),
        ),
        "invalid scenario at inputs.0.mode: Input should be 'follow_up', 'steer' or 'reject'",
    ),
    Bad(
        "verifier-mode-on-another-policy",
        lambda tmp: write(tmp, json.dumps(_with_verifier("fails", policy="idempotent"))),
        "verifier 'fails' needs the verify_then_continue policy",
    ),
]

ALL_BAD = [pytest.param(bad, id=bad.id) for bad in BAD_FILES + BAD_SCENARIOS]


@pytest.mark.parametrize("bad", ALL_BAD)
def test_load_scenario_refuses_with_one_line(bad: Bad, tmp_path: Path) -> None:
    path = bad.make(tmp_path)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(str(path))
    message = str(raised.value)
    assert "\n" not in message
    assert str(path) in message
    assert bad.says in message


# The command line's path through each bad input is one process each: the fast tier starts two
# (a bad file, a bad scenario); the loader's refusals above cover every input in-process.
@pytest.mark.parametrize(
    "bad",
    tiered(
        BAD_FILES + BAD_SCENARIOS,
        fast=["not-json", "manual-without-operator"],
        key=lambda bad: bad.id,
    ),
    ids=lambda bad: bad.id,
)
def test_cli_run_refuses_with_one_line_and_exit_2(bad: Bad, tmp_path: Path) -> None:
    path = bad.make(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "sim", "run", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"durable-sim: {path}: ") or line.startswith(
        f"durable-sim: cannot read scenario file {path}: "
    )
    assert bad.says in line


# -- where the limits are --------------------------------------------------------------------------


def test_every_bundled_scenario_and_corpus_case_loads() -> None:
    names = bundled_names()
    assert len(names) == 32
    for name in names:
        assert load_scenario(name).name == name
    cases = sorted(CORPUS.glob("*.json"))
    assert cases
    for path in cases:
        load_scenario_file(path)


def test_nesting_up_to_the_limit_loads_and_runs(tmp_path: Path) -> None:
    """The depth cap refuses nothing the runtime can handle: an argument nested to the limit
    loads and its run settles; one level more is refused."""
    levels = MAX_DEPTH - ARGUMENTS_DEPTH
    scenario = load_scenario_file(write(tmp_path, with_nested_argument(levels), "deep.json"))
    assert run_scenario(scenario, seed=0, store="file").trace.settled
    deeper = write(tmp_path, with_nested_argument(levels + 1), "deeper.json")
    with pytest.raises(ScenarioError, match="nested more than"):
        load_scenario_file(deeper)


def test_size_up_to_the_cap_loads(tmp_path: Path) -> None:
    text = json.dumps(scenario_doc())
    path = write(tmp_path, text + " " * (MAX_FILE_BYTES - len(text)))
    assert path.stat().st_size == MAX_FILE_BYTES
    assert load_scenario_file(path).name == "read_edit_answer"


def test_integers_up_to_the_digit_limit_load(tmp_path: Path) -> None:
    doc = scenario_doc()
    doc["script"][0][0]["calls"][0]["arguments"]["big"] = "@@"
    text = json.dumps(doc).replace('"@@"', "-" + "9" * MAX_INT_DIGITS)
    scenario = load_scenario_file(write(tmp_path, text))
    assert scenario.script[0][0].calls[0].arguments["big"] == -int("9" * MAX_INT_DIGITS)


def test_message_is_one_printable_line_whatever_the_file_holds(tmp_path: Path) -> None:
    """A key with a newline and an escape sequence, and a 400,000-character tool name, still give
    one printable, bounded line."""
    path = write(tmp_path, json.dumps(scenario_doc(files={"a\nb\x1b[31m": 5})))
    with pytest.raises(ScenarioError) as raised:
        load_scenario_file(path)
    assert str(raised.value) == (
        f"{path}: invalid scenario at files.a\\nb\\x1b[31m: Input should be a valid string "
        "(1 errors)"
    )
    doc = scenario_doc()
    doc["script"][0][0]["calls"][0]["tool"] = "x\n" * 200_000
    with pytest.raises(ScenarioError) as raised:
        load_scenario_file(write(tmp_path, json.dumps(doc), "long.json"))
    message = str(raised.value)
    assert message.isprintable() and len(message) <= 1000
    assert "calls undefined tool 'x\\nx\\n" in message


# -- which policies need an operator ---------------------------------------------------------------


@pytest.mark.parametrize("operation", sorted(VERIFIABLE_OPERATIONS))
def test_verify_then_continue_on_a_verifiable_operation_needs_no_operator(operation: str) -> None:
    scenario = Scenario.model_validate(one_tool_doc(operation, "verify_then_continue"))
    assert scenario.operator is None


@pytest.mark.parametrize("policy", ["manual", "verify_then_continue"])
@pytest.mark.parametrize("operation", UNVERIFIABLE)
def test_an_operator_makes_reconciliation_policies_valid(operation: str, policy: str) -> None:
    doc = one_tool_doc(operation, policy, operator={"decision": "check_ledger"})
    assert Scenario.model_validate(doc).operator is not None


@pytest.mark.parametrize("policy", ["replay_safe", "idempotent", "unsafe"])
def test_self_settling_policies_need_no_operator(policy: str) -> None:
    for operation in get_args(Operation):
        if operation in EDIT_OPERATIONS:
            continue  # a file edit takes verify_then_continue only (the next test)
        assert Scenario.model_validate(one_tool_doc(operation, policy)).operator is None


@pytest.mark.parametrize("policy", ["replay_safe", "idempotent", "unsafe", "manual"])
@pytest.mark.parametrize("operation", sorted(EDIT_OPERATIONS))
def test_a_file_edit_needs_verify_then_continue(operation: str, policy: str) -> None:
    """The planned hashes of a file edit are what its verifier compares after a crash: any
    other policy would record them for nothing (``durable.tools.ToolSpec`` refuses it too)."""
    with pytest.raises(ValueError, match="needs the verify_then_continue policy"):
        Scenario.model_validate(one_tool_doc(operation, policy, operator={}))


def test_a_required_criterion_needs_a_tool_that_checks_it() -> None:
    doc = one_tool_doc("workspace.check", "replay_safe", required_criteria=["tests pass"])
    with pytest.raises(ValueError, match="required criterion 'tests pass' is checked by no tool"):
        Scenario.model_validate(doc)
    doc["tools"][0]["validates"] = "tests pass"
    assert Scenario.model_validate(doc).required_criteria == ["tests pass"]


@pytest.mark.parametrize("mode", ["unknown", "fails"])
def test_a_verifier_that_cannot_tell_sends_the_call_to_the_operator(mode: str) -> None:
    """Crash right after a verifiable edit landed: a verifier that answers ``unknown`` or fails
    does not guess; the call waits for the operator, who checks the ledger."""
    doc = _with_verifier(mode) | {
        "operator": {"decision": "check_ledger", "delay_s": 1},
        "base_crash": {"label_prefix": "tool.effect:", "when": "after"},
    }
    scenario = Scenario.model_validate(doc)
    result = run_scenario(
        scenario, seed=0, store="file", schedule=base_schedule(scenario, seed=0, store="file")
    )
    assert result.trace.settled
    events = {r.event.type: r.event for r in result.durable.records}
    requested = events["reconciliation_requested"]
    assert isinstance(requested, ReconciliationRequested)
    reason = requested.reason
    expected = "verifier failed: ToolError" if mode == "fails" else "cannot be verified"
    assert reason.startswith("verifier could not tell: ") and expected in reason
    sources = [r.event.source for r in result.durable.records if r.event.type == "tool_result"]
    assert sources == ["operator"]
    assert len([e for e in result.outside.ledger if e.applied]) == 1


@pytest.mark.parametrize("operation", get_args(Operation))
def test_validation_agrees_with_what_recovery_does(operation: str, tmp_path: Path) -> None:
    """The rule the loader enforces, checked against the simulator itself: crash right after a
    ``verify_then_continue`` call's effect with no operator (validation bypassed). The run
    settles on the verifier's answer exactly for the operations the loader calls verifiable;
    every other one waits for reconciliation forever (the I7 failure the loader now prevents)."""
    doc = one_tool_doc(
        operation,
        "verify_then_continue",
        operator={"decision": "check_ledger"},
        base_crash={"label_prefix": "tool.effect:", "when": "after"},
        liveness_bound_s=600,
    )
    scenario = Scenario.model_validate(doc).model_copy(update={"operator": None})
    schedule = base_schedule(scenario, seed=0, store="file")
    result = run_scenario(scenario, seed=0, store="file", schedule=schedule)
    assert [c.label for c in result.trace.crashes] == [f"tool.effect:{operation}#call-1"]
    sources = [r.event.source for r in result.durable.records if r.event.type == "tool_result"]
    if operation in VERIFIABLE_OPERATIONS:
        assert (result.trace.settled, sources) == (True, ["verified"])
    else:
        assert (result.trace.settled, sources) == (False, [])
        path = write(tmp_path, json.dumps(doc | {"operator": None}))
        with pytest.raises(ScenarioError, match=f"operation {operation} has no verifier"):
            load_scenario_file(path)


def test_only_an_operation_with_an_undo_may_be_compensable() -> None:
    base = {
        "name": "undo",
        "description": "d",
        "inputs": [{"content": "x", "request_id": "r"}],
        "script": [[{"answer": "ok"}]],
    }
    tool = {"name": "edit", "operation": "workspace.append_line", "compensate": True}
    assert Scenario.model_validate({**base, "tools": [tool]}).tools[0].compensate
    send = {"name": "send", "operation": "outbox.send", "compensate": True}
    with pytest.raises(ValidationError, match=r"outbox\.send has no compensating action"):
        Scenario.model_validate({**base, "tools": [send]})


# -- sub-agents ----------------------------------------------------------------------------------


def delegate_doc(policy: str = "replay_safe", **changes: Any) -> dict[str, Any]:
    """The bundled ``delegate_to_subagent`` with its delegating tool under ``policy``."""
    doc: dict[str, Any] = json.loads((SCENARIO_DIR / "delegate_to_subagent.json").read_text())
    doc["tools"][0]["policy"] = policy
    doc.update(changes)
    return doc


@pytest.mark.parametrize("policy", ["unsafe", "manual", "verify_then_continue"])
def test_a_delegating_tool_must_re_run_its_call(policy: str) -> None:
    """Only a re-run of the call resumes its child after a crash: any other policy would leave
    the child's run unsettled for ever."""
    with pytest.raises(ValidationError, match="policy must be replay_safe or idempotent"):
        Scenario.model_validate(delegate_doc(policy, operator={"decision": "check_ledger"}))
    assert Scenario.model_validate(delegate_doc("idempotent")).delegates()


def test_a_sub_script_key_may_not_be_a_client_input() -> None:
    doc = delegate_doc()
    task = next(iter(doc["sub_script"]))
    doc["inputs"] = [{"content": task, "request_id": "r1"}]
    with pytest.raises(ValidationError, match="is also a client input"):
        Scenario.model_validate(doc)


def test_a_sub_script_calls_only_defined_tools() -> None:
    doc = delegate_doc()
    task = next(iter(doc["sub_script"]))
    doc["sub_script"][task][0]["calls"][0]["tool"] = "missing"
    with pytest.raises(ValidationError, match="calls undefined tool 'missing'"):
        Scenario.model_validate(doc)
