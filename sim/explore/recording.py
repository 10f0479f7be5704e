"""What a sweep records of each schedule it judged (docs/architecture.md, 2.5): the counts, the
crash matrix, the failures with their repro lines. One home for the recording, whichever way the
outcomes were computed -- the naive path as it runs, the fast paths after their children, a
campaign's merge of many units (``sim.explore.campaign``) -- so each records exactly what the
one-process sweep records."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from sim.judgement.judge import ScheduleOutcome, recovery_paths, timeline
from sim.judgement.oracles import VERDICT_ORDER, Verdict, Violation, verdict_of
from sim.judgement.repro import replay_command
from sim.run.runner import RunResult
from sim.world.faults import CrashPoint, Schedule, parse_schedule


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


P = TypeVar("P", "ReferenceRun", "Expansion", "Sample")

#: A part's field is written under this JSON key when it is not the field's own name (the
#: report's keys predate the parts: ``reference_fingerprint`` is ``ReferenceRun.fingerprint``).
JSON_KEY = "json_key"
#: A part's field written in another form than its value (``base_points`` as a schedule's text).
JSON_FORM = "json_form"


def flat_json(part: ReferenceRun | Expansion | Sample) -> dict[str, Any]:
    """A part of a sweep's result as the flat keys of its report, field by field."""
    out: dict[str, Any] = {}
    for f in fields(part):
        value = getattr(part, f.name)
        form = f.metadata.get(JSON_FORM)
        out[f.metadata.get(JSON_KEY, f.name)] = value if form is None else form.dump(value)
    return out


def from_flat_json(cls: type[P], doc: dict[str, Any]) -> P:
    """The part ``flat_json`` wrote (a campaign unit's description), every key required."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        value = doc[f.metadata.get(JSON_KEY, f.name)]
        form = f.metadata.get(JSON_FORM)
        values[f.name] = copy.deepcopy(value) if form is None else form.load(value)
    return cls(**values)


@dataclass(frozen=True)
class _PointsAsSchedule:
    """``base_points`` in a report: the base schedule's text (``""`` for none)."""

    @staticmethod
    def dump(points: list[CrashPoint]) -> str:
        return Schedule(tuple(points)).text()

    @staticmethod
    def load(text: str) -> list[CrashPoint]:
        return list(parse_schedule(text).points)


@dataclass
class ReferenceRun:
    """What the sweep's fault-free run showed, before any crash schedule: its boundaries (each
    a crash point), their labels and kinds, its fingerprint and outcome, the effects it made,
    the scenario's own base crashes every schedule starts with, and whether the run itself
    failed (then no crash schedule is run)."""

    boundaries: int = 0
    boundary_kinds: dict[str, int] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    fingerprint: str = field(default="", metadata={JSON_KEY: "reference_fingerprint"})
    outcome: dict[str, Any] = field(default_factory=dict, metadata={JSON_KEY: "reference_outcome"})
    effects: dict[str, int] = field(default_factory=dict)
    base_points: list[CrashPoint] = field(
        default_factory=list, metadata={JSON_KEY: "base_schedule", JSON_FORM: _PointsAsSchedule}
    )
    failed: bool = field(default=False, metadata={JSON_KEY: "reference_failed"})


@dataclass
class Expansion:
    """How the crash kinds asked for became schedules: the kinds this store or scenario cannot
    take (skipped, and said so), the enumerated power-loss tears run beyond each point's seeded
    draw, and the schedules not run because an earlier one leaves the same world
    (``sim.explore.folding``: they inherit its verdict, and count in ``schedules``)."""

    skipped_power: bool = False
    skipped_storage: bool = False
    skipped_pause: bool = False  # asked for, but the scenario has no standby to take over
    tear_schedules: int = 0
    folded: int = 0


@dataclass
class Sample:
    """The CI tier (``sim.explore.tier``): whether the sweep judged a sample of the crash points,
    the points listed and judged (run or folded), and the strata and recovery classes the trace
    offers and the judged points cover."""

    sampled: bool = False
    points_total: int = 0
    points_run: int = 0
    strata_total: int = 0
    strata_covered: int = 0
    recovery_classes_total: int = 0
    recovery_classes_covered: int = 0


@dataclass
class ScenarioSweep:
    """One scenario's sweep on one store.

    What the sweep was asked -- ``name``, ``store``, ``seed``, ``depth``, ``crash_kinds``,
    ``determinism`` (how I10 was checked), ``ref`` (how repro lines name the scenario) -- and
    what it found -- ``schedules``, ``verdicts``, ``failures``, the crash ``matrix``,
    ``recovery_paths`` -- stay flat: every report reads them. The rest is grouped by what it
    describes: ``reference`` (the fault-free run), ``expansion`` (how kinds became schedules),
    ``sample`` (the CI tier's share), and ``prune`` (``--prune rejoin``'s counts: crashed runs
    stopped where they rejoined the fault-free run, runs checked to their end, and the harness
    error that turned pruning off; None for an exact sweep). Its report (``to_json``) keeps
    every key flat, as it always has."""

    name: str
    store: str
    seed: int
    depth: int
    crash_kinds: list[str]
    determinism: str = "full"
    ref: str = ""
    reference: ReferenceRun = field(default_factory=ReferenceRun)
    expansion: Expansion = field(default_factory=Expansion)
    sample: Sample = field(default_factory=Sample)
    schedules: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICT_ORDER, 0))
    failures: list[Failure] = field(default_factory=list)
    matrix: list[dict[str, Any]] = field(default_factory=list)
    recovery_paths: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    prune: dict[str, Any] | None = None

    def verdict_counts(self) -> str:
        """``safety 2, pass 120``: the verdicts that occurred, for progress lines and messages."""
        return ", ".join(f"{verdict} {n}" for verdict, n in self.verdicts.items() if n) or "none"

    def description_json(self) -> dict[str, Any]:
        """What describes the sweep before any schedule is recorded (a campaign unit's
        description, ``sim.explore.campaign.document``): what was asked, the fault-free run,
        the expansion."""
        asked = {
            "name": self.name,
            "store": self.store,
            "seed": self.seed,
            "depth": self.depth,
            "crash_kinds": self.crash_kinds,
            "determinism": self.determinism,
        }
        return {**asked, **flat_json(self.reference), **flat_json(self.expansion)}

    def to_json(self) -> dict[str, Any]:
        found = {
            "schedules": self.schedules,
            "verdicts": self.verdicts,
            "failures": [f.to_json() for f in self.failures],
            "matrix": self.matrix,
            "recovery_paths": dict(sorted(self.recovery_paths.items())),
        }
        return {
            **self.description_json(),
            **found,
            **flat_json(self.sample),
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
    if points and schedule.points[:-1] == tuple(out.reference.base_points):
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
