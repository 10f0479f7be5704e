"""The invariant registry (``sim.judgement.invariants``) is the one home of what each invariant
is: a violation's verdict comes from it, every code an oracle builds is in it and an unknown one
is refused at once, and the target judge's order and the reports' titles are read from it."""

from __future__ import annotations

import ast

import pytest
from testkit import REPO

from sim.judgement.invariants import (
    INVARIANTS,
    UnknownInvariant,
    invariant,
    target_order,
    title_of,
)
from sim.judgement.oracles import Violation, verdict_of
from sim.outputs.report.json_report import invariant_title


def test_a_violation_takes_its_verdict_from_the_registry() -> None:
    for record in INVARIANTS:
        assert Violation(record.code, "why").verdict == record.verdict
    assert invariant("I7").verdict == "liveness"
    assert invariant("I10").verdict == "nondeterminism"
    assert {r.code for r in INVARIANTS if r.verdict != "safety"} == {"I7", "I10"}
    assert verdict_of([Violation("I10", "a"), Violation("I7", "b")]) == "liveness"


def test_an_unknown_code_is_refused_when_a_violation_is_built() -> None:
    with pytest.raises(UnknownInvariant, match=r"'I99'.*registered: I0, I1"):
        Violation("I99", "a typo in an oracle")
    doc = Violation("I2", "why", ("row",)).to_json() | {"invariant": "X1"}
    with pytest.raises(UnknownInvariant):
        Violation.from_json(doc)
    with pytest.raises(UnknownInvariant):
        invariant("")


def _built_codes() -> dict[str, list[str]]:
    """Every code written as the first argument of a ``Violation(...)`` in ``sim/`` -> where."""
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "sim").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            code = node.args[0]
            if name == "Violation" and isinstance(code, ast.Constant):
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                found.setdefault(str(code.value), []).append(where)
    return found


def test_every_code_an_oracle_builds_is_registered() -> None:
    built = _built_codes()
    assert len(built) >= 20, sorted(built)  # the scan sees the oracles (it can fail)
    registered = {r.code for r in INVARIANTS}
    assert {code: where for code, where in built.items() if code not in registered} == {}
    assert registered - set(built) == set(), "registered, but no oracle reports it"


def test_the_catalogue_keeps_its_numbering_and_order() -> None:
    assert [r.code for r in INVARIANTS] == [f"I{n}" for n in range(24)] + ["H1", "P1"]
    for record in INVARIANTS:
        modules = {path.rsplit(".", 1)[0] for path in record.implemented_by}
        targets = {m for m in modules if m.startswith("sim.targets.")}
        runtime = modules - targets
        assert record.scope == {(True, False): "runtime", (False, True): "target"}.get(
            (bool(runtime), bool(targets)), "both"
        ), record.code
        assert not record.explains or invariant(record.explains).scope != "runtime"


def test_the_target_judge_lists_each_finding_after_the_one_it_explains() -> None:
    assert target_order() == ("I0", "I1", "H1", "P1", "I5", "I6", "I7")


def test_reports_show_the_registry_titles() -> None:
    assert invariant_title("I1") == f"I1 {title_of('I1')}" == "I1 effects match policy"
    assert invariant_title("H1") == "H1 runtime state hides a duplicate"
    assert invariant_title("E") == "E"  # a document from another version: shown as it is
