"""What one sweep runs, as one record (``SweepPlan``).

A sweep's configuration -- the scenario, the store, the seed, the crash kinds, the depth, how I10
is checked, which crash points (a campaign unit's ``Roots``), the CI tier's sample or every point,
whether to stop at the first failure and how repro lines name the scenario -- used to be a keyword
list repeated by every entry point (``sim.explore.sweep.sweep`` and ``sweep_part``,
``sim.explore.pruning.sweep``) and every caller. Named once, it is validated once and eagerly (a
bad store, crash kind, depth, mode or seed is refused before any run starts, in the exception the
sweep has always raised for it), it cannot change under a running sweep (frozen), and it has one
JSON form and one digest, so a plan can be stored, sent to a worker and compared. How a sweep is
*executed* (progress, forking, jobs) is no part of the plan: it changes no verdict.

``Roots`` and the determinism modes live here, below ``sim.explore.sweep``, so that the plan is
a leaf the sweep package imports (``sim.explore.sweep`` re-exports them as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from durable.codec import canonical_json, sha256_hex
from sim.world.faults import CrashKind, parse_schedule
from sim.world.scenario import Scenario
from sim.world.seeded import SEED_MAX
from sim.world.stores import StoreKind

Determinism = Literal["full", "sample", "off"]
DETERMINISM_MODES: tuple[Determinism, ...] = ("full", "sample", "off")


def determinism_mode(value: bool | str) -> Determinism:
    """``True``/``False`` (the library's older form) or a mode name, validated eagerly."""
    if value is True:
        return "full"
    if value is False:
        return "off"
    if value not in DETERMINISM_MODES:
        raise ValueError(f"determinism must be one of {', '.join(DETERMINISM_MODES)}: {value!r}")
    return value


@dataclass(frozen=True)
class Roots:
    """Which crash points of a depth-1 fast sweep one run takes: those whose *fold root* -- the
    first point of its fold class (``sim.explore.folding``), or the point itself when it has no
    twin -- lies at a boundary index in ``[first, stop)`` (``stop`` None: to the end). A
    campaign splits a sweep into units by these ranges (docs/campaigns.md): every unit
    recomputes the same fold plan from the same traced run, so every point has exactly one
    owner, and a folded point is owned with its root, whose outcome it inherits."""

    first: int = 0
    stop: int | None = None
    # The CI tier's sample (``sim.explore.tier``): the fold roots of the chosen points, or None
    # for every root. A point is owned with its root, so its fold class is judged as a whole.
    picked: frozenset[str] | None = None

    @property
    def every(self) -> bool:
        return self.first <= 0 and self.stop is None and self.picked is None

    def owns(self, text: str, twin_of: Mapping[str, str]) -> bool:
        """Whether the point of schedule ``text`` is this run's, by its root's boundary index."""
        if self.every:
            return True
        root = twin_of.get(text, text)
        if self.picked is not None and root not in self.picked:
            return False
        index = parse_schedule(root).points[-1].index
        return self.first <= index and (self.stop is None or index < self.stop)


EVERY_POINT = Roots()


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """What one sweep runs (see the module's docstring): every field is validated and
    normalised on construction -- a store or crash kinds given by name become ``StoreKind`` and
    ``CrashKind`` (in the order given: the results list them so), ``True``/``False`` for
    ``determinism`` become ``"full"``/``"off"``.

    ``depth`` 1 or 2 (a second crash at every boundary the first one's recovery reaches);
    ``roots`` the crash points this run owns (a campaign unit's range; depth 1 only);
    ``exhaustive`` False: a long trace's CI-tier sample (``sim.explore.tier``) instead of every
    point; ``ref`` how repro lines name the scenario (its name when None)."""

    scenario: Scenario
    store: StoreKind
    seed: int = 0
    crash_kinds: tuple[CrashKind, ...] = (CrashKind.PROCESS, CrashKind.POWER)
    depth: int = 1
    determinism: Determinism = "sample"
    roots: Roots = EVERY_POINT
    exhaustive: bool = True
    stop_at_first_failure: bool = False
    ref: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scenario, Scenario):
            raise TypeError(f"a plan's scenario is a loaded Scenario, not {self.scenario!r}")
        # The exceptions a sweep has always raised: ``StoreKindError`` and ``ScheduleError``
        # name an unknown store or kind, ``ValueError`` a bad depth, mode or seed.
        object.__setattr__(self, "store", StoreKind(self.store))
        kinds: Iterable[CrashKind | str] = self.crash_kinds
        object.__setattr__(self, "crash_kinds", tuple(CrashKind(k) for k in kinds))
        if isinstance(self.depth, bool) or self.depth not in (1, 2):
            raise ValueError("depth must be 1 or 2")
        object.__setattr__(self, "determinism", determinism_mode(self.determinism))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be an integer: {self.seed!r}")
        if not 0 <= self.seed <= SEED_MAX:
            raise ValueError(f"seed must be in 0..{SEED_MAX}: {self.seed}")
        if not isinstance(self.roots, Roots):
            raise TypeError(f"roots must be a Roots: {self.roots!r}")
        if self.roots.picked is not None:  # the sweep picks them itself (``exhaustive``)
            raise ValueError("a plan's roots are a range of boundaries; exhaustive=False samples")

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON values: the scenario's own JSON form, enums as their names, the
        roots as ``[first, stop]``; ``from_json`` reads it back to an equal plan."""
        return {
            "scenario": self.scenario.model_dump(mode="json"),
            "store": self.store.value,
            "seed": self.seed,
            "crash_kinds": [kind.value for kind in self.crash_kinds],
            "depth": self.depth,
            "determinism": self.determinism,
            "roots": [self.roots.first, self.roots.stop],
            "exhaustive": self.exhaustive,
            "stop_at_first_failure": self.stop_at_first_failure,
            "ref": self.ref,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SweepPlan:
        """The plan ``to_json`` wrote, validated as a plan built in code is; a key missing or
        unknown is refused (``ValueError``), not defaulted or dropped."""
        keys = set(doc)
        if keys != PLAN_KEYS:
            missing, unknown = sorted(PLAN_KEYS - keys), sorted(keys - PLAN_KEYS)
            raise ValueError(f"not a sweep plan: missing keys {missing}, unknown keys {unknown}")
        first, stop = doc["roots"]
        return cls(
            scenario=Scenario.model_validate(doc["scenario"]),
            store=doc["store"],
            seed=doc["seed"],
            crash_kinds=tuple(doc["crash_kinds"]),
            depth=doc["depth"],
            determinism=doc["determinism"],
            roots=Roots(first, stop),
            exhaustive=doc["exhaustive"],
            stop_at_first_failure=doc["stop_at_first_failure"],
            ref=doc["ref"],
        )

    def digest(self) -> str:
        """The SHA-256 of the plan's canonical JSON: equal plans, equal digests, in every
        process (what a stored or shipped plan is compared by)."""
        return sha256_hex(canonical_json(self.to_json()))


#: The keys of a plan's JSON form: its fields, no more and no fewer.
PLAN_KEYS: frozenset[str] = frozenset(f.name for f in fields(SweepPlan))
