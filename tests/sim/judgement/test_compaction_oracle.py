"""I19 and I11 on compaction: an interrupted unsafe tool changes the conversation, so the turns
compact other prefixes (more summarisation requests than the fault-free run) -- legitimate, and
judged as such; a summary request sent twice, or a request that does not start with its pinned
summary, is not."""

from __future__ import annotations

import dataclasses

from sim.judgement.oracles import _compacted, check_compaction, check_model_calls
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When
from sim.world.model import ModelCall
from sim.world.scenario import load_scenario


def _runs() -> tuple[RunResult, RunResult]:
    scenario = load_scenario("compaction_mid_conversation")
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


def test_a_crash_that_moves_the_compactions_is_not_a_model_call_violation() -> None:
    reference, crashed = _runs()
    assert _compacted(crashed) != _compacted(reference)  # the interrupted edit's longer result
    pinned = sum(1 for c in crashed.trace.crashes if c.pinned_request)
    assert (
        len(crashed.outside.model_calls) > len(reference.outside.model_calls) + pinned
    )  # I11's plain bound
    assert check_model_calls(crashed, reference) == []
    assert check_compaction(crashed) == []


def test_a_summary_request_sent_twice_is_an_i19_violation() -> None:
    reference, _ = _runs()
    summarise = next(
        c for c in reference.outside.model_calls if _is_compaction(reference, c.task_id)
    )
    twice = _with_calls(reference, [*reference.outside.model_calls, summarise])
    (violation,) = check_compaction(twice)
    assert violation.invariant == "I19" and "2 times" in violation.explanation


def test_a_request_without_its_pinned_summary_is_an_i19_violation() -> None:
    reference, _ = _runs()
    calls = list(reference.outside.model_calls)
    last = calls[-1]
    assert last.head_digest  # the final request starts with the latest summary
    calls[-1] = dataclasses.replace(last, head_digest="")
    (violation,) = check_compaction(_with_calls(reference, calls))
    assert violation.invariant == "I19" and "summary its pinned window" in violation.explanation


def _with_calls(result: RunResult, calls: list[ModelCall]) -> RunResult:
    """``result`` with another model call log (``result`` itself unchanged)."""
    outside = dataclasses.replace(result.outside, model_calls=calls)
    return dataclasses.replace(result, outside=outside)


def _is_compaction(result: RunResult, task_id: str) -> bool:
    return any(
        r.event.type == "compaction_started" and r.event.task_id == task_id
        for r in result.durable.records
    )
