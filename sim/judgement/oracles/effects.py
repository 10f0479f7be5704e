"""I1 and I6, effects and results: per call, the ledger's applied effects match the tool's policy
(I1); each intent has one recorded result, a settled world answered every intent not waiting for
reconciliation, and no effect came before its intent was durable (I6) -- the conversation's
calls and, for I20, its sub-agents' children's calls alike.

Judged only within the store's promise (``check`` decides): a crash the mode does not promise
to survive may lose the log of a call and legitimately redo it (I12's suffix check). A delegating
call has no effect of its own (I20, ``subagents``); effects after a run stopped are I4's.
"""

from __future__ import annotations

from collections import Counter

from durable.events import CompensationIntent, ToolIntent, ToolResult
from durable.tools import compensation_call_id
from sim.judgement.oracles.facts import Facts, durable_child_commits, durable_commits
from sim.judgement.oracles.subagents import child_states, delegating_tools
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_effects(result: RunResult, facts: Facts) -> list[Violation]:
    """I1 for every call of the conversation and of its sub-agents' children (a child's calls
    obey their own policies). A delegating call has no effect of its own: I20 judges it."""
    assert facts.state is not None
    delegating = delegating_tools(result)
    states = [facts.state, *(s for s in child_states(result).values() if s is not None)]
    intents = [i for s in states for i in s.intents.values() if i.tool not in delegating]
    tool_results = {c: r for s in states for c, r in s.tool_results.items()}
    out: list[Violation] = []
    for intent in intents:
        effects = [e for e in result.outside.ledger if e.call_id == intent.call_id and e.applied]
        n = len(effects)
        tool_result = tool_results.get(intent.call_id)
        succeeded = (
            tool_result is not None
            and not tool_result.is_error
            and tool_result.source in ("executed", "verified")
        )
        bad = ""
        if intent.policy in ("idempotent", "verify_then_continue"):
            if n > 1:
                bad = f"{n} effects, policy {intent.policy} promises exactly once"
            elif succeeded and n == 0:
                bad = f"recorded as succeeded with no effect, policy {intent.policy}"
        elif intent.policy in ("unsafe", "manual"):
            if n > 1:
                bad = f"{n} effects, policy {intent.policy} promises at most once"
        elif succeeded and n == 0:
            bad = "recorded as executed with no effect, replay_safe promises at least once"
        if bad:
            out.append(
                Violation(
                    "I1",
                    f"call {intent.call_id} ({intent.tool}): {bad}",
                    tuple(str(e) for e in effects[:3]),
                    expected=_expected_effects(intent.policy),
                    actual=f"{n} effect(s)",
                )
            )
    return out


def _expected_effects(policy: str) -> str:
    return {
        "idempotent": "exactly 1 effect",
        "verify_then_continue": "exactly 1 effect",
        "unsafe": "at most 1 effect",
        "manual": "at most 1 effect",
        "replay_safe": "at least 1 effect",
    }[policy]


def check_results(result: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    out: list[Violation] = []
    counts = Counter(
        r.event.call_id for r in result.durable.records if isinstance(r.event, ToolResult)
    )
    for call_id, n in counts.items():
        if n > 1:
            out.append(Violation("I6", f"call {call_id} has {n} recorded results", ()))
    if result.trace.settled:
        for intent in facts.state.intents.values():
            if counts.get(intent.call_id, 0) == 0 and not intent.reconciliation:
                out.append(
                    Violation("I6", f"intent {intent.call_id} never got a result", (intent.tool,))
                )
    intent_index: dict[str, int] = {}
    for index, records in durable_commits(result) + durable_child_commits(result):
        for record in records:
            if isinstance(record.event, ToolIntent):
                intent_index.setdefault(record.event.call_id, index)
            elif isinstance(record.event, CompensationIntent):  # its effect's own call id
                intent_index.setdefault(compensation_call_id(record.event.call_id), index)
    for effect in result.outside.ledger:
        if not effect.applied:
            continue
        durable_at = intent_index.get(effect.call_id)
        if durable_at is None or durable_at > effect.boundary:
            out.append(
                Violation(
                    "I6",
                    f"effect of {effect.call_id} happened before its intent was durable",
                    (str(effect), f"intent committed at boundary {durable_at}"),
                    expected="intent commit boundary < effect boundary",
                    actual=f"intent at {durable_at}, effect at {effect.boundary}",
                )
            )
    return out
