"""The unit result document: what one unit computed, as JSON, with a checksum of its own content.

A unit file (``DIR/units/<address>.json``) is::

    {"format": "durable-sim-campaign-unit", "schema_version": 1, "address": ..., "spec": {...},
     "result": {"sweep": <description>, "reference": <outcome> | null, "prefix": [...],
                "outcomes": [[schedule, <outcome>], ...], "total": N, "wall_s": ...},
     "checksum": <sha256 of the canonical JSON of everything else>}

The description is the sweep's result before anything is recorded (``sweep.sweep_part``); an
outcome is what ``sim.explore.recording`` records of one judged schedule. Everything is kept in
the order it was computed (dictionaries too: reports list boundary kinds in trace order), so the
merge records exactly what the one-process sweep records; the checksum is over the canonical
(sorted) form, so it does not depend on that order.
"""

from __future__ import annotations

from typing import Any

from sim.explore.campaign.address import digest
from sim.explore.recording import (
    Expansion,
    Judged,
    ReferenceRun,
    ScenarioSweep,
    from_flat_json,
)
from sim.explore.sweep import SweepPart
from sim.judgement.oracles import Violation

FORMAT = "durable-sim-campaign-unit"
#: 2: a sweep unit's spec is its plan (``address.sweep_spec``); the description carries
#: ``reference_failed``.
SCHEMA_VERSION = 2


class UnitFileError(ValueError):
    """A unit document that cannot be trusted: not one, truncated, or its checksum or address
    does not match its content."""


def part_json(part: SweepPart, *, wall_s: float) -> dict[str, Any]:
    """A sweep part (``sim.explore.sweep.sweep_part``) as a unit's ``result``."""
    return {
        "sweep": part.sweep.description_json(),
        "reference": None if part.reference is None else part.reference.to_json(),
        "prefix": [v.to_json() for v in part.prefix],
        "outcomes": [[text, judged.to_json()] for text, judged in part.outcomes],
        "total": part.total,
        "wall_s": round(wall_s, 3),
    }


def described(doc: dict[str, Any], *, ref: str) -> ScenarioSweep:
    """A sweep result holding a unit's description (``ScenarioSweep.description_json``) and
    nothing recorded: what ``record_part`` records into."""
    return ScenarioSweep(
        doc["name"],
        doc["store"],
        doc["seed"],
        doc["depth"],
        list(doc["crash_kinds"]),
        determinism=doc["determinism"],
        ref=ref,
        reference=from_flat_json(ReferenceRun, doc),
        expansion=from_flat_json(Expansion, doc),
    )


def part_from_json(result: dict[str, Any], *, ref: str) -> SweepPart:
    reference = result["reference"]
    return SweepPart(
        sweep=described(result["sweep"], ref=ref),
        reference=None if reference is None else Judged.from_json(reference),
        prefix=[Violation.from_json(v) for v in result["prefix"]],
        outcomes=[(text, Judged.from_json(doc)) for text, doc in result["outcomes"]],
        total=result["total"],
    )


def unit_document(address: str, spec: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    doc = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "address": address,
        "spec": spec,
        "result": result,
    }
    doc["checksum"] = digest(doc)
    return doc


def verified(doc: Any, *, address: str) -> dict[str, Any]:
    """``doc`` if it is the unit document of ``address`` and its checksum holds; else
    ``UnitFileError`` saying what is wrong."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UnitFileError("not a campaign unit document")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise UnitFileError(f"schema version {doc.get('schema_version')!r}, not {SCHEMA_VERSION}")
    content = {key: value for key, value in doc.items() if key != "checksum"}
    if doc.get("checksum") != digest(content):
        raise UnitFileError("its checksum does not match its content")
    if doc.get("address") != address or digest(doc.get("spec")) != address:
        raise UnitFileError("its address does not match its unit")
    if not isinstance(doc.get("result"), dict):
        raise UnitFileError("it has no result")
    return doc


def timings_aside(value: Any) -> Any:
    """``value`` (a results document, a unit's result) without its wall times (every ``wall_s``
    key, at any depth) and as JSON has it: what two runs of the same work must agree on."""
    if isinstance(value, dict):
        return {key: timings_aside(item) for key, item in value.items() if key != "wall_s"}
    if isinstance(value, list | tuple):
        return [timings_aside(item) for item in value]
    return value
