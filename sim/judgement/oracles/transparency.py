"""I9, transparency: when every interruption was recoverable, the outcome of every request equals
the fault-free run's, except for those a crash legitimately moved (a timed abort or abandon that
landed on another run, queued inputs regrouped, a reject-mode input met another run).

It leaves interruptions of ``unsafe`` or ``manual`` calls and reconciliations, whose outcome may
differ (I1 bounds their effects), and crashes the store mode does not promise to survive (I12).
"""

from __future__ import annotations

from typing import Any

from durable.events import InputSettled, TaskCreated, TaskSettled, ToolInterrupted
from durable.state import InvariantViolation, State, new_state, reduce
from sim.judgement.oracles.facts import Facts, within_promise
from sim.judgement.violation import Violation
from sim.run.runner import RunResult
from sim.world.scenario import ACTION_STEP_BASE


def check_transparency(result: RunResult, reference: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    if not result.trace.settled or not within_promise(result):
        return []
    interrupted_policies = {
        r.event.policy for r in result.durable.records if isinstance(r.event, ToolInterrupted)
    }
    if interrupted_policies & {"unsafe", "manual"}:
        return []
    if any(i.reconciliation for i in facts.state.intents.values()):
        return []
    if result.outcome == reference.outcome:
        return []
    # A client abort happens at a virtual time; a crash moves the runs (the lease wait, the
    # recovery) relative to it, so the abort may land on another run than in the fault-free
    # world. The outcomes it may legitimately change are exactly those of the submissions it
    # settled as aborted in one world and not the other; every other outcome must still match.
    moved = _aborted(result) ^ _aborted(reference)
    # Likewise inputs sent at virtual times: a crash's lease wait can hold them until they are
    # queued together, and queued inputs go to one run -- a legitimately different context.
    # Exactly the submissions answered by a run with another set of inputs are excused.
    # And when a moved action changed the conversation itself (an aborted input withdrawn in
    # one world only), every later request carries another history: a submission whose
    # answering run sent the model other user messages than in the fault-free run is excused.
    moved |= _regrouped(result, facts.state, reference)
    # A reject-mode input is refused or accepted by the timing of the run it meets; a crash
    # moves the runs, so whether it was rejected may legitimately differ from the reference.
    moved |= {
        rid
        for rid in reference.outcome.keys() | result.outcome.keys()
        if (reference.outcome.get(rid) or {}).get("status") == "rejected"
        or (result.outcome.get(rid) or {}).get("status") == "rejected"
    }
    diff = [
        rid
        for rid in reference.outcome
        if result.outcome.get(rid) != reference.outcome[rid] and rid not in moved
    ]
    if not diff and set(result.outcome) == set(reference.outcome):
        return []
    rid = diff[0] if diff else "?"
    return [
        Violation(
            "I9",
            "every interruption was recoverable, yet the outcome differs from the fault-free run",
            (f"request {rid}",),
            expected=str(reference.outcome.get(rid))[:200],
            actual=str(result.outcome.get(rid))[:200],
        )
    ]


def _run_groups(state: State) -> dict[str, frozenset[str]]:
    """Each request id -> the request ids of every input of the run that answered it."""
    rid_of = {s.id: s.request_id for s in state.submissions.values() if s.request_id}
    out: dict[str, frozenset[str]] = {}
    for run in state.runs.values():
        group = frozenset(rid_of[i] for i in run.inputs if i in rid_of)
        for rid in group:
            out[rid] = group
    return out


def _regrouped(result: RunResult, state: State, reference: RunResult) -> set[str]:
    """Request ids answered by a run whose inputs, or whose requests' user messages, differ
    from those of the fault-free run."""
    try:
        expected_state = reduce(
            new_state(reference.scenario.conversation_id), reference.durable.records
        )
    except InvariantViolation:
        return set()
    return _differing(_run_groups(state), _run_groups(expected_state)) | _differing(
        _contexts(result, state), _contexts(reference, expected_state)
    )


def _differing(actual: dict[str, Any], expected: dict[str, Any]) -> set[str]:
    """The keys whose values differ (or that only one side has)."""
    return {key for key in actual.keys() | expected.keys() if actual.get(key) != expected.get(key)}


def _contexts(run: RunResult, state: State) -> dict[str, tuple[str, ...]]:
    """Each request id -> the user messages of the last model request of the run that
    answered it (what the model was shown)."""
    run_of_task = {task.id: task.run_id for task in state.tasks.values()}
    last: dict[str, tuple[str, ...]] = {}
    for call in run.outside.model_calls:
        run_id = run_of_task.get(call.task_id)
        if run_id is not None:
            last[run_id] = call.user_contents
    return {
        sub.request_id: last[sub.run_id]
        for sub in state.submissions.values()
        if sub.request_id and sub.run_id in last
    }


def _aborted(run: RunResult) -> set[str]:
    """Request ids settled as aborted (abandoned) by a client abort (abandon) the client really
    sent. None of a kind when the log holds more such commits than the client sent (a runtime
    that aborts on its own, or re-applies an abort after recovery, gets no excuse)."""
    out: set[str] = set()
    for kind, reason in (("abort", "aborted"), ("abandon", "abandoned")):
        sent = sum(
            1
            for n, action in enumerate(run.scenario.actions)
            if action.kind == kind and ACTION_STEP_BASE + n in run.outside.client.actions_done
        )
        if not sent:
            continue
        if len(_stop_commits(run, reason)) > sent:
            continue
        out |= {rid for rid, outcome in run.outcome.items() if outcome["reason"] == reason}
    return out


def _stop_commits(run: RunResult, reason: str) -> set[str]:
    """The commits in which the runtime acted on an abort (``aborted``) or an abandonment
    (``abandoned``): each settles inputs with that reason or starts a compensation -- except the
    commit that ends a compensation, which belongs to the abandonment that started it."""
    started = {
        r.batch: r.event.task_id
        for r in run.durable.records
        if isinstance(r.event, TaskCreated) and r.event.kind == "compensation"
    }
    compensations = set(started.values())
    ending = {
        r.batch
        for r in run.durable.records
        if isinstance(r.event, TaskSettled) and r.event.task_id in compensations
    }
    settling = {
        r.batch
        for r in run.durable.records
        if isinstance(r.event, InputSettled) and r.event.reason == reason
    }
    if reason == "abandoned":
        settling |= set(started)
    return settling - ending
