"""I11, model calls: no more calls than the fault-free run plus one per crash or takeover that hit
a pinned request; a re-send is byte for byte the pinned request; a retry is sent when due.

The bound is not applied when a crash moved a steering input or changed which prefixes were
compacted (the runs then took other turns; I19 still bounds each compaction to one request);
it allows one call more per request a crash let a run pin before the client's abort stopped it.
Judged only within the store's promise (``check`` decides): lost commits legitimately redo calls.
"""

from __future__ import annotations

from durable.events import (
    CompactionApplied,
    InputAccepted,
    InputsSteered,
    ModelRequested,
    RunStarted,
    RunStopped,
    TaskCheckpoint,
)
from sim.judgement.violation import Violation
from sim.run.runner import RunResult
from sim.world.model import ModelCall


def check_model_calls(result: RunResult, reference: RunResult) -> list[Violation]:
    """I11: calls bounded by the fault-free count plus crashes that hit a pinned request; a
    retry sent exactly when due -- not before the deadline its checkpoint committed, not after
    it either (or after the recovery, if later): a resume must not reset the backoff."""
    return (
        _retries_sent_when_due(result)
        or _resends_are_the_pinned_request(result)
        or _calls_within_bound(result, reference)
    )


def _retries_sent_when_due(result: RunResult) -> list[Violation]:
    """I11's timing: a retry neither before its committed deadline nor later than due."""
    deadline: dict[tuple[str, int], float] = {}
    for record in result.durable.records:
        event = record.event
        if isinstance(event, TaskCheckpoint) and event.phase == "retry":
            key = (event.task_id, int(event.data["attempt"]))
            deadline[key] = float(event.data["until_s"])
    for call in result.outside.model_calls:
        until_s = deadline.get((call.task_id, call.attempt))
        if until_s is None:
            continue
        if call.time_s < until_s - 1e-9:
            return [
                Violation(
                    "I11",
                    "a retry was sent before the backoff deadline its checkpoint committed",
                    (f"{call.task_id} attempt {call.attempt} at {call.time_s:.3f}s",),
                    expected=f"not before {until_s:.3f}s",
                    actual=f"{call.time_s:.3f}s",
                )
            ]
        # ... and when it is due: at the deadline, or at once if the process that sends it
        # recovered later (a restart must not wait the whole backoff again). A paused process
        # wakes when its pause ends: not judged.
        recovered_s = result.trace.recovered_at_s.get(call.process)
        if recovered_s is None or call.process in result.leases.paused:
            continue
        due_s = max(until_s, recovered_s)
        if call.time_s > due_s + 1e-9:
            return [
                Violation(
                    "I11",
                    "a retry was sent later than due (its committed deadline, or its recovery)",
                    (
                        f"{call.task_id} attempt {call.attempt} at {call.time_s:.3f}s by "
                        f"{call.process}, recovered at {recovered_s:.3f}s",
                    ),
                    expected=f"at {due_s:.3f}s",
                    actual=f"{call.time_s:.3f}s",
                )
            ]
    return []


def _resends_are_the_pinned_request(result: RunResult) -> list[Violation]:
    """A re-send after a crash must be the pinned request itself: same model, options, messages."""
    sent: dict[tuple[str, int], ModelCall] = {}
    for call in result.outside.model_calls:
        first = sent.setdefault((call.task_id, call.attempt), call)
        if call.request_digest and first.request_digest != call.request_digest:
            return [
                Violation(
                    "I11",
                    "a request re-sent after a crash differs from the pinned request it re-sends",
                    (
                        f"{call.task_id} attempt {call.attempt}: first sent at boundary "
                        f"{first.index} by {first.process}, again at boundary {call.index} by "
                        f"{call.process}",
                    ),
                    expected=f"request sha256 {first.request_digest[:16]}",
                    actual=f"request sha256 {call.request_digest[:16]}",
                )
            ]
    return []


def _calls_within_bound(result: RunResult, reference: RunResult) -> list[Violation]:
    """No more calls than the fault-free run's plus one per interruption of a pinned request."""
    # A crash or a takeover (the old worker paused past its lease) that hit a pinned request may
    # each cost one re-sent request; a paused worker's own in-flight request was already sent.
    if _steered(result) != _steered(reference):
        # A crash moved a steering input to the other side of a post-tools boundary (it arrived
        # after the boundary, or the run settled first): the runs took other turns, legitimately.
        return []
    if _compacted(result) != _compacted(reference):
        # A crash changed what the conversation holds (an interrupted tool's result is another
        # text), so its turns compacted other prefixes: other summarisation requests and
        # refusals, legitimately. I19 still bounds each compaction to one request.
        return []
    allowed = (
        len(reference.outside.model_calls)
        + sum(1 for c in result.trace.crashes if c.pinned_request)
        + result.leases.handovers_with_pinned_request
        + _moved_abort_requests(result, reference)
    )
    actual = len(result.outside.model_calls)
    if actual <= allowed:
        return []
    return [
        Violation(
            "I11",
            "more model calls than the fault-free run plus crashes or takeovers that hit a pinned "
            "request",
            tuple(
                f"{c.task_id} attempt {c.attempt} at boundary {c.index}"
                for c in result.outside.model_calls[:4]
            ),
            expected=f"at most {allowed}",
            actual=str(actual),
        )
    ]


def _steered(run: RunResult) -> set[str]:
    """The request ids (or submission ids, for inputs without one) of the inputs placed into a
    running run at a post-tools boundary."""
    names: dict[str, str] = {}
    out: set[str] = set()
    for record in run.durable.records:
        event = record.event
        if isinstance(event, InputAccepted):
            names[event.submission_id] = event.request_id or event.submission_id
        elif isinstance(event, InputsSteered):
            out.update(names.get(sid, sid) for sid in event.inputs)
    return out


def _moved_abort_requests(result: RunResult, reference: RunResult) -> int:
    """The requests a crash let a run pin before the client's abort (or abandon) stopped it,
    beyond the fault-free run's: the same instant orders the client and the runtime either way,
    so each may cost one call. Only those: a re-send adds no request record, so a duplicated
    call is still counted against the bound."""
    crashed, fault_free = _requested_before_stop(result), _requested_before_stop(reference)
    extra = sum(max(0, r - f) for r, f in zip(crashed, fault_free, strict=False))
    return extra + sum(crashed[len(fault_free) :])


def _requested_before_stop(run: RunResult) -> list[int]:
    """For each run a client's abort or abandon stopped, in order, how many model requests it
    had pinned (records, not calls) before it stopped."""
    out: list[int] = []
    requested = 0
    for record in run.durable.records:
        event = record.event
        if isinstance(event, RunStarted):
            requested = 0
        elif isinstance(event, ModelRequested):
            requested += 1
        elif isinstance(event, RunStopped) and event.reason in ("aborted", "abandoned"):
            out.append(requested)
    return out


def _compacted(run: RunResult) -> list[int]:
    """The prefixes (``through``) of the compactions applied, in order."""
    return [r.event.through for r in run.durable.records if isinstance(r.event, CompactionApplied)]
