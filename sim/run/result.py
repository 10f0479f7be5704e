"""What one run leaves for the oracles: the ``RunResult``, in parts named by what they hold.

Both hosts fill it -- the simulator's (``sim.run.runner``) and the real processes'
(``sim.run.realrun``) -- and every oracle family (``sim.judgement.oracles``) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable.events import EventRecord
from durable.store.base import Checkpoint
from sim.world.evidence import AcceptedAppend, Commit, CrashRecord, Evidence, LeaseGrant
from sim.world.faults import Boundary, Schedule, When
from sim.world.host import ClientView
from sim.world.model import ModelCall
from sim.world.scenario import Scenario
from sim.world.services import Effect
from sim.world.stores import StoreKind


@dataclass
class Trace:
    """The run's course through time: its fingerprint (the hash of the world's trace, I10), the
    boundaries crossed and the crashes taken (the machine's evidence), how many processes ran,
    when each one had its conversation open (a resumed retry is due at max(its committed
    deadline, the recovery): I11), where virtual time ended and whether the world settled (I7)."""

    fingerprint: str = ""
    boundaries: list[Boundary] = field(default_factory=list)
    crashes: list[CrashRecord] = field(default_factory=list)
    processes: int = 0
    recovered_at_s: dict[str, float] = field(default_factory=dict)
    virtual_time_s: float = 0.0
    settled: bool = False
    # (index, when) -> enumerated tears of a power crash there: a sweep's traced run only
    # (``run_scenario(count_tears=True)``), so it can list its tear schedules.
    tear_counts: dict[tuple[int, When], int] = field(default_factory=dict)
    # Where a fork hook ended the run (``Injector.stop_world``): the index of the boundary that
    # would have come next. A pruned run, which has rejoined the fault-free run and is judged
    # on its window only. None: the run ran out.
    halted_at: int | None = None


@dataclass
class Durable:
    """What the store holds at the end, as a fresh reader sees it, and the commits the machine
    saw begin (of which the oracles keep those found in the final log)."""

    records: list[EventRecord] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    # Sub-agents' child conversations (I20): each one's durable log at the end, and its commits
    # as the machine saw them begin (like ``commits``, which holds the scenario's conversation's).
    child_records: dict[str, list[EventRecord]] = field(default_factory=dict)
    child_commits: dict[str, list[Commit]] = field(default_factory=dict)
    # Child conversations a storage fault damaged after their last write, which no process
    # opened again (``sim.run.runner.LatentDamage``): the reader's refusal, per child. Their
    # records above are read from the disk as it was before the fault.
    latent_damage: dict[str, str] = field(default_factory=dict)


@dataclass
class Leases:
    """Who held the scenario's conversation, and what a change of owner left (I8, I11, I22):
    every lease granted and renewed, every append the store accepted with the lease it carried,
    when each graceful shutdown began, work a process began after releasing its lease, the
    processes a takeover paused, and how many handovers (a pause, a release) left a model
    request pinned for the next owner."""

    grants: list[LeaseGrant] = field(default_factory=list)
    renewals: list[LeaseGrant] = field(default_factory=list)
    accepted: list[AcceptedAppend] = field(default_factory=list)
    after_release: list[str] = field(default_factory=list)
    shutdowns: list[tuple[str, int]] = field(default_factory=list)  # (process, boundaries then)
    paused: list[str] = field(default_factory=list)
    handovers_with_pinned_request: int = 0


@dataclass
class Outside:
    """The world outside the runtime, the ground truth (docs/architecture.md, 2.3): the
    services' effect ledger and state at the end, the client's view, the model's call log."""

    ledger: list[Effect] = field(default_factory=list)
    client: ClientView = field(default_factory=ClientView)
    model_calls: list[ModelCall] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # the workspace at the end
    # The workspace after each applied workspace effect: (the effect's boundary index, the
    # files after it), the initial files at index -1 (I17).
    workspace_history: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    charges: dict[str, int] = field(default_factory=dict)  # the payments service at the end
    refunds: dict[str, int] = field(default_factory=dict)  # (I17: a refund per undone charge)


@dataclass
class Storage:
    """Storage faults (I13): what the disk damaged, the corruption error a process stopped with
    (None: recovery went on; the world ends at a refusal), and what changed in the damaged
    files since the damage."""

    damage: dict[str, str] = field(default_factory=dict)
    refusal: str | None = None
    evidence_changes: list[str] = field(default_factory=list)


@dataclass
class Errors:
    """What went wrong that is not a crash: the runtime raising instead of recovering (I0), the
    final read refusing the store (I2), a recovery rebuilding another state than ``reduce`` of
    the log its store returned (I3)."""

    runtime_error: str | None = None
    store_error: str | None = None
    recovery_mismatches: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    """Everything the oracles need of one run.

    The run's identity -- ``scenario``, ``seed``, ``store``, ``schedule`` -- stays flat: it is
    what the result is *of*, the key every sweep, report, timeline and repro line reads it by.
    What the run left is grouped by what it is evidence of:

    - ``trace``: its course through time (fingerprint, boundaries, crashes, processes, virtual
      time, whether it settled);
    - ``durable``: what the store holds at the end and the commits the machine saw begin;
    - ``leases``: grants, renewals, accepted appends, handovers, work after a release;
    - ``outside``: the services' ledger and state, the client, the model's calls;
    - ``storage``: storage faults, a refusal and what changed since the damage;
    - ``errors``: the runtime's error, the final read's, recoveries that rebuilt wrong.
    """

    scenario: Scenario
    seed: int
    store: StoreKind
    schedule: Schedule
    trace: Trace = field(default_factory=Trace)
    durable: Durable = field(default_factory=Durable)
    leases: Leases = field(default_factory=Leases)
    outside: Outside = field(default_factory=Outside)
    storage: Storage = field(default_factory=Storage)
    errors: Errors = field(default_factory=Errors)

    @property
    def outcome(self) -> dict[str, Any]:
        """What each submission ended as, by request id (the client's answers)."""
        return {
            rid: {"status": s, "answer": a, "reason": r}
            for rid, (s, a, r) in self.outside.client.answers.items()
        }

    def take_evidence(self, evidence: Evidence) -> None:
        """Copy what the machine's evidence recorder wrote into the parts that hold it (the
        simulator's machine, or the real host's rebuilt from its point's record)."""
        self.trace.boundaries = evidence.boundaries
        self.trace.crashes = evidence.crashes
        self.durable.commits = evidence.commits
        self.durable.child_commits = evidence.child_commits
        self.leases.grants = evidence.grants
        self.leases.renewals = evidence.renewals
        self.leases.accepted = evidence.accepted
        self.leases.after_release = evidence.after_release
        self.leases.shutdowns = evidence.shutdowns
        self.leases.handovers_with_pinned_request = evidence.handovers_with_pinned_request
