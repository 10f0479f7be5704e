"""I20 on sub-agents, and I1/I6 over a child's own calls: a recovered delegation that found its
child passes; a child no delegating call owns, a result that is not the child's answer, a child
call's effect applied twice, or one the child's log has no intent for, does not."""

from __future__ import annotations

import dataclasses

from durable.state import State
from sim.judgement.oracles import (
    _facts,
    check,
    check_effects,
    check_results,
    check_subagents,
    reduce_log,
)
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When
from sim.world.scenario import load_scenario

CHILD = "c1.sub.call-1"


def _runs() -> tuple[RunResult, RunResult]:
    """The fault-free run, and one crashed right after the child's edit (its result lost)."""
    scenario = load_scenario("delegate_to_subagent")
    reference = run_scenario(scenario, seed=0, store="file")
    (edit,) = [
        b for b in reference.trace.boundaries if b.label.startswith("tool.effect:workspace.app")
    ]
    crashed = run_scenario(
        scenario,
        seed=0,
        store="file",
        schedule=Schedule.of(CrashPoint(edit.index, When.AFTER, CrashKind.PROCESS)),
    )
    return reference, crashed


def _state(result: RunResult) -> State:
    state = reduce_log(result).state
    assert state is not None
    return state


def test_a_recovered_delegation_finds_its_child_and_passes() -> None:
    reference, crashed = _runs()
    assert list(crashed.durable.child_records) == [CHILD]
    accepted = [r for r in crashed.durable.child_records[CHILD] if r.event.type == "input_accepted"]
    assert len(accepted) == 1
    assert crashed.trace.processes == 2 and crashed.outcome == reference.outcome
    assert check(crashed, reference) == []


def test_a_child_no_delegating_call_owns_is_an_i20_violation() -> None:
    reference, _ = _runs()
    records = reference.durable.child_records[CHILD]
    children = {CHILD: records, "c1.sub.call-9": records}
    stray = dataclasses.replace(
        reference, durable=dataclasses.replace(reference.durable, child_records=children)
    )
    (violation,) = check_subagents(stray, _state(stray))
    assert violation.invariant == "I20" and "has no delegating call" in violation.explanation


def test_a_result_that_is_not_the_childs_answer_is_an_i20_violation() -> None:
    reference, _ = _runs()
    state = _state(reference)
    result = state.tool_results["call-1"]
    state.tool_results["call-1"] = result.model_copy(update={"output": "made up"})
    (violation,) = check_subagents(reference, state)
    assert violation.invariant == "I20" and "not its child's answer" in violation.explanation


def test_a_child_call_applied_twice_is_an_i1_violation() -> None:
    reference, _ = _runs()
    (edit,) = [e for e in reference.outside.ledger if e.op == "append_line"]
    ledger = [*reference.outside.ledger, edit]
    twice = dataclasses.replace(
        reference, outside=dataclasses.replace(reference.outside, ledger=ledger)
    )
    (violation,) = check_effects(twice, _facts(twice))
    assert violation.invariant == "I1" and edit.call_id in violation.explanation


def test_a_child_effect_without_its_childs_intent_is_an_i6_violation() -> None:
    reference, _ = _runs()
    without = dataclasses.replace(
        reference, durable=dataclasses.replace(reference.durable, child_commits={})
    )
    violations = check_results(without, _facts(without))
    assert {v.invariant for v in violations} == {"I6"}
    assert {e.call_id for e in reference.outside.ledger} <= {
        v.explanation.split()[2] for v in violations
    }
