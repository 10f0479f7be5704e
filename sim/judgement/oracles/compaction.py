"""I19, compaction: every applied summary is fresh -- its intent's prefix, unchanged, applied in the
intent's epoch, at a turn boundary, never after the compaction settled --, each intent's
summarisation request is sent once, and every request starts with the summary its pin captured.

The walk over the log rides on the shared reduction (``CompactionWatcher``, given to
``reduce_log``). Requests the log never pinned are I11's, and so are the other model calls of a
run whose compactions a crash moved (I11 does not count them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from durable.codec import canonical_json, sha256_hex
from durable.compaction import context_digest, summary_message
from durable.events import (
    CompactionApplied,
    CompactionSettled,
    CompactionStarted,
    EventRecord,
    ModelRequested,
)
from durable.state import State
from sim.judgement.oracles.facts import reduce_log, row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


@dataclass
class _Compactions:
    """What I19 tracks while walking the log: each intent (its record's epoch and event), the
    compactions applied or settled, and the summary message each pinned request must start
    with ("" for a request with no summary)."""

    started: dict[str, tuple[int, CompactionStarted]] = field(default_factory=dict)
    ended: dict[str, str] = field(default_factory=dict)  # compaction id -> applied/outcome
    summaries: dict[str, str] = field(default_factory=dict)  # applied id -> its head digest
    heads: dict[tuple[str, int], str] = field(default_factory=dict)  # (task, attempt) -> head


class CompactionWatcher:
    """I19's walk, on ``reduce_log``'s pass (``facts.Watcher``): judges each application on the
    state before it and, up to the first unfit one, records what later requests must see."""

    def __init__(self) -> None:
        self.seen = _Compactions()
        self.unfit: Violation | None = None  # the first unfit application, if any

    def before(self, state: State, record: EventRecord) -> None:
        event = record.event
        if self.unfit is None and isinstance(event, CompactionApplied):
            why = _unfit_summary(self.seen, state, record, event)
            if why:
                self.unfit = _i19(f"compaction {event.compaction_id} applied {why}", record)

    def after(self, state: State, record: EventRecord) -> None:
        if self.unfit is None:
            _see_compaction(self.seen, record)


def check_compaction(
    result: RunResult, watcher: CompactionWatcher | None = None
) -> list[Violation]:
    """I19: compaction applies fresh summaries only, at boundaries. Every applied summary covers
    exactly the prefix its intent named, unchanged since the intent, and was applied by the
    incarnation that wrote the intent (a crash or takeover in between makes it stale); only at
    a turn boundary (every other live task of its run a turn waiting in ``prepare``, nothing
    pinned, no call unanswered); a settled one is never applied; and every later request starts
    with the summary of the compaction applied when it was pinned, followed by the suffix.
    ``watcher`` is the one given to the run's ``reduce_log``; without it, a pass of its own."""
    if watcher is None:
        watcher = CompactionWatcher()
        reduce_log(result, watchers=[watcher])  # a log that does not reduce: I2 reports it
    if watcher.unfit is not None:
        return [watcher.unfit]
    seen = watcher.seen
    return _one_request_per_intent(result, seen) or _requests_see_their_window(result, seen)


def _i19(explanation: str, record: EventRecord) -> Violation:
    return Violation(
        "I19",
        explanation,
        (row(record),),
        expected="a fresh summary of its intent's prefix, applied at a turn boundary",
        actual=explanation,
    )


def _see_compaction(seen: _Compactions, record: EventRecord) -> None:
    event = record.event
    if isinstance(event, CompactionStarted):
        seen.started[event.compaction_id] = (record.epoch, event)
        seen.heads[(event.task_id, 1)] = _head(seen, event.window)
    elif isinstance(event, CompactionApplied):
        seen.ended[event.compaction_id] = "applied"
        head = summary_message(event.summary)
        seen.summaries[event.compaction_id] = sha256_hex(canonical_json(head))
    elif isinstance(event, CompactionSettled):
        seen.ended.setdefault(event.compaction_id, event.outcome)
    elif isinstance(event, ModelRequested):
        seen.heads[(event.task_id, event.attempt)] = _head(seen, event.window)


def _head(seen: _Compactions, window: str) -> str:
    return seen.summaries.get(window, "?") if window else ""


def _unfit_summary(
    seen: _Compactions, state: State, record: EventRecord, event: CompactionApplied
) -> str:
    """Why this application breaks I19 ("" if it does not), judged on the state before it."""
    intent = seen.started.get(event.compaction_id)
    if intent is None:
        return "without an intent"
    epoch, started = intent
    if event.compaction_id in seen.ended:
        return f"after it was already {seen.ended[event.compaction_id]}"
    if record.epoch != epoch:
        return f"in epoch {record.epoch}, its intent in epoch {epoch}: the summary is stale"
    if (event.through, event.prefix_digest) != (started.through, started.prefix_digest):
        return f"to messages ..{event.through}, its intent named ..{started.through}"
    if context_digest(state.context(started.through, started.window)) != started.prefix_digest:
        return f"after the prefix ..{started.through} changed since its intent"
    for task in state.tasks.values():
        if task.run_id != started.run_id or task.status == "terminal":
            continue
        if task.id == started.task_id:
            continue
        if task.kind != "generation" or task.phase != "prepare" or task.id in state.pinned:
            return f"while {task.id} ({task.kind}/{task.phase}) is live: not at a turn boundary"
    open_calls = [i.call_id for i in state.unresolved_intents()]
    if open_calls:
        return f"between tool call {open_calls[0]} and its result"
    return ""


def _one_request_per_intent(result: RunResult, seen: _Compactions) -> list[Violation]:
    """A compaction's summarisation request is sent once: its intent is settled stale, never
    re-sent, by a process that did not send it."""
    tasks = {started.task_id for _, started in seen.started.values()}
    sent = Counter(call.task_id for call in result.outside.model_calls if call.task_id in tasks)
    for task_id, count in sorted(sent.items()):
        if count > 1:
            return [
                Violation(
                    "I19",
                    f"compaction task {task_id} sent its summarisation request {count} times",
                    tuple(
                        f"model call at boundary {c.index} by {c.process}"
                        for c in result.outside.model_calls
                        if c.task_id == task_id
                    )[:4],
                    expected="one request per compaction intent",
                    actual=f"{count} requests",
                )
            ]
    return []


def _requests_see_their_window(result: RunResult, seen: _Compactions) -> list[Violation]:
    """Every model request starts with the summary its pin captured (none: no summary)."""
    for call in result.outside.model_calls:
        expected = seen.heads.get((call.task_id, call.attempt))
        if expected is None or not call.request_digest:
            continue  # a request the log never pinned (I11 judges it), or an unrecorded host
        if call.head_digest != expected:
            return [
                Violation(
                    "I19",
                    f"request {call.task_id} attempt {call.attempt} does not start with the "
                    "summary its pinned window names",
                    (f"model call at boundary {call.index} by {call.process}",),
                    expected=f"head {expected[:16] or '(no summary)'}",
                    actual=f"head {call.head_digest[:16] or '(no summary)'}",
                )
            ]
    return []
