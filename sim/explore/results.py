"""The results document: one sweep's findings as the JSON every report view renders.

It lives next to the sweep result (``sim.explore.sweep.ScenarioSweep``) so that a library caller
of ``sweep()`` builds the same ``results.json`` the command line writes::

    stores = ("file", "sqlite")
    sweeps = [sweep(SweepPlan(scenario=load_scenario(n), store=s)) for n in names for s in stores]
    document = results_document(sweeps, wall_s=elapsed_s)
    sim.outputs.report.write_report(out_dir, document)

The run's configuration is read from the sweeps themselves, so a document cannot claim a seed,
depth or crash kind its sweeps were not run with; sweeps that disagree are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, TypeVar

from sim.errors import UserError
from sim.explore.sweep import ScenarioSweep
from sim.judgement.oracles import VERDICT_ORDER

#: The results document's schema; bump it when a key changes meaning or goes away.
SCHEMA_VERSION = 1

#: Verdicts in the order the document and every report view list them (pass first, then the
#: failures); ``VERDICT_ORDER`` is by severity.
DISPLAY_VERDICTS = ("pass", "safety", "liveness", "nondeterminism", "error")
assert set(DISPLAY_VERDICTS) == set(VERDICT_ORDER)


T = TypeVar("T")


class ResultsError(UserError, ValueError):
    """Sweeps that cannot share one document (different seeds, depths, crash kinds, ...)."""


def tool_version() -> str:
    """The installed durable-sim version, or ``0+unknown`` when run from a bare checkout."""
    try:
        return metadata.version("durable-sim")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def results_document(
    sweeps: Sequence[ScenarioSweep], *, wall_s: float, fast: bool = True
) -> dict[str, Any]:
    """The results document of ``sweeps`` (in the order given), which took ``wall_s`` seconds.
    ``fast`` says whether the forked fast path ran them (a sweep result does not record it)."""
    if not sweeps:
        raise ResultsError("a results document needs at least one sweep")
    verdicts = dict.fromkeys(DISPLAY_VERDICTS, 0)
    for one in sweeps:
        for verdict, count in one.verdicts.items():
            verdicts[verdict] += count
    determinism = _shared(sweeps, "determinism", lambda s: s.determinism)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "durable-sim",
        "tool_version": tool_version(),
        "config": {
            "seed": _shared(sweeps, "seed", lambda s: s.seed),
            "depth": _shared(sweeps, "depth", lambda s: s.depth),
            "crash": _shared(sweeps, "crash kinds", lambda s: ",".join(s.crash_kinds)),
            "store": _store_config(sweeps),
            "determinism_check": determinism != "off",
            "determinism": determinism,
            "fast": fast,
        },
        "scenarios": [one.to_json() for one in sweeps],
        "totals": {
            "schedules": sum(one.schedules for one in sweeps),
            "folded": sum(one.expansion.folded for one in sweeps),
            # The CI tier (``sim.explore.tier``): crash points listed and judged, and how many
            # scenario x store sweeps ran a sample of theirs.
            "points_total": sum(one.sample.points_total for one in sweeps),
            "points_run": sum(one.sample.points_run for one in sweeps),
            "sampled": sum(one.sample.sampled for one in sweeps),
            "verdicts": verdicts,
            "failures": sum(len(one.failures) for one in sweeps),
            "wall_s": round(wall_s, 3),
        },
    }


def _shared(sweeps: Sequence[ScenarioSweep], what: str, read: Callable[[ScenarioSweep], T]) -> T:
    values = [read(one) for one in sweeps]
    if any(value != values[0] for value in values):
        shown = ", ".join(sorted({str(v) for v in values}))
        raise ResultsError(f"the sweeps were run with different {what} ({shown})")
    return values[0]


def _store_config(sweeps: Sequence[ScenarioSweep]) -> str:
    """``both`` when file and SQLite sweeps are in the document, else the one store's name."""
    stores = sorted({one.store for one in sweeps})
    return "both" if len(stores) > 1 else stores[0]
