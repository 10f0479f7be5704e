"""Unit results back into sweep results: what the one-process sweep of the same scenarios records,
schedule for schedule, in its order (docs/campaigns.md, "Soundness").

Per sweep (scenario x store), the units' outcomes are put in the sweep's order -- boundary index,
before/after, crash kind, tear: the order both fast paths record in -- and recorded by the same
code the sweep records with (``sim.explore.sweep.record_part``), after the fault-free run's
outcome (its unit is the sweep's first) and the check of the forking run's prefix. Units that
disagree about their sweep -- its traced run, its fold plan, which points exist -- are
nondeterminism, reported as conflicts, never silently resolved. The document is ordered by plan
and sweep order, never by the order units finished in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.explore.campaign.document import described, part_from_json
from sim.explore.campaign.plan import Plan, Unit
from sim.explore.recording import ScenarioSweep
from sim.explore.sweep import SweepPart, record_part, swept_kinds
from sim.judgement.oracles import Verdict
from sim.world.faults import parse_schedule


@dataclass
class Merged:
    """The sweeps of a plan, in plan order, and the nondeterminism the merge found."""

    sweeps: list[ScenarioSweep] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    wall_s: float = 0.0  # the units' own wall times, summed


def groups(plan: Plan) -> list[tuple[tuple[str, str], list[Unit]]]:
    """The plan's units by sweep (scenario ref, store), in plan order."""
    out: dict[tuple[str, str], list[Unit]] = {}
    for unit in plan.units:
        out.setdefault(unit.group, []).append(unit)
    return list(out.items())


def merge(plan: Plan, results: Mapping[str, dict[str, Any]]) -> Merged:
    """Every sweep of ``plan`` from ``results`` (unit document by address; every unit's)."""
    merged = Merged()
    for (ref, store), units in groups(plan):
        docs = [results[unit.address] for unit in units]
        out, conflicts = merge_sweep(ref, docs)
        out.wall_s = sum(doc["result"]["wall_s"] for doc in docs)
        merged.sweeps.append(out)
        merged.conflicts += [f"{out.name}[{store}]: {text}" for text in conflicts]
        merged.wall_s += out.wall_s
    return merged


def merge_sweep(ref: str, docs: list[dict[str, Any]]) -> tuple[ScenarioSweep, list[str]]:
    """One sweep from its units' documents (the first records the fault-free run)."""
    parts = [part_from_json(doc["result"], ref=ref) for doc in docs]
    first = parts[0]
    out = first.sweep
    combined = SweepPart(out, reference=first.reference, total=first.total)
    conflicts: list[str] = []
    if first.reference is None or first.reference.verdict is not Verdict.PASS:
        # The fault-free run failed: the sweep is that one outcome, whatever the others ran.
        record_part(out, combined)
        return out, conflicts
    described_as = docs[0]["result"]["sweep"]
    for doc, part in zip(docs[1:], parts[1:], strict=True):
        if doc["result"]["sweep"] != described_as or part.total != first.total:
            conflicts.append(
                f"unit {doc['address'][:12]} traced another run than the first unit "
                "(boundaries, fold plan or fingerprints differ)"
            )
    combined.prefix = next((part.prefix for part in parts if part.prefix), [])
    outcomes = [item for part in parts for item in part.outcomes]
    seen: set[str] = set()
    for text, _ in outcomes:
        if text in seen:
            conflicts.append(f"schedule {text} was run by two units")
        seen.add(text)
    if len(seen) != first.total:
        conflicts.append(f"the units ran {len(seen)} of the sweep's {first.total} schedules")
    order = _sweep_order(out)
    combined.outcomes = sorted(outcomes, key=lambda item: order(item[0]))
    record_part(out, combined)
    return out, conflicts


def _sweep_order(out: ScenarioSweep) -> Any:
    """The key that puts schedules in the order both fast paths record them: boundary index,
    before before after, the crash kinds in the sweep's order, the enumerated tears last."""
    kinds = swept_kinds(out)  # the sweep's own decision (store and standby), not a second one
    position = {kind: n for n, kind in enumerate(kinds)}

    def key(text: str) -> tuple[int, int, int, int]:
        point = parse_schedule(text).points[-1]
        return (point.index, 0 if point.when == "before" else 1, position[point.kind], point.tear)

    return key


def unit_failures(doc: dict[str, Any]) -> ScenarioSweep:
    """One unit's outcomes recorded on their own (a shard's view, before any merge): its
    failures with their repro lines, its verdict counts."""
    ref = doc["spec"]["plan"]["ref"]
    part = part_from_json(doc["result"], ref=ref)
    out = described(doc["result"]["sweep"], ref=ref)
    record_part(out, SweepPart(out, part.reference, part.prefix, part.outcomes, part.total))
    return out
