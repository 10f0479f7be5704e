"""A crash named by what it interrupts -- "after the 4th append to the log", "before the first
model call" -- rather than by a boundary index.

Indexes renumber whenever a boundary is added anywhere before them (docs/crash-model.md, "Crash
points"); a label names the same instant across such changes. A test or a mutant's witness
(``sim.explore.mutants``) therefore keeps the label and resolves it against the run it extends
at the moment it runs: the fault-free trace, or the run under the crashes already scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.run.runner import RunResult
from sim.world.faults import CrashKind, CrashPoint, Schedule, When


class LabelNotFound(LookupError):
    """The run has fewer boundaries with the label than the crash asks for: the trace changed
    under the test (or the label was mistyped), and the crash would land somewhere else."""


@dataclass(frozen=True, kw_only=True)
class LabelledCrash:
    """A crash ``when`` the ``nth`` boundary whose label starts with ``label`` is crossed.

    ``nth`` counts from the start of the run, or from just after the schedule's previous crash
    point when one is given (``schedule_at_label``'s ``base``): a recovery's boundaries are
    named relative to the crash that caused it. ``tear`` picks an enumerated tear of a power
    crash (``CrashPoint.tear``)."""

    label: str
    when: When
    kind: CrashKind
    nth: int = 1
    tear: int = 0

    def __post_init__(self) -> None:
        if not self.label:
            raise ValueError("a labelled crash needs a label (a prefix of a boundary label)")
        sides, kinds = tuple(w.value for w in When), tuple(k.value for k in CrashKind)
        if self.when not in sides:
            raise ValueError(f"when must be one of {sides}, not {self.when!r}")
        if self.kind not in kinds:
            raise ValueError(f"kind must be one of {kinds}, not {self.kind!r}")
        if self.nth < 1:
            raise ValueError(f"nth counts from 1, not {self.nth}")
        if self.tear and self.kind != "power":
            raise ValueError(f"only a power crash can tear a file, not a {self.kind} crash")

    def text(self) -> str:
        tear = f"~{self.tear}" if self.tear else ""
        return f"{self.when} boundary #{self.nth} labelled {self.label!r} ({self.kind}{tear})"


def point_at_label(run: RunResult, crash: LabelledCrash, *, after: int = -1) -> CrashPoint:
    """The crash point ``crash`` names in ``run``'s trace, counting only boundaries past the
    index ``after``; ``LabelNotFound`` (naming the label and the run) if there is none."""
    hits = [
        b.index for b in run.trace.boundaries if b.index > after and b.label.startswith(crash.label)
    ]
    if len(hits) < crash.nth:
        where = f" after boundary {after}" if after >= 0 else ""
        raise LabelNotFound(
            f"no boundary #{crash.nth} labelled {crash.label!r}{where} in the run of "
            f"{run.scenario.name} on the {run.store} store under schedule "
            f"{run.schedule.text()} ({len(hits)} match{'es' if len(hits) != 1 else ''}: "
            f"{hits[:8]})"
        )
    return CrashPoint(hits[crash.nth - 1], crash.when, crash.kind, crash.tear)


def schedule_at_label(
    run: RunResult, crash: LabelledCrash, *, base: Schedule | None = None
) -> Schedule:
    """``base`` (default: no crash) and one more crash point, named by ``crash`` in ``run``:
    the run that ``base`` leaves, whose boundaries past ``base``'s last point are counted."""
    base = base or Schedule()
    return Schedule.of(*base.points, point_at_label(run, crash, after=base.last_index))
