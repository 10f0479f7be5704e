"""``results.json``, and the few read helpers every other format shares.

The document is written as it is (indented, keys sorted, UTF-8 kept readable) so that
``json.loads`` gives back exactly the dictionary that was passed in.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sim.explore.results import DISPLAY_VERDICTS as DISPLAY_VERDICTS
from sim.judgement.invariants import is_registered, title_of

# Failures shown in full per scenario x store; the rest are listed one line each (all of them
# stay in results.json). A broken runtime under a depth-2 sweep fails thousands of schedules.
DETAIL_LIMIT = 50

REFERENCE_SCHEDULE = "none"  # Schedule().text(): the fault-free reference run

# Why a store's results carry ``skipped_power``/``skipped_storage`` other than Postgres (none
# today: ``StoreKind.can_inject`` gives the file store and SQLite every kind).
SKIPPED_NOTE = "some crash kinds asked for are not simulated on this store (StoreKind.can_inject)"
# Why a postgres sweep carries ``skipped_power``/``skipped_storage`` (docs/crash-model.md).
SKIPPED_POSTGRES_NOTE = (
    "power loss and storage faults not simulated: the PostgreSQL server is the durable service, "
    "outside the simulated machine (worker-process kills are simulated)"
)


def skipped_note(store: str) -> str:
    """Why some crash kinds asked for were not run on ``store`` (said in every report)."""
    return SKIPPED_POSTGRES_NOTE if store == "postgres" else SKIPPED_NOTE


def sampled_note(sweep: dict[str, Any]) -> str:
    """What the CI tier ran of a sampled scenario x store (``sim.explore.tier``), or ``""`` for
    an exhaustive one: a report must not let a sample pass for the whole sweep."""
    if not sweep.get("sampled"):
        return ""
    return (
        f"sampled: {sweep.get('points_run', 0)} of {sweep.get('points_total', 0)} crash points, "
        f"{sweep.get('strata_covered', 0)} of {sweep.get('strata_total', 0)} strata, "
        f"{sweep.get('recovery_classes_covered', 0)} of {sweep.get('recovery_classes_total', 0)} "
        "recovery classes (the CI tier; durable-sim sweep --exhaustive runs every point)"
    )


def render(results: dict[str, Any]) -> str:
    return json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def visible(value: Any) -> str:
    """``str(value)`` with control characters (ANSI escapes, NULs, lone surrogates) spelled as
    ``\\x1b``-style escapes: they can neither break XML 1.0 nor drive a terminal or browser."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(value))


def run_name(sweep: dict[str, Any]) -> str:
    """``scenario[store]``: how one scenario x store result is named in every report."""
    return f"{sweep.get('name', '?')}[{sweep.get('store', '?')}]"


def invariant_title(invariant: str) -> str:
    """``I1 effects match policy``; an unknown id (a document from another version) is shown as
    it is."""
    return f"{invariant} {title_of(invariant)}" if is_registered(invariant) else invariant


def failures_by_schedule(sweep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The (first) failure recorded for each schedule text."""
    found: dict[str, dict[str, Any]] = {}
    for failure in sweep.get("failures", []):
        found.setdefault(str(failure.get("schedule", "")), failure)
    return found


def totals(results: dict[str, Any]) -> dict[str, Any]:
    """The document's totals, or totals summed from its scenarios when it carries none."""
    given = results.get("totals")
    if given:
        verdicts = dict.fromkeys(DISPLAY_VERDICTS, 0) | dict(given.get("verdicts", {}))
        return {
            "schedules": given.get("schedules", 0),
            "verdicts": verdicts,
            "wall_s": given.get("wall_s", 0.0),
        }
    verdicts = dict.fromkeys(DISPLAY_VERDICTS, 0)
    schedules, wall = 0, 0.0
    for sweep in results.get("scenarios", []):
        schedules += sweep.get("schedules", 0)
        wall += sweep.get("wall_s", 0.0)
        for verdict, count in sweep.get("verdicts", {}).items():
            verdicts[verdict] = verdicts.get(verdict, 0) + count
    return {"schedules": schedules, "verdicts": verdicts, "wall_s": round(wall, 3)}


def skipped_power_stores(results: dict[str, Any]) -> list[str]:
    """Stores (in order of first appearance) on which some crash kinds asked for were not run."""
    stores: list[str] = []
    for sweep in results.get("scenarios", []):
        store = str(sweep.get("store", "?"))
        if (sweep.get("skipped_power") or sweep.get("skipped_storage")) and store not in stores:
            stores.append(store)
    return stores
