"""Judging one run: the oracles' verdict on a schedule (with I10's second run), which recovery
paths it took, and its timeline for people (docs/architecture.md, 2.6).

The judgement layer: above one run (``sim.run.runner``) and the oracles, below exploration (sweeps,
forking, fuzzing), which all judge a schedule the same way through ``judge``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sim.judgement.oracles import Violation, check, check_determinism, verdict_of
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import Schedule


@dataclass
class ScheduleOutcome:
    schedule: Schedule
    verdict: str
    violations: list[Violation]
    fingerprint: str
    labels: tuple[str, ...]


def judge(result: RunResult, reference: RunResult, *, determinism: bool = True) -> ScheduleOutcome:
    """Run every oracle on ``result``; with ``determinism``, re-run the schedule for I10."""
    violations = check(result, reference)
    if determinism:
        again = run_scenario(
            result.scenario, seed=result.seed, store=result.store, schedule=result.schedule
        )
        violations += check_determinism(result, again)
    verdict = verdict_of(violations)
    labels = tuple(c.label for c in result.trace.crashes)
    return ScheduleOutcome(result.schedule, verdict, violations, result.trace.fingerprint, labels)


def recovery_paths(result: RunResult) -> set[str]:
    """Which recovery paths a run took: tells a reader what the sweep actually exercised."""
    paths: set[str] = set()
    for record in result.durable.records:
        event = record.event
        if event.type == "tool_interrupted":
            paths.add(f"interrupted:{event.policy}")
        elif event.type == "tool_result" and event.source in ("verified", "operator", "aborted"):
            paths.add(f"result:{event.source}")
        elif event.type == "lease_acquired" and event.epoch > 1:
            paths.add("lease:reacquired")
    executed: dict[str, int] = {}
    for effect in result.outside.ledger:
        executed[effect.call_id] = executed.get(effect.call_id, 0) + 1
    if any(n > 1 for n in executed.values()):
        paths.add("tool:re-executed")
    sent: dict[tuple[str, int], int] = {}
    for call in result.outside.model_calls:
        key = (call.task_id, call.attempt)
        sent[key] = sent.get(key, 0) + 1
    if any(n > 1 for n in sent.values()):
        paths.add("model:re-sent")
    if (
        any(r.sequence for r in result.durable.records)
        and result.errors.store_error is None
        and result.trace.crashes
    ):
        kinds = {c.point.kind for c in result.trace.crashes}
        for kind in ("power", "storage"):
            if kind in kinds:
                paths.add(f"crash:{kind}")
                break
        else:
            paths.add("crash:process")
    return paths


def timeline(result: RunResult, *, limit: int = 400) -> list[str]:
    """Human-readable events of a run with the crashes marked, for reports and ``--timeline``.

    A crash marker stands where the process died: an ``after`` crash of a store commit comes
    after the commit's own file operations (they nest inside it and have higher indexes). Runs of
    the same operation by the same process (lease renewals while a run waits) are folded into
    one line with a count, so a liveness failure's timeline stays readable."""
    entries: list[tuple[str, str]] = []  # (fold key, line); an empty key never folds
    pending: list[tuple[int, str]] = []  # (first index after the crash, marker)
    commits = dict(result.durable.commits)
    before_at = {c.point.index: c for c in result.trace.crashes if c.point.when == "before"}
    for crash in result.trace.crashes:
        if crash.point.when == "after":
            end = crash.boundaries_entered
            pending.append((crash.point.index + 1 if end is None else end, _marker(crash)))
    pending.sort()
    for boundary in result.trace.boundaries:
        while pending and pending[0][0] <= boundary.index:
            entries.append(("", pending.pop(0)[1]))
        before = before_at.get(boundary.index)
        if before is not None:
            entries.append(("", _marker(before)))
        records = commits.get(boundary.index)
        detail = ""
        if records:
            detail = " " + ", ".join(f"#{r.sequence} {r.event.type}" for r in records)
        where = f"{boundary.time_s:9.3f}s [{boundary.index:4d}] {boundary.process}"
        key = "" if detail else f"{boundary.process} {_without_numbers(boundary.label)}"
        entries.append((key, f"{where} {boundary.label}{detail}"))
    entries += [("", marker) for _, marker in pending]
    lines = _fold(entries)
    if len(lines) > limit:
        lines = [*lines[:limit], f"… ({len(lines) - limit} more lines)"]
    return lines


def _marker(crash: Any) -> str:
    p = crash.point
    return f"💥 CRASH ({p.kind}) {p.when} {crash.label} in {crash.process}"


def _without_numbers(label: str) -> str:
    return re.sub(r"\d+", "N", label)


def _fold(entries: list[tuple[str, str]]) -> list[str]:
    """Fold repeating cycles of foldable lines (e.g. renew, fsync, renew, fsync, ...): a cycle of
    up to ``FOLD_WIDTH`` lines repeated ``FOLD_MIN`` or more times becomes its first occurrence
    and a count."""
    keys = [key for key, _ in entries]
    lines: list[str] = []
    i = 0
    while i < len(entries):
        width, repeats = _cycle_at(keys, i)
        if repeats >= FOLD_MIN:
            lines += [line for _, line in entries[i : i + width]]
            lines.append(f"{'':11}… the {width} line(s) above, {repeats - 1} more times")
            i += width * repeats
        else:
            lines.append(entries[i][1])
            i += 1
    return lines


FOLD_WIDTH = 4
FOLD_MIN = 3


def _cycle_at(keys: list[str], i: int) -> tuple[int, int]:
    """The shortest cycle of foldable keys starting at ``i`` that repeats, and how many times."""
    for width in range(1, FOLD_WIDTH + 1):
        cycle = keys[i : i + width]
        if len(cycle) < width or "" in cycle:
            break
        repeats = 1
        while keys[i + repeats * width : i + (repeats + 1) * width] == cycle:
            repeats += 1
        if repeats >= FOLD_MIN:
            return width, repeats
    return 1, 1
