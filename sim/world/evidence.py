"""The evidence recorder: what the machine sees happen that the oracles read after the run
(docs/architecture.md, 2.2).

Every boundary crossed, every crash, every commit as it began and every append the store
accepted, every lease granted or renewed, the work a process began after releasing its lease,
and the pinned requests a lease handover left to the next owner. Nothing here decides anything:
what crashes, and when, is the injector's (``sim.world.injector``); the recorder only writes
down, and the runner copies what it wrote into the ``RunResult``'s parts (``sim.run.result``).

The real-process host keeps the same evidence across its processes: ``Evidence.kept_in`` builds a
recorder over the point's record (``sim.world.pointlog``) instead of plain lists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from durable.events import EventRecord
from durable.store.base import Lease
from sim.world.faults import Boundary, CrashPoint, boundary_kind
from sim.world.storage_faults import TableRow

#: A commit as the machine saw it begin: its boundary index and the records it carried.
Commit = tuple[int, list[EventRecord]]

#: The evidence kept in lists, by attribute name: the real host keeps each under this name in
#: its point's record, so a restarted process carries on with them and the parent rebuilds them.
LISTS = (
    "boundaries",
    "crashes",
    "commits",
    "grants",
    "renewals",
    "accepted",
    "after_release",
    "shutdowns",
)


@dataclass(frozen=True)
class CrashRecord:
    point: CrashPoint
    label: str
    process: str
    time_s: float
    pinned_request: bool
    fs_outcome: dict[str, str] = field(default_factory=dict)  # power loss or storage damage
    # How many boundaries had been entered when the process died: an ``after`` crash of a
    # store commit comes after the commit's own file operations, which have higher indexes.
    boundaries_entered: int | None = None
    # A storage fault: the damage table's record of each damaged file (None: unmapped), which
    # the damage-table oracle (I23) reads the store's response against.
    damage_rows: dict[str, TableRow | None] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaseGrant:
    """A lease acquisition: what the store held just before, and what it granted."""

    time_s: float
    boundary: int
    previous: Lease | None
    granted: Lease


@dataclass(frozen=True)
class AcceptedAppend:
    """An append the store accepted (returned from), with the lease it was written under."""

    boundary: int
    owner_id: str
    epoch: int
    sequences: tuple[int, ...]


@dataclass
class Evidence:
    """What the oracles read of the machine, recorded as it happens.

    The commits and leases are the scenario's conversation's (``main_conversation``, given by
    the runner when it builds the machine); a sub-agent's child conversation (``durable.subagent``)
    has its commits recorded apart, by id, in ``child_commits`` (I20 judges children) and no lease
    evidence. None: every conversation counts as the scenario's (the real host's, which refuses
    sub-agents)."""

    main_conversation: str | None = None
    boundaries: list[Boundary] = field(default_factory=list)
    crashes: list[CrashRecord] = field(default_factory=list)
    # Recorded when a commit *starts*: a crash inside the store (after its write, before its
    # fsync) may still leave it durable. Oracles keep only commits found in the final log.
    commits: list[Commit] = field(default_factory=list)
    child_commits: dict[str, list[Commit]] = field(default_factory=dict)
    grants: list[LeaseGrant] = field(default_factory=list)
    renewals: list[LeaseGrant] = field(default_factory=list)  # (stored before, renewed): I8
    accepted: list[AcceptedAppend] = field(default_factory=list)
    # Work (a commit, a tool effect, a model call) a process began after releasing its lease.
    after_release: list[str] = field(default_factory=list)
    # Each graceful shutdown as it began: (process id, boundaries crossed by then). I22.
    shutdowns: list[tuple[str, int]] = field(default_factory=list)
    # Counters by name: "handovers", see ``lease_handed_over``.
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def kept_in(
        cls, lists: Callable[[str], list[Any]], counts: dict[str, int], **fields: Any
    ) -> Evidence:
        """Evidence over containers someone else keeps: ``lists(name)`` for each of ``LISTS``
        (the real host: its point's record), and ``counts``."""
        kept: dict[str, Any] = {name: lists(name) for name in LISTS}
        return cls(**kept, counts=counts, **fields)

    @property
    def handovers_with_pinned_request(self) -> int:
        """How many lease handovers (a takeover's pause, a release) left a model request pinned
        and unanswered: the next owner re-sends it, and I11 allows one model call for each."""
        return self.counts.get("handovers", 0)

    def is_child(self, conversation_id: str) -> bool:
        """A conversation other than the scenario's: a sub-agent's child."""
        return self.main_conversation is not None and conversation_id != self.main_conversation

    def boundary(self, boundary: Boundary, *, released_lease: bool) -> None:
        """A boundary was crossed, by a process that had (or had not) released its lease: work it
        begins after a release races the next owner (I8)."""
        self.boundaries.append(boundary)
        if released_lease and boundary_kind(boundary.label) in ("commit", "tool", "model"):
            self.after_release.append(
                f"{boundary.label} (boundary {boundary.index}) by {boundary.process}"
            )

    def shutdown_began(self, process_id: str) -> None:
        """``process_id``'s runtime begins its graceful shutdown (its context exits): from here
        to its lease release it may only stop its work (I22)."""
        self.shutdowns.append((process_id, len(self.boundaries)))

    def crashed(self, record: CrashRecord) -> None:
        self.crashes.append(record)

    def commit_began(self, conversation_id: str, index: int, records: list[EventRecord]) -> None:
        if self.is_child(conversation_id):
            self.child_commits.setdefault(conversation_id, []).append((index, records))
        else:
            self.commits.append((index, records))

    def append_accepted(self, conversation_id: str, accepted: AcceptedAppend) -> None:
        if not self.is_child(conversation_id):
            self.accepted.append(accepted)

    def lease_granted(self, conversation_id: str, grant: LeaseGrant) -> None:
        if not self.is_child(conversation_id):
            self.grants.append(grant)

    def lease_renewed(self, conversation_id: str, renewal: LeaseGrant) -> None:
        if not self.is_child(conversation_id):
            self.renewals.append(renewal)

    def lease_handed_over(self, *, pinned_request: bool) -> None:
        """A lease changed hands without a crash: a takeover paused its owner, or its owner
        released it (a graceful shutdown). Counted if a request was pinned then."""
        self.counts["handovers"] = self.handovers_with_pinned_request + int(pinned_request)
