"""A campaign end to end: prepare the directory, skip the units already done, run the rest on an
engine, file each result as it arrives, and merge once every unit of the plan has one.

A campaign run into a directory holding results of the same plan resumes: only units without a
verified result run (a driver that died, by SIGKILL or a power cut, loses only the units in
flight). A shard runs its share of the plan only (``plan.shard_of``); its directory is merged
with the others' by ``merge_directories``, which is also how a campaign's results move between
machines: unit files are self-contained and content-addressed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.explore.campaign.document import UnitFileError, verified
from sim.explore.campaign.files import CampaignDir, open_directories
from sim.explore.campaign.merge import Merged, merge
from sim.explore.campaign.plan import Plan, Unit, shard_of
from sim.explore.campaign.tasks import Engine, Task
from sim.judgement.oracles import VERDICT_ORDER

Notice = Callable[[str], None]


@dataclass
class CampaignResult:
    """What a campaign (or a merge) did and found."""

    plan: Plan
    selected: list[Unit] = field(default_factory=list)  # this run's share of the plan
    skipped: int = 0  # of the share, units whose result was there already
    ran: list[str] = field(default_factory=list)  # addresses of the units run now
    bad: list[tuple[str, str]] = field(default_factory=list)  # (file, why): run again
    errors: list[tuple[str, str]] = field(default_factory=list)  # (unit label, error)
    conflicts: list[str] = field(default_factory=list)  # nondeterminism between results
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # every result there now
    merged: Merged | None = None  # once every unit of the plan has a result

    @property
    def missing(self) -> list[Unit]:
        return [unit for unit in self.plan.units if unit.address not in self.results]


def run_campaign(
    plan: Plan,
    directory: Path,
    *,
    engine: Engine,
    shard: tuple[int, int] | None = None,
    notice: Notice | None = None,
) -> CampaignResult:
    """Run ``plan`` (or shard ``(k, n)`` of it) into ``directory``; merge if it is complete."""
    tell = notice or _silent
    place = CampaignDir(directory)
    place.prepare(plan)
    scan = place.scan(plan)
    result = CampaignResult(plan, results=scan.done, bad=scan.bad)
    for path, why in scan.bad:
        tell(f"{path}: {why}; not merged, its unit runs again")
    result.selected = shard_of(plan.units, shard=shard[0], shards=shard[1]) if shard else plan.units
    todo = [unit for unit in result.selected if unit.address not in scan.done]
    result.skipped = len(result.selected) - len(todo)
    if result.skipped:
        tell(f"resuming: {result.skipped} of {len(result.selected)} units already done")

    def done(task: Task, doc: dict[str, Any] | None, error: str | None) -> str:
        unit = task.unit
        if doc is not None:
            try:
                doc = verified(doc, address=unit.address)
            except UnitFileError as exc:
                doc, error = None, f"its result does not verify: {exc}"
        if doc is None:
            result.errors.append((unit.label, error or "no result"))
            return "ERROR (the unit did not finish; it runs again next time)"
        conflict = place.save(doc)
        if conflict is not None:
            result.conflicts.append(conflict)
        result.results[unit.address] = doc
        result.ran.append(unit.address)
        return unit_summary(doc)

    engine.run([Task(unit, plan.task(unit)) for unit in todo], done)
    _merge_if_complete(result)
    return result


def merge_directories(
    sources: Iterable[Path], target: Path, *, notice: Notice | None = None
) -> CampaignResult:
    """Join campaign directories of one plan (its shards) into ``target``: every verified unit
    file copied there (``target`` may be one of them), bad files reported and left out, two
    results of one unit that differ reported as conflicts; merged if complete."""
    tell = notice or _silent
    plan, dirs = open_directories(sources)
    place = CampaignDir(target)
    place.prepare(plan)
    into = place.scan(plan)
    result = CampaignResult(plan, selected=list(plan.units), results=into.done, bad=into.bad)
    for one in dirs:
        scan = one.scan(plan) if one.root.resolve() != place.root.resolve() else into
        if scan is not into:
            result.bad += scan.bad
        for address, doc in scan.done.items():
            if address not in result.results:
                place.save(doc)
                result.results[address] = doc
                continue
            conflict = place.conflict(result.results[address], doc)
            if conflict is not None:
                result.conflicts.append(f"{one.root}: {conflict}")
    for path, why in result.bad:
        tell(f"{path}: {why}; not merged")
    _merge_if_complete(result)
    return result


def _merge_if_complete(result: CampaignResult) -> None:
    if result.missing:
        return
    result.merged = merge(result.plan, result.results)
    result.conflicts += result.merged.conflicts


def unit_summary(doc: dict[str, Any]) -> str:
    """``312 schedules: pass 310, safety 2``: a unit's verdicts, for its progress line."""
    counts = dict.fromkeys(VERDICT_ORDER, 0)
    outcome = doc["result"]
    outcomes = [item for _, item in outcome["outcomes"]]
    if outcome["reference"] is not None:
        outcomes.append(outcome["reference"])
    for item in outcomes:
        counts[item["verdict"]] += 1
    shown = ", ".join(f"{verdict} {n}" for verdict, n in counts.items() if n) or "none"
    return f"{len(outcomes)} schedules: {shown}"


def _silent(text: str) -> None:
    del text
