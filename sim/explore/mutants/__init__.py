"""Mutants: known recovery-bug classes of durable runtimes, planted into the reference runtime by
monkeypatching one piece of it (the runtime carries no bug switches).

A harness is worth what it can catch. ``durable-sim mutants`` plants each mutant the depth-1
sweep must kill and runs the default sweep (every bundled scenario, both stores, process and
power crashes, depth 1, on the fast path with I10 sampled as ``make sweep`` samples it) until
the first failing schedule, and prints a kill matrix; the tests run each mutant's witness (fast)
and its kill (slow). The classes come from the runtime's own promises (intent before effect,
atomic checkpoints, leases, only a crash may resume, recovery policies) and from public trackers
of durable runtimes (a tool re-run after its effect landed, lost fencing, request dedupe).

Each mutant lives in the module of its area, with its record (``core.mutant``); ``MUTANTS`` is
every record, in the order of the areas below and of the definitions in each.
"""

from __future__ import annotations

from typing import TypeVar

from sim.errors import UsageError
from sim.explore.mutants import (
    agent_state,
    compensation,
    fleet,
    inbox,
    leases,
    model,
    recovery,
    sqlite,
    store,
)
from sim.explore.mutants.core import (
    FleetMutant,
    Mutant,
    MutantError,
    Patcher,
    Patches,
    fleet_registered,
    mutant,
    planted,
    registered,
)
from sim.explore.mutants.kill import KillResult, judge_witness, kill

#: The areas, in the order ``MUTANTS`` lists them (importing each registers its mutants).
AREAS = (store, leases, recovery, model, inbox, compensation, agent_state, sqlite)
MUTANTS: tuple[Mutant, ...] = tuple(
    m for area in AREAS for m in registered() if m.apply.__module__ == area.__name__
)
_BY_NAME = {m.name: m for m in MUTANTS}


#: The fleet's mutants (``durable-sim workers --mutant``): ``fleet``'s decorations, in order.
FLEET_MUTANTS: tuple[FleetMutant, ...] = fleet_registered()
_FLEET_BY_NAME = {m.name: m for m in FLEET_MUTANTS}
assert all(m.apply.__module__ == fleet.__name__ for m in FLEET_MUTANTS)  # one home for them

_M = TypeVar("_M", Mutant, FleetMutant)


def _named(kind: str, by_name: dict[str, _M], name: str) -> _M:
    """The record called ``name``; a ``UsageError`` naming the known ones (a name comes from a
    user: ``durable-sim mutants NAME``, ``workers --mutant``)."""
    try:
        return by_name[name]
    except KeyError:
        known = ", ".join(by_name)
        raise UsageError(f"unknown {kind} {name!r} (known: {known})") from None


def fleet_mutant_named(name: str) -> FleetMutant:
    """The fleet mutant called ``name``."""
    return _named("fleet mutant", _FLEET_BY_NAME, name)


def mutant_named(name: str) -> Mutant:
    """The registered mutant called ``name``."""
    return _named("mutant", _BY_NAME, name)


__all__ = [
    "FLEET_MUTANTS",
    "MUTANTS",
    "FleetMutant",
    "KillResult",
    "Mutant",
    "MutantError",
    "Patcher",
    "Patches",
    "fleet_mutant_named",
    "judge_witness",
    "kill",
    "mutant",
    "mutant_named",
    "planted",
]
