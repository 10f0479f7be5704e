"""I18, agent state: on the raw log (``check_agent_log``), the mutation revision rises by one per
recorded edit, a validation carries the revision its call saw, and a run completes only with
every required criterion passing at the current revision; against the world
(``check_agent_effects``, within the store's promise only), a recorded change is an edit the
workspace applied once, the last one of a path is what the workspace holds, and a request
carries only a cursor the model declared resumable.

How often other workspace effects landed is I1's.
"""

from __future__ import annotations

from collections import Counter

from durable.events import FileChanged, ModelCompleted, RunStopped, ToolIntent, ValidationRecorded
from durable.tools import content_hash
from sim.judgement.oracles.facts import Facts, row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_agent_log(result: RunResult) -> list[Violation]:
    """I18 on the raw log: the mutation revision rises by exactly one per recorded file change
    (so one call's change, recorded once, bumps it once, whatever crashes came between); a
    validation carries the revision of the moment its call was committed (what it can have
    seen), never a later one; a run stops as ``completed`` only if every required criterion's
    latest validation at the then-current revision passed."""
    revision = 0
    seen_at: dict[str, int] = {}  # validation call -> revision at its intent
    latest: dict[tuple[str, int], bool] = {}  # (criterion, revision) -> last verdict
    required = result.scenario.required_criteria
    for record in result.durable.records:
        event = record.event
        if isinstance(event, FileChanged):
            if event.revision != revision + 1:
                return [
                    Violation(
                        "I18",
                        f"call {event.call_id} moved the mutation revision from {revision} to "
                        f"{event.revision}: one applied edit is one revision",
                        (row(record),),
                        expected=f"revision {revision + 1}",
                        actual=f"revision {event.revision}",
                    )
                ]
            revision = event.revision
        elif isinstance(event, ToolIntent) and event.validates is not None:
            seen_at[event.call_id] = revision
        elif isinstance(event, ValidationRecorded):
            if event.revision != seen_at.get(event.call_id):
                return [
                    Violation(
                        "I18",
                        f"validation {event.call_id} is recorded at revision {event.revision}, "
                        f"but its call was committed at revision {seen_at.get(event.call_id)}",
                        (row(record),),
                    )
                ]
            latest[(event.criterion, event.revision)] = event.passed
        elif isinstance(event, RunStopped) and event.reason == "completed":
            unmet = [c for c in required if not latest.get((c, revision), False)]
            if unmet:
                return [
                    Violation(
                        "I18",
                        f"run {event.run_id} completed without a passing validation of "
                        f"{unmet[0]!r} at revision {revision}",
                        (row(record),),
                        expected=f"{unmet[0]!r} passed at revision {revision}",
                        actual="no such validation",
                    )
                ]
    return []


def check_agent_effects(result: RunResult, facts: Facts) -> list[Violation]:
    """I18 against the world (only where the store promised the log survives): a recorded file
    change is an edit the workspace applied, an edit that succeeded is recorded, the final
    workspace holds the hash recorded for the last edit of each path (unless a write the log
    does not record as a change came after it), and every provider cursor a request carried
    was declared resumable by the model."""
    state = facts.state
    assert state is not None
    applied = Counter(e.call_id for e in result.outside.ledger if e.applied and e.op == "replace")
    recorded = {c.call_id for c in state.file_changes}
    for change in state.file_changes:
        if change.after_hash is not None and applied[change.call_id] != 1:
            return [
                Violation(
                    "I18",
                    f"call {change.call_id} is recorded as changing {change.path}, and the "
                    f"workspace applied it {applied[change.call_id]} times",
                    (f"file change at #{change.sequence}, revision {change.revision}",),
                )
            ]
    for call_id, intent in state.intents.items():
        outcome = state.tool_results.get(call_id)
        done = outcome is not None and not outcome.is_error and outcome.source != "operator"
        if intent.edit is not None and done and call_id not in recorded:
            return [
                Violation(
                    "I18",
                    f"edit {call_id} succeeded but no file change (no revision) was recorded",
                    (f"intent at #{intent.sequence}",),
                )
            ]
    return _final_hashes(result, facts) + _cursors_resumable(result)


def _final_hashes(result: RunResult, facts: Facts) -> list[Violation]:
    """I18: each changed path holds its last recorded after-hash, when the last applied write
    to the path is that change's call."""
    state = facts.state
    assert state is not None
    last_writer: dict[str, str] = {}
    for effect in result.outside.ledger:
        intent = state.intents.get(effect.call_id)
        writes = effect.service == "workspace" and effect.op in ("replace", "append_line")
        if effect.applied and writes and intent is not None:
            last_writer[str(intent.arguments.get("path", ""))] = effect.call_id
    for path, change in sorted(state.changed_files.items()):
        if change.after_hash is None or last_writer.get(path) != change.call_id:
            continue
        actual = content_hash(result.outside.files.get(path))
        if actual != change.after_hash:
            return [
                Violation(
                    "I18",
                    f"{path} does not hold the content recorded by its last edit {change.call_id}",
                    (f"file change at #{change.sequence}, revision {change.revision}",),
                    expected=change.after_hash[:16],
                    actual=actual[:16],
                )
            ]
    return []


def _cursors_resumable(result: RunResult) -> list[Violation]:
    """I18: a request carries a provider cursor only if a response in the log returned it as
    resumable."""
    resumable = {
        r.event.cursor
        for r in result.durable.records
        if isinstance(r.event, ModelCompleted) and r.event.cursor and r.event.resumable
    }
    for call in result.outside.model_calls:
        if call.cursor and call.cursor not in resumable:
            return [
                Violation(
                    "I18",
                    f"a request of {call.task_id} continued from cursor {call.cursor}, which the "
                    "model did not declare resumable",
                    (f"model call at boundary {call.index} by {call.process}",),
                    expected="the full request, without the cursor",
                    actual=f"cursor {call.cursor}",
                )
            ]
    return []
