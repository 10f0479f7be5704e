"""I20, sub-agents: one child per delegating call. Every child conversation in the store belongs
to a delegating call, under the id derived from the call; it reduces and accepted one input,
under the request id derived from the call; an executed delegating call's result is its child's
answer.

The child's own calls are I1's and I6's (``effects`` judges them with the parent's, through
``child_states``).
"""

from __future__ import annotations

from durable.events import InputAccepted
from durable.state import Intent, InvariantViolation, State, new_state, reduce
from sim.judgement.oracles.facts import row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult
from sim.world.scenario import DELEGATE


def delegating_tools(result: RunResult) -> set[str]:
    """The scenario's sub-agent tools (``agent.delegate``) by name."""
    return {t.name for t in result.scenario.tools if t.operation == DELEGATE}


def child_states(result: RunResult) -> dict[str, State | None]:
    """``reduce`` of each child conversation's final log (None: it does not reduce)."""
    out: dict[str, State | None] = {}
    for child, records in sorted(result.child_records.items()):
        try:
            out[child] = reduce(new_state(child), records)
        except InvariantViolation:
            out[child] = None
    return out


def _i20(explanation: str, witness: tuple[str, ...], expected: str, actual: str) -> Violation:
    return Violation("I20", explanation, witness, expected=expected, actual=actual)


def check_subagents(result: RunResult, state: State) -> list[Violation]:
    """I20: one child per delegating call. Every child conversation in the store is the child of
    a delegating call of the conversation, under the id derived from that call (written out here,
    not taken from the runtime: docs/runtime.md, "Sub-agents"); its log reduces and accepted exactly
    one input, under the request id derived from the call; and a delegating call recorded as
    executed has the child's answer as its result."""
    conversation = result.scenario.conversation_id
    delegating = delegating_tools(result)
    owners = {
        f"{conversation}.sub.{i.call_id}": i for i in state.intents.values() if i.tool in delegating
    }
    children = child_states(result)
    for child, child_state in children.items():
        intent = owners.get(child)
        if intent is None:
            derived = ", ".join(sorted(owners)) or "none"
            return [_i20(f"child conversation {child} has no delegating call", (), derived, child)]
        if child_state is None:
            return [_i20(f"child conversation {child}'s log does not reduce", (), "a log", "")]
        accepted = [r for r in result.child_records[child] if isinstance(r.event, InputAccepted)]
        rids = [str(r.event.request_id) for r in accepted if isinstance(r.event, InputAccepted)]
        if rids != [f"{intent.call_id}:sub"]:
            return [
                _i20(
                    f"call {intent.call_id}'s child {child} accepted {len(rids)} input(s)",
                    tuple(row(r) for r in accepted[:3]),
                    f"one input, request {intent.call_id}:sub",
                    ", ".join(rids) or "none",
                )
            ]
    return _results_are_answers(state, owners, children)


def _results_are_answers(
    state: State, owners: dict[str, Intent], children: dict[str, State | None]
) -> list[Violation]:
    """A delegating call executed without error returns its child's answer, word for word."""
    for child, intent in sorted(owners.items()):
        result = state.tool_results.get(intent.call_id)
        if result is None or result.is_error or result.source != "executed":
            continue
        child_state = children.get(child)
        answers = [s.answer for s in child_state.submissions.values()] if child_state else []
        if answers != [result.output]:
            return [
                _i20(
                    f"call {intent.call_id}'s result is not its child's answer",
                    (f"child {child}",),
                    f"{answers[0] if answers else '(no child)'}"[:200],
                    result.output[:200],
                )
            ]
    return []
