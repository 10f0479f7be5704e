"""The target oracles on hand-built points (no target library needed): each finding fires on the
rows that prove it and stays quiet on the fault-free shape, and bad input is one line."""

from __future__ import annotations

from dataclasses import replace
from importlib.machinery import ModuleSpec

import pytest

from durable.tools import POLICIES as DURABLE_POLICIES
from sim.outputs.cli.main import main
from sim.targets.host import Crash, PointRun
from sim.targets.judge import judge_point
from sim.targets.kit.landing import CALLER_NOTE, effect_results
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.ledger import LedgerRow
from sim.targets.protocol import RECOVERY_GUARANTEES, TargetError, TargetState, TargetTool
from sim.targets.registry import target_names
from sim.targets.shapes import TraceRow
from sim.targets.sweep import parse_point
from sim.world.faults import When

TOOLS = (TargetTool("charge_card", "payments", "exactly_once"),)
ANSWER = "done"


def _row(n: int, process: str, call_id: str, *, applied: bool = True) -> LedgerRow:
    note = "" if applied else "deduplicated"
    return LedgerRow(
        n, "payments", "charge", "charge_card", call_id, None, process, "42 EUR", applied, note
    )


def _state(results: list[str], *, exists: bool = True, finished: bool = True) -> TargetState:
    history = ["human: pay", "ai: calls charge_card", "tool charge_card: ok", f"ai: {ANSWER}"]
    return TargetState(
        exists=exists,
        finished=finished,
        inputs=["pay"] if exists else [],
        answer=ANSWER if finished else None,
        results={"charge_card": results} if results else {},
        calls={"charge_card": results} if results else {},
        history=history if finished else history[:2],
    )


def _reference() -> PointRun:
    return PointRun(None, ledger=[_row(1, "p1", "call_p1_1")], state=_state(["call_p1_1"]))


def _crashed(
    ledger: list[LedgerRow], state: TargetState, action: str, label: str = "effect#1"
) -> PointRun:
    return PointRun(
        Crash(6, When.AFTER, label),
        crashes=[{"t": "crash", "label": label, "when": "after", "p": "p1"}],
        actions={"p2": action},
        processes=2,
        ledger=ledger,
        state=state,
    )


def test_a_resumed_duplicate_is_i1_with_the_ledger_rows_and_h1() -> None:
    run = _crashed(
        [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p1_1")], _state(["call_p1_1"]), "resume"
    )
    verdict = judge_point(run, _reference(), TOOLS)
    assert verdict.verdict == "safety"
    assert [v.invariant for v in verdict.violations] == ["I1", "H1"]
    witness = verdict.violations[0].witness
    assert witness[0].startswith("ledger#1 payments.charge") and "by p1" in witness[0]
    assert witness[1].startswith("ledger#2 payments.charge") and "by p2" in witness[1]
    assert "crash: after effect#1 (boundary 6) killed p1" in witness
    assert "1 charge_card result(s), the ledger 2" in verdict.violations[1].explanation


def test_a_deduplicated_rerun_passes_and_policies_bound_the_right_side() -> None:
    deduped = [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p1_1", applied=False)]
    run = _crashed(deduped, _state(["call_p1_1"]), "resume")
    assert judge_point(run, _reference(), TOOLS).verdict == "pass"
    twice = [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p1_1")]
    run = _crashed(twice, _state(["call_p1_1", "call_p1_1"]), "resume")
    at_least = (TargetTool("charge_card", "payments", "at_least_once"),)
    # Two results recorded for two effects: nothing hidden, and "at least once" allows two...
    assert judge_point(run, _reference(), at_least).violations[:1] == []
    # ...but the history then differs from the fault-free run's (a duplicated message).
    at_most = (TargetTool("charge_card", "payments", "at_most_once"),)
    assert [v.invariant for v in judge_point(run, _reference(), at_most).violations] == ["I1"]


def test_a_recovery_policy_is_held_to_the_guarantee_it_promises() -> None:
    """``--effect charge=idempotent`` (the reference runtime's word): a re-run that the service
    deduplicates passes, one it applies again is I1, named by the word the user declared."""
    words = AppArgs(
        app="app:main", effects=("charge_card=idempotent,send=unsafe,poll=replay_safe",)
    )
    tools = parse_app("python", words).tools()
    assert [(t.policy, t.declared) for t in tools] == [
        ("exactly_once", "idempotent"),
        ("at_most_once", "unsafe"),
        ("at_least_once", "replay_safe"),
    ]
    keyed = (replace(tools[0], service="payments"),)
    deduped = [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p1_1", applied=False)]
    run = _crashed(deduped, _state(["call_p1_1"]), "resume")
    assert judge_point(run, _reference(), keyed).verdict == "pass"
    twice = [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p1_1")]
    run = _crashed(twice, _state(["call_p1_1"]), "resume")
    first = judge_point(run, _reference(), keyed).violations[0]
    assert first.invariant == "I1"
    assert "charge_card is declared idempotent (exactly_once)" in first.explanation
    assert set(RECOVERY_GUARANTEES) == set(DURABLE_POLICIES)


def test_a_restart_from_scratch_after_effects_is_progress_lost() -> None:
    ledger = [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p2_1")]
    run = _crashed(ledger, _state(["call_p2_1"]), "start")
    invariants = [v.invariant for v in judge_point(run, _reference(), TOOLS).violations]
    assert invariants == ["I1", "H1", "P1"]
    # Started over with nothing applied before the kill: harmless, no finding.
    run = _crashed([_row(1, "p2", "call_p2_1")], _state(["call_p2_1"]), "start")
    assert judge_point(run, _reference(), TOOLS).verdict == "pass"


def test_an_unfinished_run_is_liveness_and_a_lost_input_is_i5() -> None:
    run = _crashed([], _state([], exists=False, finished=False), "none")
    verdict = judge_point(run, _reference(), TOOLS)
    # The charge never happened either: exactly once is broken the other way too.
    assert [v.invariant for v in verdict.violations] == ["I1", "I5", "I7"]
    assert verdict.verdict == "safety"


def test_a_harness_error_is_an_error_verdict() -> None:
    run = _crashed([], _state([]), "none")
    run.error = "child p2 did not finish within 60 s (killed)"
    verdict = judge_point(run, _reference(), TOOLS)
    assert verdict.verdict == "error"
    assert "did not finish" in verdict.violations[0].explanation


@pytest.mark.parametrize("text", ["7", "7:during", "x:after", "7:after:power", ""])
def test_a_bad_schedule_is_refused(text: str) -> None:
    with pytest.raises(TargetError, match=r"INDEX:before\|after"):
        parse_point(text)


def test_parse_point_accepts_the_process_kind() -> None:
    assert parse_point("7:after") == (7, "after")
    assert parse_point("12:before:process") == (12, "before")


def test_cli_refuses_an_unknown_target_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["target", "sweep", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    known = ", ".join(target_names())
    assert err == [f"durable-sim: unknown target 'nope' (known: {known})"]


def test_cli_says_how_to_install_a_missing_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def without_langgraph(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name.split(".")[0] == "langgraph" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_langgraph)
    assert main(["target", "sweep", "langgraph", "--durability", "sync"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "pip install 'durable-sim[langgraph]'" in err[0]


def test_cli_says_how_to_install_the_pydantic_ai_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def without_pydantic_ai(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name.split(".")[0] == "pydantic_ai" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_pydantic_ai)
    assert main(["target", "sweep", "pydantic-ai"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "durable-sim: the pydantic-ai target needs pydantic_ai, which is not installed: "
        "pip install 'durable-sim[pydantic-ai]'"
    ]


def test_h1_on_an_app_judges_only_effects_a_tool_called() -> None:
    """An app's effect maps to the results of the framework tools that called it; one called
    from outside any tool has no results the history could record, so H1 leaves it alone."""
    rows: list[TraceRow] = [
        {"t": "note", "p": "p1", "what": CALLER_NOTE, "effect": "charge_card", "tool": "pay"},
        {"t": "note", "p": "p2", "what": CALLER_NOTE, "effect": "charge_card", "tool": "pay"},
    ]
    results, judged = effect_results(rows, {"pay": ["call_p1_1"], "lookup": ["call_p1_2"]})
    assert results == {"charge_card": ["call_p1_1"]} and judged == ["charge_card"]
    twice = [_row(1, "p1", "call_p1_1"), _row(2, "p2", "call_p1_1")]
    run = _crashed(twice, _state(["call_p1_1"]), "resume")
    run.state.results, run.state.hidden_judged = results, judged
    assert "H1" in [v.invariant for v in judge_point(run, _reference(), TOOLS).violations]
    run.state.hidden_judged = []  # no tool called it
    assert "H1" not in [v.invariant for v in judge_point(run, _reference(), TOOLS).violations]
