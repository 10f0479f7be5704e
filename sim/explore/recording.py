"""What a sweep records of each schedule it judged (docs/architecture.md, 2.5): the counts, the
crash matrix, the failures with their repro lines. One home for the recording, whichever way the
outcomes were computed -- the naive path as it runs, the fast paths after their children, a
campaign's merge of many units (``sim.explore.campaign``) -- so each records exactly what the
one-process sweep records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sim.judgement.judge import ScheduleOutcome, recovery_paths, timeline
from sim.judgement.oracles import VERDICT_ORDER, Verdict, Violation, verdict_of
from sim.judgement.repro import replay_command
from sim.run.runner import RunResult
from sim.world.faults import CrashPoint, Schedule


@dataclass
class Failure:
    scenario: str
    store: str
    seed: int
    schedule: str
    verdict: str
    invariant: str
    explanation: str
    witness: list[str]
    expected: str
    actual: str
    repro: str
    crash_labels: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    invariants: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ScenarioSweep:
    name: str
    store: str
    seed: int
    depth: int
    crash_kinds: list[str]
    boundaries: int = 0
    boundary_kinds: dict[str, int] = field(default_factory=dict)
    schedules: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICT_ORDER, 0))
    failures: list[Failure] = field(default_factory=list)
    matrix: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    reference_fingerprint: str = ""
    reference_outcome: dict[str, Any] = field(default_factory=dict)
    effects: dict[str, int] = field(default_factory=dict)
    skipped_power: bool = False
    skipped_storage: bool = False
    skipped_pause: bool = False  # asked for, but the scenario has no standby to take over
    tear_schedules: int = 0  # enumerated power-loss tears run (beyond each point's seeded draw)
    determinism: str = "full"  # how I10 was checked: full, sample or off
    # Schedules not run because an earlier one leaves the same world (``sim.explore.folding``):
    # they inherit its verdict. Counted in ``schedules`` like every other.
    folded: int = 0
    wall_s: float = 0.0
    base_points: list[CrashPoint] = field(default_factory=list)
    recovery_paths: dict[str, int] = field(default_factory=dict)
    ref: str = ""  # how the repro command names the scenario (a name, or the file's path)
    reference_failed: bool = False  # the fault-free run failed: no crash schedule was run
    # The CI tier (``sim.explore.tier``): crash points listed and judged (run or folded), and
    # the strata and recovery classes the trace offers and the judged points cover.
    sampled: bool = False
    points_total: int = 0
    points_run: int = 0
    strata_total: int = 0
    strata_covered: int = 0
    recovery_classes_total: int = 0
    recovery_classes_covered: int = 0
    # ``--prune rejoin`` (``sim.explore.pruning.sweep``): how many crashed runs stopped
    # where they rejoined the fault-free run, how many were checked to their end, and the
    # harness error that turned pruning off. None: an exact sweep.
    prune: dict[str, Any] | None = None

    def verdict_counts(self) -> str:
        """``safety 2, pass 120``: the verdicts that occurred, for progress lines and messages."""
        return ", ".join(f"{verdict} {n}" for verdict, n in self.verdicts.items() if n) or "none"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "store": self.store,
            "seed": self.seed,
            "depth": self.depth,
            "crash_kinds": self.crash_kinds,
            "boundaries": self.boundaries,
            "boundary_kinds": self.boundary_kinds,
            "schedules": self.schedules,
            "verdicts": self.verdicts,
            "failures": [f.to_json() for f in self.failures],
            "matrix": self.matrix,
            "labels": self.labels,
            "reference_fingerprint": self.reference_fingerprint,
            "reference_outcome": self.reference_outcome,
            "effects": self.effects,
            "skipped_power": self.skipped_power,
            "skipped_storage": self.skipped_storage,
            "skipped_pause": self.skipped_pause,
            "tear_schedules": self.tear_schedules,
            "determinism": self.determinism,
            "folded": self.folded,
            "reference_failed": self.reference_failed,
            "sampled": self.sampled,
            "points_total": self.points_total,
            "points_run": self.points_run,
            "strata_total": self.strata_total,
            "strata_covered": self.strata_covered,
            "recovery_classes_total": self.recovery_classes_total,
            "recovery_classes_covered": self.recovery_classes_covered,
            "base_schedule": Schedule(tuple(self.base_points)).text(),
            "recovery_paths": dict(sorted(self.recovery_paths.items())),
            "wall_s": round(self.wall_s, 3),
            **({} if self.prune is None else {"prune": self.prune}),
        }


def repro_command(scenario: str, seed: int, store: str, schedule: Schedule) -> str:
    """The replay line of a schedule under the seams in force now (see ``sim.judgement.repro``)."""
    return replay_command(scenario, seed=seed, store=store, schedule=schedule.text())


@dataclass(frozen=True, kw_only=True)
class Judged:
    """One judged schedule as a sweep records it: its verdict, violations, crash labels and
    recovery paths, and (a failure's only: a report shows no passing timeline) its timeline.
    One form wherever it was judged -- the naive path, a forked child's outcome file, a campaign
    unit's document -- so each records exactly what the one-process sweep records.

    The harness's own failure is verdict ``error`` with an I0 violation saying what failed;
    otherwise the verdict is its violations' (``verdict_of``)."""

    verdict: Verdict
    violations: tuple[Violation, ...] = ()
    labels: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    timeline: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert isinstance(self.verdict, Verdict), self.verdict
        if self.verdict is Verdict.ERROR:
            assert self.violations, "a harness error says what failed"
        else:
            assert self.verdict is verdict_of(self.violations), (self.verdict, self.violations)
        assert not self.timeline or self.verdict is not Verdict.PASS, "a pass has no timeline"

    @classmethod
    def of_run(cls, outcome: ScheduleOutcome, result: RunResult) -> Judged:
        """What is recorded of a judged run (``sim.judgement.judge``)."""
        failed = outcome.verdict != Verdict.PASS
        return cls(
            verdict=Verdict(outcome.verdict),
            violations=tuple(outcome.violations),
            labels=tuple(outcome.labels),
            paths=tuple(sorted(recovery_paths(result))),
            timeline=tuple(timeline(result)) if failed else (),
        )

    @classmethod
    def harness_error(cls, why: str) -> Judged:
        """The harness's own failure (a child that raised, hung or wrote no outcome)."""
        return cls(verdict=Verdict.ERROR, violations=(Violation("I0", why),))

    @classmethod
    def of_violations(cls, violations: Sequence[Violation]) -> Judged:
        """A schedule judged by ``violations`` alone (no run to take labels from)."""
        return cls(verdict=verdict_of(violations), violations=tuple(violations))

    def with_violations(self, more: Sequence[Violation]) -> Judged:
        """The same schedule with ``more`` violations found later (I10's second run)."""
        violations = (*self.violations, *more)
        return replace(self, verdict=verdict_of(violations), violations=violations)

    def to_json(self) -> dict[str, Any]:
        """The one JSON form (a forked child's outcome file, a campaign unit's document)."""
        return {
            "verdict": str(self.verdict),
            "violations": [v.to_json() for v in self.violations],
            "labels": list(self.labels),
            "paths": list(self.paths),
            "timeline": list(self.timeline),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Judged:
        return cls(
            verdict=Verdict(doc["verdict"]),
            violations=tuple(Violation.from_json(v) for v in doc["violations"]),
            labels=tuple(doc["labels"]),
            paths=tuple(doc["paths"]),
            timeline=tuple(doc["timeline"]),
        )


def record_outcome(out: ScenarioSweep, schedule: Schedule, judged: Judged) -> None:
    """Record one judged schedule: its counts, its cell of the crash matrix and, if it failed,
    its ``Failure`` with the line that replays it."""
    verdict, violations = judged.verdict, judged.violations
    out.schedules += 1
    for path in judged.paths:
        out.recovery_paths[path] = out.recovery_paths.get(path, 0) + 1
    out.verdicts[verdict] += 1
    points = schedule.points
    if points and schedule.points[:-1] == tuple(out.base_points):
        p = points[-1]
        cell = {"index": p.index, "when": p.when, "kind": p.column, "verdict": verdict}
        if p.tear and out.matrix and same_cell(out.matrix[-1], cell):
            # Every enumerated tear of a point shares one cell: the worst verdict shows.
            worst = min(out.matrix[-1]["verdict"], verdict, key=VERDICT_ORDER.index)
            out.matrix[-1]["verdict"] = worst
        else:
            out.matrix.append(cell)
    if verdict is Verdict.PASS:
        return
    first = violations[0]  # a failure has one at least (``Judged``)
    out.failures.append(
        Failure(
            scenario=out.name,
            store=out.store,
            seed=out.seed,
            schedule=schedule.text(),
            verdict=verdict,
            invariant=first.invariant,
            explanation=first.explanation,
            witness=list(first.witness),
            expected=first.expected,
            actual=first.actual,
            repro=repro_command(out.ref or out.name, out.seed, out.store, schedule),
            crash_labels=list(judged.labels),
            timeline=list(judged.timeline),
            invariants=sorted({v.invariant for v in violations}, key=invariant_order),
        )
    )


def same_cell(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a["index"], a["when"], a["kind"]) == (b["index"], b["when"], b["kind"])


def invariant_order(invariant: str) -> int:
    return int(invariant[1:]) if invariant[1:].isdigit() else 99
