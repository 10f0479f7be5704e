"""A fast sweep in parts: which crash points one run owns (``Roots``), what a part computed
(``SweepPart``) and how it is recorded (``record_part``) -- the same code for a one-process sweep
and for a campaign's units (docs/campaigns.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.explore import tier
from sim.explore.recording import Judged, ScenarioSweep, record_outcome
from sim.explore.sweep.prepare import swept_kinds
from sim.judgement.oracles import Violation
from sim.world.faults import Schedule, parse_schedule


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

#: A schedule's text and what was judged of it, in the sweep's order.
Listed = tuple[str, Judged]


@dataclass
class SweepPart:
    """What a fast sweep (or one campaign unit of it) computed, before anything is recorded:
    the sweep's description (nothing recorded yet), the fault-free run's outcome (when this part
    records it), the forking run's check of the shared prefix (violations if it differed from
    the traced run), and the outcomes of the schedules it owns, in sweep order. ``total`` is the
    number of crash schedules of the whole sweep, every part's together."""

    sweep: ScenarioSweep
    reference: Judged | None = None
    prefix: list[Violation] = field(default_factory=list)
    outcomes: list[Listed] = field(default_factory=list)
    total: int = 0


def record_part(out: ScenarioSweep, part: SweepPart) -> None:
    """Record ``part`` into ``out`` as the one-process sweep records it: the fault-free run's
    outcome first (a failing one stops there), then the prefix check, then every schedule."""
    base = Schedule(tuple(out.base_points))
    if part.reference is not None:
        record_outcome(out, base, part.reference)
        if out.failures:
            out.reference_failed = True
            return
    if part.prefix:
        record_outcome(out, base, Judged.of_violations(part.prefix))
    for text, judged in part.outcomes:
        record_outcome(out, parse_schedule(text), judged)
    account(out, part.total, [text for text, _ in part.outcomes])


def account(out: ScenarioSweep, total: int, texts: list[str]) -> None:
    """The CI tier's counts (``sim.explore.tier``): crash points listed and judged, strata and
    recovery classes offered and covered. A sample that misses one is the harness's error: the
    tier promises each at least once, and a run that breaks the promise must not pass."""
    kinds = swept_kinds(out)
    base = Schedule(tuple(out.base_points))
    cover = tier.coverage(texts, out.labels, kinds, base)
    out.points_total, out.points_run = total, len(texts)
    out.strata_total, out.strata_covered = cover.strata_total, cover.strata_covered
    out.recovery_classes_total = cover.classes_total
    out.recovery_classes_covered = cover.classes_covered
    if out.sampled and not cover.complete:
        shown = ", ".join(cover.missing[:5])
        why = f"the CI tier's sample missed {len(cover.missing)} of its promised cells: {shown}"
        record_outcome(out, base, Judged.harness_error(why))
