"""What several oracle families derive once from a run: ``reduce`` of the final log in one pass
(with the walks other oracles ride on it), the facts read off the reduced state, the commits
that survived, whether the store mode promised to survive the run's crashes, and a log record
as a witness row.

It judges nothing: a log that does not reduce is recorded here (``Reduced.error``) and reported
by I2 (``log``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from durable.events import EventRecord, RunStopped
from durable.state import InvariantViolation, State, apply, new_state
from sim.judgement.oracles.damage_table import table_allows_loss
from sim.run.runner import RunResult
from sim.world.stores import StoreKind


@dataclass
class Facts:
    """What the oracles derive once from a result."""

    state: State | None
    run_of_task: dict[str, str] = field(default_factory=dict)
    stop_index: dict[str, int] = field(default_factory=dict)
    stop_epoch: dict[str, int] = field(default_factory=dict)  # the lease epoch that stopped it


def store_promises_power(result: RunResult) -> bool:
    """Whether the store mode promises acknowledged data survives power loss (the store kind
    decides, from the scenario's ``fsync``: ``StoreKind.promises_power``)."""
    return StoreKind(result.store).promises_power(result.scenario.fsync)


def within_promise(result: RunResult) -> bool:
    """False if a crash happened that the store mode does not promise to survive: a power loss
    its mode may lose commits to, or storage damage the damage table lets it lose commits to
    (I23 checks that loss starts at the damage)."""
    power = any(c.point.kind == "power" for c in result.trace.crashes)
    return (not power or store_promises_power(result)) and not table_allows_loss(result)


def row(record: EventRecord) -> str:
    """A log record as one witness line: sequence, epoch, event type and its non-empty fields."""
    event = record.event.model_dump(mode="json")
    kind = event.pop("type")
    detail = ", ".join(f"{k}={v}" for k, v in event.items() if v not in (None, "", [], {}))
    return f"#{record.sequence} e{record.epoch} {kind}({detail[:160]})"


def durable_commits(result: RunResult) -> list[tuple[int, list[EventRecord]]]:
    """Commits (with the boundary index they started at) whose records are in the final log."""
    final = {r.checksum for r in result.durable.records}
    return [(i, recs) for i, recs in result.durable.commits if recs and recs[0].checksum in final]


def durable_child_commits(result: RunResult) -> list[tuple[int, list[EventRecord]]]:
    """``durable_commits`` of the sub-agents' child conversations (none without sub-agents)."""
    out: list[tuple[int, list[EventRecord]]] = []
    for child, commits in sorted(result.durable.child_commits.items()):
        final = {r.checksum for r in result.durable.child_records.get(child, [])}
        out += [(i, recs) for i, recs in commits if recs and recs[0].checksum in final]
    return out


class Watcher(Protocol):
    """A walk over the log that rides on ``reduce_log``'s pass instead of making its own.
    ``before`` sees each record with the state it is about to be applied to, ``after`` each
    record that applied, with the state after it; a record that does not apply ends the pass
    (``after`` never sees it). What it finds is its own: the oracle that made it reads it."""

    def before(self, state: State, record: EventRecord) -> None: ...

    def after(self, state: State, record: EventRecord) -> None: ...


@dataclass
class Reduced:
    """``reduce`` of the final log, and of each prefix a verified checkpoint claims, from one
    pass over the log: four oracles used to reduce the whole log on their own (I2, I3 per
    checkpoint, the facts, I19's walk), which was a tenth of judging a long run (I19's own
    walk alone was a quarter of judging a ``long_horizon`` crash run)."""

    state: State | None  # reduce of the whole log; None if it does not reduce
    error: InvariantViolation | None  # why it does not
    prefixes: dict[int, dict[str, Any]]  # through_sequence -> reduce(prefix) as JSON, if it reduces


def reduce_log(result: RunResult, *, watchers: Sequence[Watcher] = ()) -> Reduced:
    """One pass of ``apply`` over ``result.durable.records`` (what ``reduce`` does, on a fresh
    state), dumping the state at every verified checkpoint's ``through_sequence`` on the way and
    showing each record to the ``watchers``. A prefix that does not reduce is absent from
    ``prefixes``, as ``reduce`` of it would raise."""
    records = result.durable.records
    wanted = {
        c.through_sequence
        for c in result.durable.checkpoints
        if c.verify() and c.through_sequence <= len(records)
    }
    state = new_state(result.scenario.conversation_id)
    prefixes: dict[int, dict[str, Any]] = {}
    before = [w.before for w in watchers]
    after = [w.after for w in watchers]
    if 0 in wanted:
        prefixes[0] = state.model_dump(mode="json")
    try:
        for n, record in enumerate(records, start=1):
            for hook in before:
                hook(state, record)
            apply(state, record)
            for hook in after:
                hook(state, record)
            if n in wanted:
                prefixes[n] = state.model_dump(mode="json")
    except InvariantViolation as exc:
        return Reduced(None, exc, prefixes)
    return Reduced(state, None, prefixes)


def derive_facts(result: RunResult, reduced: Reduced | None = None) -> Facts:
    """The facts of ``result`` (``reduced``: its ``reduce_log``, if already made)."""
    state = (reduced or reduce_log(result)).state
    if state is None:
        return Facts(state=None)
    facts = Facts(state=state)
    for task in state.tasks.values():
        facts.run_of_task[task.id] = task.run_id
    for index, records in durable_commits(result):
        for record in records:
            if isinstance(record.event, RunStopped):
                facts.stop_index.setdefault(record.event.run_id, index)
                facts.stop_epoch.setdefault(record.event.run_id, record.epoch)
    return facts
