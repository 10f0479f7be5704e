"""I14-I16 and I21, the inbox modes, on the raw log (they need no reducible log): a steered input
lands only at a post-tools boundary (I14), the inputs of one mode are placed in acceptance order
(I15), a rejected input wrote nothing (I16), and only an input accepted to steer is steered
(I21).

An input placed without being accepted makes the log irreducible (I2); a moved steering input
changes the model calls, which I11 then does not count; a rejected input's outcome is excused
by I9.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable.events import (
    EventRecord,
    InputAccepted,
    InputSettled,
    InputsSteered,
    ModelCompleted,
    RunStarted,
    TaskCheckpoint,
    TaskCreated,
    TaskSettled,
    ToolResult,
)
from sim.judgement.oracles.facts import durable_commits, row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_inbox(result: RunResult) -> list[Violation]:
    """I14-I16 and I21 on the final log and the client's record of rejections (they need no
    reducible log: each reads the raw events)."""
    out = check_steering_boundary(result) + check_queue_order(result) + check_rejections(result)
    return out + check_steering_mode(result)


@dataclass
class _Turns:
    """What I14 tracks while walking the log: each task's kind, run and phase, the tool calls
    proposed and not yet answered per run, and the tasks settled in the current commit."""

    kind: dict[str, str] = field(default_factory=dict)
    run: dict[str, str] = field(default_factory=dict)
    phase: dict[str, str] = field(default_factory=dict)
    open_calls: dict[str, set[str]] = field(default_factory=dict)
    settled_in_batch: set[str] = field(default_factory=set)
    steering: set[str] = field(default_factory=set)  # accepted steering inputs not yet placed

    def post_tools(self) -> bool:
        """Whether the current commit settled a generation turn that waited on tools."""
        return any(
            self.kind.get(t) == "generation" and self.phase.get(t) == "tools"
            for t in self.settled_in_batch
        )

    def see(self, event: Any) -> None:
        if isinstance(event, InputAccepted) and event.mode == "steer":
            self.steering.add(event.submission_id)
        elif isinstance(event, RunStarted | InputsSteered):
            self.steering.difference_update(event.inputs)
        elif isinstance(event, InputSettled):
            self.steering.discard(event.submission_id)
        elif isinstance(event, TaskCreated):
            self.kind[event.task_id] = event.kind
            self.run[event.task_id] = event.run_id
            self.phase[event.task_id] = event.phase
        elif isinstance(event, TaskCheckpoint):
            self.phase[event.task_id] = event.phase
        elif isinstance(event, ModelCompleted):
            calls = self.open_calls.setdefault(self.run.get(event.task_id, ""), set())
            calls.update(c.call_id for c in event.tool_calls)
        elif isinstance(event, ToolResult):
            self.open_calls.get(self.run.get(event.task_id, ""), set()).discard(event.call_id)
        elif isinstance(event, TaskSettled) and event.outcome == "completed":
            self.settled_in_batch.add(event.task_id)  # a turn that ended, not one aborted


def check_steering_boundary(result: RunResult) -> list[Violation]:
    """I14: a steered input lands at the next post-tools boundary and only there -- in the commit
    that settles a generation task that waited on its turn's tools (after that settlement),
    with every tool call of the run answered, and right before the next turn is created (so
    before the next model request); never between a tool call and its result, and never left
    queued by a post-tools boundary that came after it was accepted."""
    turns = _Turns()
    records = result.durable.records
    batch = None
    waiting: set[str] = set()  # set anew at each commit's first record, the log's first included
    for n, record in enumerate(records):
        event = record.event
        if record.batch != batch:
            batch, turns.settled_in_batch = record.batch, set()
            waiting = set(turns.steering)  # queued before this commit
        if isinstance(event, InputsSteered):
            why = _misplaced_steering(turns, event, records[n + 1 :], record.batch)
            if why:
                return [
                    Violation(
                        "I14",
                        f"steered input(s) {', '.join(event.inputs)} placed {why}",
                        tuple(row(r) for r in records if r.batch == record.batch)[:6],
                        expected="placed in the commit settling a turn that waited on tools",
                        actual=why,
                    )
                ]
        turns.see(event)
        skipped = sorted(waiting & turns.steering)
        if record.last_in_batch and turns.post_tools() and skipped:
            return [
                Violation(
                    "I14",
                    f"steering input {skipped[0]} was queued at a post-tools boundary of its "
                    "run, and the boundary did not place it",
                    tuple(row(r) for r in records if r.batch == record.batch)[:6],
                    expected=f"{skipped[0]} placed in this commit",
                    actual="still queued after it",
                )
            ]
    return []


def _misplaced_steering(
    turns: _Turns, event: InputsSteered, after: list[EventRecord], batch: str
) -> str:
    """Why a steering placement is not at a post-tools boundary ("" if it is)."""
    task = event.task_id
    if task not in turns.settled_in_batch:
        return f"in a commit that does not settle the turn {task}"
    if turns.kind.get(task) != "generation" or turns.phase.get(task) != "tools":
        return f"after {task}, which was not a generation turn waiting on tools"
    unanswered = sorted(turns.open_calls.get(event.run_id, set()))
    if unanswered:
        return f"between tool call {unanswered[0]} and its result"
    rest = [r.event for r in after if r.batch == batch and not isinstance(r.event, InputsSteered)]
    if not rest or not (isinstance(rest[0], TaskCreated) and rest[0].kind == "generation"):
        return "without the next turn created right after it"
    return ""


def check_queue_order(result: RunResult) -> list[Violation]:
    """I15: inputs of one inbox mode are placed (a run's start, a steering placement) in the
    order they were accepted, whatever crashes came between."""
    accepted: dict[str, tuple[int, str]] = {}
    last: dict[str, tuple[int, str]] = {}
    for record in result.durable.records:
        event = record.event
        if isinstance(event, InputAccepted):
            accepted[event.submission_id] = (record.sequence, event.mode)
            continue
        if isinstance(event, RunStarted | InputsSteered):
            for sid in event.inputs:
                if sid not in accepted:
                    continue  # I2 reports an input placed without being accepted
                seq, mode = accepted[sid]
                prior = last.get(mode)
                if prior is not None and prior[0] > seq:
                    return [
                        Violation(
                            "I15",
                            f"{mode} inputs placed out of acceptance order",
                            (f"{prior[1]} accepted at #{prior[0]}, placed first", row(record)),
                            expected=f"{sid} (accepted #{seq}) placed before {prior[1]}",
                            actual=f"{prior[1]} (accepted #{prior[0]}) placed before {sid}",
                        )
                    ]
                last[mode] = (seq, sid)
    return []


def check_rejections(result: RunResult) -> list[Violation]:
    """I16: a rejected submission (``ConversationBusy``) wrote nothing: no commit the final log
    holds that began before the rejection mentions its request id."""
    for rid, rejected_at in sorted(result.outside.client.rejected.items()):
        for index, records in durable_commits(result):
            for record in records:
                event = record.event
                if (
                    isinstance(event, InputAccepted)
                    and event.request_id == rid
                    and index < rejected_at
                ):
                    return [
                        Violation(
                            "I16",
                            f"request {rid} was rejected as busy, yet it had been written",
                            (row(record), f"rejected at boundary {rejected_at}"),
                            expected="no event of a rejected request",
                            actual=f"committed at boundary {index}",
                        )
                    ]
    return []


def check_steering_mode(result: RunResult) -> list[Violation]:
    """I21: every input placed into a running run (``inputs_steered``) was accepted with
    ``mode="steer"``. A follow-up steered into the running run is answered with that run's
    answer and never starts the run it was queued for; the reducer refuses it, so only a
    runtime whose reducer tolerates it gets this far, and then no other invariant sees it (the
    placement is at a post-tools boundary, in acceptance order, and settled)."""
    mode: dict[str, str] = {}
    for record in result.durable.records:
        event = record.event
        if isinstance(event, InputAccepted):
            mode[event.submission_id] = event.mode
        elif isinstance(event, InputsSteered):
            # An input never accepted is I2's: the log does not reduce.
            wrong = [sid for sid in event.inputs if mode.get(sid, "steer") != "steer"]
            if wrong:
                return [
                    Violation(
                        "I21",
                        f"input {wrong[0]}, accepted as {mode[wrong[0]]}, was steered into the "
                        f"running run {event.run_id}",
                        (_accepted_row(result, wrong[0]), row(record)),
                        expected=f"{wrong[0]} queued for the next run",
                        actual=f"placed into {event.run_id} at #{record.sequence}",
                    )
                ]
    return []


def _accepted_row(result: RunResult, submission_id: str) -> str:
    """The witness row of ``submission_id``'s acceptance."""
    for record in result.durable.records:
        event = record.event
        if isinstance(event, InputAccepted) and event.submission_id == submission_id:
            return row(record)
    return f"{submission_id} accepted"
