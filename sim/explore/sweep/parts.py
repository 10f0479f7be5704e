"""A fast sweep in parts: which crash points one run owns (``Roots``), what a part computed
(``SweepPart``) and how it is recorded (``record_part``) -- the same code for a one-process sweep
and for a campaign's units (docs/campaigns.md). ``Roots`` is a sweep plan's
(``sim.explore.plan``), re-exported here."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.explore import tier
from sim.explore.plan import EVERY_POINT, Roots
from sim.explore.recording import Judged, ScenarioSweep, record_outcome
from sim.explore.sweep.prepare import swept_kinds
from sim.judgement.oracles import Violation
from sim.world.faults import Schedule, parse_schedule

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
    base = Schedule(tuple(out.reference.base_points))
    if part.reference is not None:
        record_outcome(out, base, part.reference)
        if out.failures:
            out.reference.failed = True
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
    base = Schedule(tuple(out.reference.base_points))
    cover = tier.coverage(texts, out.reference.labels, kinds, base)
    out.sample.points_total, out.sample.points_run = total, len(texts)
    out.sample.strata_total, out.sample.strata_covered = cover.strata_total, cover.strata_covered
    out.sample.recovery_classes_total = cover.classes_total
    out.sample.recovery_classes_covered = cover.classes_covered
    if out.sample.sampled and not cover.complete:
        shown = ", ".join(cover.missing[:5])
        why = f"the CI tier's sample missed {len(cover.missing)} of its promised cells: {shown}"
        record_outcome(out, base, Judged.harness_error(why))


__all__ = ["EVERY_POINT", "Listed", "Roots", "SweepPart", "account", "record_part"]
