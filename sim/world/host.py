"""What one world needs from the host it runs on, written once for both hosts.

A world (a scenario's client, services, model and tools, and the runtime's processes) has two
hosts: the simulator (``sim.run.runner``: virtual time, ``SimFS``, everything in memory) and the
real-process child of ``durable-sim realcrash`` (``sim.world.realhost``: a sped-up wall clock,
real files, state that outlives a SIGKILL in files beside the store). ``sim.world.session`` runs
a process of either host through the ``Host`` protocol below; the records it keeps (the client's
view, the model's calls, recovery audits) are plain containers in the simulator and containers
that write themselves to the point's record in the real host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from durable.config import RuntimeConfig
from durable.ports import Blocking
from sim.world.model import ModelCall
from sim.world.process import Machine, SimProcess
from sim.world.scenario import Scenario
from sim.world.seeded import World
from sim.world.stores import StoreKind, StorePlace
from sim.world.tools import ServiceLedger


@dataclass
class ClientView:
    """What the client knows: acknowledged submissions and returned answers (for I5 and I12)."""

    acked: dict[str, str] = field(default_factory=dict)
    answers: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)
    lost_acks: list[str] = field(default_factory=list)
    remapped: list[tuple[str, str, str]] = field(default_factory=list)
    actions_done: set[int] = field(default_factory=set)
    # Request id -> the boundary index at its last ``ConversationBusy`` rejection (a reject-mode
    # input refused while a run was active); its answer is then ``("rejected", None, reason)``
    # until a later send of the same request id is accepted.
    rejected: dict[str, int] = field(default_factory=dict)

    def complete(self, scenario: Scenario) -> bool:
        return all(i.request_id in self.answers for i in scenario.inputs)


class Host(Protocol):
    """A world's host, as a process's session uses it: the scenario and the runtime's
    configuration, the store kind and where it lives, the machine and world (boundaries, ids,
    trace), the services, and what outlives a process (the client's view, the model's call log,
    when each process recovered, what a recovery rebuilt wrong)."""

    scenario: Scenario
    config: RuntimeConfig
    store_kind: StoreKind
    client: ClientView
    model_log: list[ModelCall]
    recovered_at_s: dict[str, float]
    recovery_mismatches: list[str]

    # Read-only, so each host may hold its own kind (a RealWorld, a RealMachine, SQLiteServices):
    # a session reads them and never replaces one.
    @property
    def world(self) -> World: ...

    @property
    def machine(self) -> Machine: ...

    @property
    def services(self) -> ServiceLedger: ...

    def place(self) -> StorePlace:
        """Where the store lives now (a forked simulator child moves its SQLite copy)."""
        ...

    def blocking(self, process: SimProcess) -> Blocking:
        """The blocking-call port of ``process`` (inline in the simulator)."""
        ...


def runtime_config(scenario: Scenario) -> RuntimeConfig:
    """The runtime's configuration for a scenario (the same on both hosts)."""
    return RuntimeConfig(
        model_name="fake",
        lease_ttl_s=scenario.lease_ttl_s,
        heartbeat_s=scenario.heartbeat_s,
        checkpoint_every=scenario.checkpoint_every,
        checkpoint_every_tasks=scenario.checkpoint_every_tasks,
        budget=scenario.budget,
        max_model_attempts=scenario.max_model_attempts,
        context_budget_tokens=scenario.context_budget_tokens,
        required_criteria=tuple(scenario.required_criteria),
    )


def shutdown_at_s(scenario: Scenario, slot: int) -> float:
    """When the scenario's graceful shutdown takes this worker slot down (never: ``inf``)."""
    shutdown = scenario.shutdown
    return shutdown.at_s if shutdown is not None and slot == 0 else math.inf
