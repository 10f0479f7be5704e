"""The mutant registry: each mutant is one function, decorated with ``@mutant(...)`` where it is
written, and that decoration is its only record -- what the bug is, where the sweep hunts it,
which invariants catch it and the schedules that show it. ``MUTANTS`` (``sim.explore.mutants``)
is the decorations in order; ``durable-sim mutants`` and the tests read nothing else.

A mutant function takes a ``Patcher`` (``setattr``/``setitem``: the subset of pytest's
``MonkeyPatch`` it needs) and patches one piece of the runtime (the runtime carries no bug
switches). A record is checked when its module is imported, so a typo in a scenario name, a
crash kind or an invariant code fails at once rather than in a sweep minutes later.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sim.errors import ScheduleError
from sim.judgement.invariants import INVARIANTS
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, parse_schedule
from sim.world.scenario import bundled_names
from sim.world.stores import StoreKind

#: The codes a mutant of the reference runtime may be caught by (the registry's, not a target's).
RUNTIME_CODES = frozenset(i.code for i in INVARIANTS if i.scope in ("runtime", "both"))


K = TypeVar("K")
V = TypeVar("V")


class Patcher(Protocol):
    def setattr(self, target: object, name: str, value: object) -> None: ...

    def setitem(self, mapping: MutableMapping[K, V], key: K, value: V) -> None: ...


class Patches:
    """A minimal ``Patcher`` that remembers what it replaced and restores it on ``undo``.

    It replaces only what exists: a mutant whose target was renamed must fail loudly (its
    plant-and-undo test), not add a new attribute or key that nothing calls and so turn into a
    mutant that silently patches nothing."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, target: object, name: str, value: object) -> None:
        if isinstance(target, type) and name in target.__dict__:
            old = target.__dict__[name]  # as stored: a staticmethod stays one on undo
            self._undo.append(lambda: setattr(target, name, old))
        elif hasattr(target, name):
            if isinstance(target, type):  # inherited: undo uncovers the base's again
                self._undo.append(lambda: delattr(target, name))
            else:
                old = getattr(target, name)
                self._undo.append(lambda: setattr(target, name, old))
        else:
            raise AttributeError(f"{target!r} has no attribute {name!r} to patch")
        setattr(target, name, value)

    def setitem(self, mapping: MutableMapping[K, V], key: K, value: V) -> None:
        if key not in mapping:
            raise KeyError(f"{key!r} is not in the mapping to patch")
        old = mapping[key]
        self._undo.append(lambda: mapping.__setitem__(key, old))
        mapping[key] = value

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


class MutantError(ValueError):
    """A mutant's record is inconsistent (raised when its module is imported)."""


_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True, kw_only=True)
class Mutant:
    """One registered mutant.

    ``scenario`` and ``store``: its smallest killing scenario, swept first (and alone by the
    tests). ``crash_kinds``: the kinds its sweep runs (a bug in handling damaged synced data
    needs storage faults). ``caught_by``: the invariant codes that must report it, the headline
    of its first killing schedule first; ``also``: codes its witness may report besides
    (cascades). ``witness``: the crashes that expose it, each named by label in the run the
    previous one leaves (``sim.run.labels``), after the scenario's own base crash if it has one;
    empty when the fault-free run already fails. ``first_kill``: the first schedule the depth-1
    sweep of its scenario and store fails (``kill``; the slow test holds it unchanged), or None
    when no single crash shows it -- the sweep does not kill it, its witness has two crashes or
    more (the schedule fuzzer's test hunts it). ``absolute``: the bug branches on an absolute
    sequence number, epoch or time, which a crashed run's renamed view hides: the full-suffix
    check of ``--prune rejoin`` (``sim.explore.pruning``) catches it with ``--prune-check
    full`` and at a seed its sample picks (tests/sim/explore/test_pruning.py)."""

    name: str
    bug_class: str
    apply: Callable[[Patcher], None]
    scenario: str
    store: StoreKind = StoreKind.FILE
    crash_kinds: tuple[CrashKind, ...] = (CrashKind.PROCESS, CrashKind.POWER)
    caught_by: tuple[str, ...]
    also: tuple[str, ...] = ()
    witness: tuple[LabelledCrash, ...]
    first_kill: str | None
    absolute: bool = False

    def __post_init__(self) -> None:
        for problem in _problems(self):
            raise MutantError(f"mutant {self.name!r}: {problem}")

    @property
    def swept(self) -> bool:
        """Whether the depth-1 sweep (``kill``, ``durable-sim mutants``) kills it."""
        return self.first_kill is not None

    @property
    def checks_determinism(self) -> bool:
        """Whether showing it needs I10's second run of a schedule (others skip it: cheaper)."""
        return "I10" in self.caught_by


def _problems(m: Mutant) -> Iterator[str]:
    """Everything wrong with a record, first problem first (``__post_init__`` raises it)."""
    yield from _named_problems(m.name, m.bug_class)
    if m.scenario not in bundled_names():
        yield f"scenario {m.scenario!r} is not bundled (sim/scenarios/)"
    if m.store not in {k.value for k in StoreKind}:
        yield f"unknown store {m.store!r}"
    yield from _kind_problems(m)
    yield from _code_problems(m)
    yield from _schedule_problems(m)


def _named_problems(name: str, bug_class: str) -> Iterator[str]:
    """What every mutant's record must have, a sweep's or a fleet's: a name and a bug class."""
    if not _NAME.match(name):
        yield "a name is lowercase words joined by '-'"
    if not bug_class.strip():
        yield "no bug class"


def _kind_problems(m: Mutant) -> Iterator[str]:
    kinds = tuple(k.value for k in CrashKind)
    if not m.crash_kinds or any(k not in kinds for k in m.crash_kinds):
        yield f"crash_kinds {m.crash_kinds!r} must be some of {kinds}"
    elif m.store in {k.value for k in StoreKind}:
        store = StoreKind(m.store)
        skipped = [k for k in m.crash_kinds if not store.can_inject(k)]
        if skipped:
            yield f"the {store} store cannot inject {skipped} (StoreKind.can_inject)"
    if any(c.kind not in m.crash_kinds for c in m.witness):
        yield "a witness crash of a kind its sweep does not run"


def _code_problems(m: Mutant) -> Iterator[str]:
    if not m.caught_by:
        yield "caught_by names no invariant"
    codes = [*m.caught_by, *m.also]
    bad = [c for c in codes if c not in RUNTIME_CODES]
    if bad:
        yield f"invalid invariant codes {bad} (the reference runtime's: sim.judgement.invariants)"
    if len(set(codes)) != len(codes):
        yield "an invariant listed twice (caught_by and also are disjoint)"


def _schedule_problems(m: Mutant) -> Iterator[str]:
    if m.first_kill is None:
        if len(m.witness) < 2:
            yield "first_kill None (the sweep misses it) needs a witness of two crashes or more"
        return
    try:
        points = parse_schedule(m.first_kill).points
    except ScheduleError as exc:
        yield f"first_kill {m.first_kill!r}: {exc}"
        return
    if any(p.kind not in m.crash_kinds for p in points):
        yield f"first_kill {m.first_kill!r} crashes with a kind its sweep does not run"
    if len(m.witness) > 1:
        yield "a witness of several crashes, though one crash kills it (first_kill)"
    if (m.first_kill == "none") != (not m.witness):
        yield "the witness is the fault-free run exactly when first_kill is 'none'"


_REGISTERED: dict[str, Mutant] = {}

F = TypeVar("F", bound=Callable[[Patcher], None])


def mutant(
    *,
    name: str,
    bug_class: str,
    scenario: str,
    caught_by: tuple[str, ...],
    witness: LabelledCrash | tuple[LabelledCrash, ...] | None,
    first_kill: str | None,
    also: tuple[str, ...] = (),
    store: StoreKind = StoreKind.FILE,
    crash_kinds: tuple[CrashKind, ...] = (CrashKind.PROCESS, CrashKind.POWER),
    absolute: bool = False,
) -> Callable[[F], F]:
    """Register the decorated function as a mutant (the fields: ``Mutant``). ``witness``: one
    crash, several in order, or None when the fault-free run fails. The function is returned
    unchanged, so a test may still apply it to any ``Patcher``."""

    def register(apply: F) -> F:
        crashes = (
            () if witness is None else (witness,) if isinstance(witness, LabelledCrash) else witness
        )
        record = Mutant(
            name=name,
            bug_class=bug_class,
            apply=apply,
            scenario=scenario,
            store=store,
            crash_kinds=tuple(crash_kinds),
            caught_by=tuple(caught_by),
            also=tuple(also),
            witness=tuple(crashes),
            first_kill=first_kill,
            absolute=absolute,
        )
        _check_unregistered(name)
        _REGISTERED[name] = record
        return apply

    return register


def registered() -> tuple[Mutant, ...]:
    """Every mutant registered so far, in registration order."""
    return tuple(_REGISTERED.values())


@dataclass(frozen=True, kw_only=True)
class FleetMutant:
    """A mutant only several real processes show: ``durable-sim workers --mutant NAME`` plants
    it in each worker process before that opens its store (never in the parent that judges),
    for good -- the process ends with it. ``stores``: the stores it breaks, each swept by the
    fleet tests (tests/sim/targets/test_workers.py), which must fail a fleet with a safety
    verdict. Its record sits next to its code, as a sweep mutant's does (``mutant``)."""

    name: str
    bug_class: str
    apply: Callable[[Patcher], None]
    stores: tuple[StoreKind, ...]

    def __post_init__(self) -> None:
        for problem in _named_problems(self.name, self.bug_class):
            raise MutantError(f"fleet mutant {self.name!r}: {problem}")
        if not self.stores or any(s not in {k.value for k in StoreKind} for s in self.stores):
            raise MutantError(f"fleet mutant {self.name!r}: stores {self.stores!r}")


_FLEET: dict[str, FleetMutant] = {}


def fleet_mutant(*, name: str, bug_class: str, stores: tuple[StoreKind, ...]) -> Callable[[F], F]:
    """Register the decorated function as a fleet mutant (the fields: ``FleetMutant``)."""

    def register(apply: F) -> F:
        _check_unregistered(name)
        _FLEET[name] = FleetMutant(name=name, bug_class=bug_class, apply=apply, stores=stores)
        return apply

    return register


def _check_unregistered(name: str) -> None:
    """A name is one mutant's, whichever kind: ``workers --mutant`` and ``mutants`` share them."""
    if name in _REGISTERED or name in _FLEET:
        raise MutantError(f"mutant {name!r} registered twice")


def fleet_registered() -> tuple[FleetMutant, ...]:
    """Every fleet mutant registered so far, in registration order."""
    return tuple(_FLEET.values())


@contextmanager
def planted(mutant: Mutant) -> Iterator[None]:
    """Apply ``mutant`` for the duration of the block (restored even if the block raises:
    this is the harness's own process, not a simulated one)."""
    patches = Patches()
    try:
        mutant.apply(patches)
        yield
    finally:
        patches.undo()
