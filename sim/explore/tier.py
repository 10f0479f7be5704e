"""The CI tier: which crash points ``durable-sim sweep`` runs by default (docs/campaigns.md).

A regression suite must be short and must not change its mind. Every scenario x store is swept
exhaustively, except a trace whose depth-1 sweep lists more than ``EXHAUSTIVE_POINTS_MAX`` crash
points (its cost is quadratic: each point re-runs the rest of the run). Such a trace is swept on
a *stratified sample*, as FoundationDB and TigerBeetle bound their CI runs and leave the
exhaustive search to campaigns (``durable-sim campaign``, ``durable-sim sweep --exhaustive``):

1. every *stratum* at least once: a stratum is (boundary kind, before/after, crash kind), the
   cells of the report's crash matrix;
2. every *recovery class* at least once: a recovery class is (operation in flight, crash kind),
   where the operation in flight is the last non-file boundary at or before the crash
   (``operation``): a store commit, a checkpoint (compaction), a lease acquire/renew/release, a
   model call (a generation in flight), a tool effect named by its tool (a tool in flight, whose
   recovery follows that tool's policy), the SQLite engine's own commit or checkpoint, or
   ``start`` before the first one. Recovery reads a different durable state in each: a torn log
   tail, a half-written checkpoint, a lease file mid-rename, an intent with no settlement;
3. every *storage fault* point, up to ``STORAGE_POINTS_MAX`` of them (seeded beyond): each one
   draws its own damage (which file, which bytes, aimed at a commit boundary or not), so one
   does not stand for its stratum as a process kill does -- a store that mishandles a damaged
   sub-agent log is killed only where the fault strikes that log;
4. then a seeded sample of the other points, up to ``SAMPLE_POINTS`` points in all.

The sample depends only on the seed, the scenario, the store and the traced run's labels: a local
``random.Random`` seeded with a string (hashed by SHA-512, not ``hash()``), groups visited in
sorted order -- the same points under any ``PYTHONHASHSEED`` and any ``--jobs``. The sweep then
runs every point whose fold root (``sim.explore.sweep.Roots``) is a chosen point's, so a folded
point is judged with its class as in the exhaustive sweep. A sampled sweep whose points miss a
stratum or a recovery class is the harness's error, never a pass (``sim.explore.sweep``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sim.world.faults import (
    CrashKind,
    CrashPoint,
    Schedule,
    When,
    boundary_kind,
    parse_schedule,
    sweep_points,
)

#: Crash points (depth-1 schedules, enumerated power tears included, before folding) of one
#: scenario x store above which the CI tier samples. Sized for ``make sweep``'s 3 minutes on 2
#: cores (docs/performance.md, "The CI tier"): 36 of the 64 bundled traces are at or under it
#: and swept exhaustively, among them every trace a registered mutant's first kill needs but
#: those the sample kills anyway (``test_tier.py`` runs the sampled tier with each planted).
#: It was 380 (28 traces) until SQLite took storage faults, which add a point after each
#: acknowledged SQLite operation (2 per store operation: ``store.*`` and the ``sqlite.*`` call
#: inside it). ``weak_durability_nofsync[sqlite]``, the trace of ``checkpoint-without-wal-sync``'s
#: first kill, went from 372 points to 408; the sample of ``lease_takeover[sqlite]`` with
#: ``fence-outside-transaction-sqlite`` planted (430 points to 460), drawn anew, no longer picked
#: one of the 5 pauses of 22 that kill it. At 460 both are swept whole, with six other traces
#: between 416 and 456 points (``abort_mid_tool``, ``request_id_resubmit``,
#: ``graceful_shutdown_takeover``, ``parallel_tools_mixed_policies``, ``zombie_abort`` on SQLite;
#: ``steer_mid_tools``, ``steer_and_follow_up_queued`` on the file store).
EXHAUSTIVE_POINTS_MAX = 460

#: Crash points chosen per sampled trace (strata, recovery classes and storage faults first),
#: before the points that share a chosen point's fold class are added: the strata and classes
#: alone choose 30 to 55 points, so this adds a few seeded others where they leave room.
SAMPLE_POINTS = 60

#: Storage fault points a sampled trace runs besides its strata and classes: all of them on
#: every bundled trace but ``long_horizon`` (at most 74 on the others -- ``abandon_restores_files``
#: and ``retry_backoff`` on SQLite; 37 on the file store -- and 292 and 584 there). It was 40
#: until SQLite took storage faults: a SQLite trace has about twice the file store's points (an
#: acknowledged ``store.*`` operation and the ``sqlite.*`` call inside it each get one), each
#: drawing its own fault.
STORAGE_POINTS_MAX = 80

Stratum = tuple[str, str, str]  # boundary kind, before/after, crash kind
RecoveryClass = tuple[str, str]  # operation in flight, crash kind

#: The operation in flight before the trace's first non-file boundary.
START = "start"


def sampled(points: int, *, exhaustive: bool) -> bool:
    """Whether the CI tier samples a trace of ``points`` crash points."""
    return not exhaustive and points > EXHAUSTIVE_POINTS_MAX


def operation(label: str) -> str | None:
    """The operation a boundary starts, or None for a file operation (``fs.*``), which is a
    step of the operation around it: ``store.commit#14`` -> ``store.commit``,
    ``tool.effect:payments.charge#call-2`` -> ``tool.effect:payments.charge``."""
    head = label.split("#", 1)[0]
    return None if head.startswith("fs.") else head


def in_flight(labels: Sequence[str]) -> list[str]:
    """For each boundary index, the operation in flight right after it (``START`` if none)."""
    out: list[str] = []
    current = START
    for label in labels:
        current = operation(label) or current
        out.append(current)
    return out


def stratum(point: CrashPoint, labels: Sequence[str]) -> Stratum:
    return (boundary_kind(labels[point.index]), point.when, point.kind)


def recovery_class(point: CrashPoint, after: Sequence[str]) -> RecoveryClass:
    """A crash before a boundary lands in the operation in flight after the previous one."""
    if point.when == "after":
        return (after[point.index], point.kind)
    return (after[point.index - 1] if point.index else START, point.kind)


def select(
    schedules: Sequence[Schedule],
    labels: Sequence[str],
    *,
    seed: int,
    salt: str,
    budget: int | None = None,
) -> frozenset[str]:
    """The chosen points' schedule texts: a point of every stratum, then of every recovery
    class not yet covered, then the storage fault points (up to ``STORAGE_POINTS_MAX``), then
    seeded others up to ``budget`` in all (``salt`` names the scenario and store, so two traces
    of one seed draw independently; ``budget`` defaults to ``SAMPLE_POINTS``)."""
    budget = SAMPLE_POINTS if budget is None else budget
    rng = random.Random(f"durable-sim tier|{seed}|{salt}")
    after = in_flight(labels)
    last = [s.points[-1] for s in schedules]
    texts = [s.text() for s in schedules]
    chosen: set[str] = set()
    keys: tuple[Callable[[CrashPoint], tuple[str, ...]], ...] = (
        lambda p: stratum(p, labels),
        lambda p: recovery_class(p, after),
    )
    for key in keys:
        chosen |= _one_of_each(rng, [key(p) for p in last], texts, chosen)
    storage = [t for t, p in zip(texts, last, strict=True) if p.kind == CrashKind.STORAGE]
    storage = [t for t in storage if t not in chosen]
    chosen.update(rng.sample(storage, min(len(storage), STORAGE_POINTS_MAX)))
    rest = [text for text in texts if text not in chosen]
    chosen.update(rng.sample(rest, min(len(rest), max(0, budget - len(chosen)))))
    return frozenset(chosen)


def _one_of_each(
    rng: random.Random, keys: list[tuple[str, ...]], texts: list[str], chosen: set[str]
) -> set[str]:
    """One seeded pick from each group of ``texts`` (by ``keys``) that ``chosen`` misses."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for key, text in zip(keys, texts, strict=True):
        groups.setdefault(key, []).append(text)
    picks: set[str] = set()
    for key in sorted(groups):
        members = groups[key]
        if not any(text in chosen or text in picks for text in members):
            picks.add(rng.choice(members))
    return picks


@dataclass(frozen=True)
class Coverage:
    """How many strata and recovery classes a trace offers and how many the run points hit;
    ``missing`` names the ones it missed (what a sampled sweep's harness error says)."""

    strata_total: int
    strata_covered: int
    classes_total: int
    classes_covered: int
    missing: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.missing


def coverage(
    texts: Iterable[str], labels: Sequence[str], kinds: Sequence[CrashKind], base: Schedule
) -> Coverage:
    """What the points ``texts`` (depth-1 schedule texts) cover of the trace ``labels`` swept
    with ``kinds`` after ``base``. An enumerated tear shares its point's stratum and class, so
    the trace's own are listed without tears."""
    after = in_flight(labels)
    points = [
        point
        for i in range(base.last_index + 1, len(labels))
        for when in (When.BEFORE, When.AFTER)
        for point in sweep_points(i, when, labels[i], kinds, 0)
    ]
    run = [parse_schedule(text).points[-1] for text in texts]
    strata = {stratum(p, labels) for p in points}
    classes = {recovery_class(p, after) for p in points}
    hit_strata = {stratum(p, labels) for p in run} & strata
    hit_classes = {recovery_class(p, after) for p in run} & classes
    missing = [f"stratum {'/'.join(s)}" for s in sorted(strata - hit_strata)]
    missing += [f"recovery class {'/'.join(c)}" for c in sorted(classes - hit_classes)]
    return Coverage(len(strata), len(hit_strata), len(classes), len(hit_classes), tuple(missing))
