"""What a sweep records of each schedule it judged (docs/architecture.md, 2.5): the counts, the
crash matrix, the failures with their repro lines. One home for the recording, whichever way the
outcomes were computed -- the naive path as it runs, the fast paths after their children, a
campaign's merge of many units (``sim.explore.campaign``) -- so each records exactly what the
one-process sweep records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.judgement.oracles import VERDICT_ORDER, Violation
from sim.judgement.repro import replay_command
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


#: What is recorded of one judged schedule: verdict, violations, crash labels, recovery paths and
#: (for a failure) its timeline.
Outcome = tuple[str, list[Violation], list[str], list[str], list[str]]


def record_outcome(out: ScenarioSweep, schedule: Schedule, outcome: Outcome) -> None:
    verdict, violations, labels, paths, lines = outcome
    record_parts(out, schedule, verdict, violations, labels, paths, lambda: lines)


def record_parts(
    out: ScenarioSweep,
    schedule: Schedule,
    verdict: str,
    violations: list[Violation],
    labels: list[str],
    paths: list[str],
    lines: Callable[[], list[str]],
) -> None:
    out.schedules += 1
    for path in paths:
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
    if verdict == "pass":
        return
    first = violations[0] if violations else None
    out.failures.append(
        Failure(
            scenario=out.name,
            store=out.store,
            seed=out.seed,
            schedule=schedule.text(),
            verdict=verdict,
            invariant=first.invariant if first else "?",
            explanation=first.explanation if first else "",
            witness=list(first.witness) if first else [],
            expected=first.expected if first else "",
            actual=first.actual if first else "",
            repro=repro_command(out.ref or out.name, out.seed, out.store, schedule),
            crash_labels=labels,
            timeline=lines(),
            invariants=sorted({v.invariant for v in violations}, key=invariant_order),
        )
    )


def same_cell(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a["index"], a["when"], a["kind"]) == (b["index"], b["when"], b["kind"])


def invariant_order(invariant: str) -> int:
    return int(invariant[1:]) if invariant[1:].isdigit() else 99
