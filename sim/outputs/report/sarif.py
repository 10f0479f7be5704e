"""The SARIF 2.1.0 view of a sweep: one result per failing schedule, for code scanning (GitHub's
``upload-sarif``, an editor's SARIF viewer), where users already look for findings.

Why SARIF and not a fifth report file: a report is read as a whole, once; a SARIF log is merged
by the code-scanning service into the repository's alerts, each at a line of a file, kept open
while it recurs and closed when it stops. So each result must name a file and line of the
repository and be the same from one run to the next:

- **rules** are the invariants, every one of the registry (``sim.judgement.invariants``) in its
  order, so a rule's index never moves: its title is the short description, what it verifies
  the full one, and its help the registry's text (verifies, then what it leaves to the others);
- **results** are the failing schedules: the rule is the failure's headline invariant, the
  message says the verdict, the explanation, the scenario, store and schedule, and the replay
  line (``Failure.repro``) that reproduces it; ``partialFingerprints`` names the failure by
  scenario, store, schedule and invariant, so the service tracks it across runs;
- **locations** (``place``): a scenario's failure at the line of the scenario's name in its file
  (a bundled one in ``sim/scenarios/``, a user's by the path given); a user's app's failure
  whose explanation names a declared effect at the line where the app calls it (the fault-free
  run's ``effect_sites``, ``sim.targets.sweep.app_outcome``), any other at the app's entry
  point. A path under the working directory (a CI job's checkout) is relative to it, as the
  service resolves it; any other is an absolute ``file:`` URI.

Deterministic: the same sweep gives the same bytes -- no time, no run-time path but the files
located, rules in registry order, results sorted, keys sorted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.explore.results import tool_version
from sim.judgement.invariants import INVARIANTS, Invariant, is_registered, title_of
from sim.world.scenario import SCENARIO_DIR

SARIF_VERSION = "2.1.0"
#: The schema's own id (``tests/data/sarif-schema-2.1.0.json``, which the tests validate with).
SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
#: A relative location is relative to the checkout the results are uploaded from.
SRCROOT = "%SRCROOT%"
#: The rule of a failure with no invariant: a schedule the harness could not judge.
UNJUDGED = "unjudged"
#: A harness error is no broken promise of the runtime's, so it is a warning, not an error.
LEVELS = {"safety": "error", "liveness": "error", "nondeterminism": "error", "error": "warning"}
FINGERPRINT = "durableSim/v1"
#: ``--sarif`` of every command that writes a report (sweep, campaign, merge, target sweep).
SARIF_HELP = (
    "also write the failures as a SARIF 2.1.0 log to FILE, for code scanning: a result per "
    "failing schedule at its scenario file's line (an app's: the effect's call site)"
)


@dataclass(frozen=True)
class Place:
    """A result's location: a file (relative to ``SRCROOT``, or an absolute URI) and a line."""

    uri: str
    line: int
    relative: bool


def render(sweeps: Sequence[Any]) -> str:
    """The SARIF log of ``sweeps`` (``ScenarioSweep``s: name, store, ref, failures,
    reference_outcome) as the text of a ``.sarif`` file."""
    return json.dumps(sarif_log(sweeps), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def sarif_log(sweeps: Sequence[Any]) -> dict[str, Any]:
    """One run of the tool ``durable-sim``: every rule, a result per failure."""
    results = [_result(one, failure) for one in sweeps for failure in one.failures]
    results.sort(key=_order)
    unjudged = any(r["ruleId"] == UNJUDGED for r in results)
    rules = [_rule(record) for record in INVARIANTS] + ([_unjudged_rule()] if unjudged else [])
    index = {rule["id"]: n for n, rule in enumerate(rules)}
    for result in results:
        result["ruleIndex"] = index[result["ruleId"]]
    driver = {"name": "durable-sim", "version": tool_version(), "rules": rules}
    return {
        "$schema": SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }


def _rule(record: Invariant) -> dict[str, Any]:
    help_text = f"{record.title}. Verifies: {record.verifies}. Leaves: {record.leaves}."
    help_md = (
        f"**{record.code} {record.title}** ({record.verdict}; applies to {_scope(record)})\n\n"
        f"**Verifies:** {record.verifies}.\n\n**Leaves to the other invariants:** "
        f"{record.leaves}."
    )
    return {
        "id": record.code,
        "name": record.title,
        "shortDescription": {"text": record.title},
        "fullDescription": {"text": record.verifies},
        "help": {"text": help_text, "markdown": help_md},
        "defaultConfiguration": {"level": LEVELS[record.verdict]},
        "properties": {"verdict": record.verdict, "tags": ["durable-sim", record.verdict]},
    }


def _scope(record: Invariant) -> str:
    return {"runtime": "the runtime", "target": "targets", "both": "the runtime and targets"}[
        record.scope
    ]


def _unjudged_rule() -> dict[str, Any]:
    text = "a schedule the harness could not judge: a run of it raised in the harness itself"
    return {
        "id": UNJUDGED,
        "name": "unjudged schedule",
        "shortDescription": {"text": "unjudged schedule"},
        "fullDescription": {"text": text},
        "help": {"text": text},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"verdict": "error", "tags": ["durable-sim", "error"]},
    }


def _result(one: Any, failure: Any) -> dict[str, Any]:
    rule = failure.invariant if is_registered(failure.invariant) else UNJUDGED
    title = f" {title_of(failure.invariant)}" if rule != UNJUDGED else ""
    text = (
        f"{failure.verdict} {failure.invariant}{title}: {failure.explanation}\n"
        f"{one.name}[{one.store}] schedule {failure.schedule}\n"
        f"replay: {failure.repro}"
    )
    who = "\0".join((one.name, one.store, failure.schedule, failure.invariant))
    result: dict[str, Any] = {
        "ruleId": rule,
        "kind": "fail",
        "level": LEVELS.get(failure.verdict, "error"),
        "message": {"text": text},
        "partialFingerprints": {FINGERPRINT: hashlib.sha256(who.encode()).hexdigest()},
        "properties": {
            "scenario": one.name,
            "store": one.store,
            "schedule": failure.schedule,
            "verdict": failure.verdict,
            "invariants": list(failure.invariants) or [failure.invariant],
            "repro": failure.repro,
        },
    }
    where = place(one, failure)
    if where is not None:
        artifact = {"uri": where.uri} | ({"uriBaseId": SRCROOT} if where.relative else {})
        result["locations"] = [
            {
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": {"startLine": where.line},
                }
            }
        ]
    return result


def _order(result: dict[str, Any]) -> tuple[Any, ...]:
    """Results by scenario, store, then schedule in boundary order (``9:after`` before
    ``10:before``), then rule: the order a reader scans a sweep in, and a stable one."""
    props = result["properties"]
    return (props["scenario"], props["store"], _natural(props["schedule"]), result["ruleId"])


def _natural(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in _DIGITS.split(text))


_DIGITS = re.compile(r"(\d+)")


# -- locations -----------------------------------------------------------------------------------


def place(one: Any, failure: Any) -> Place | None:
    """Where a failure points (see the module docstring): a target app's effect site or entry
    point, else the scenario file's line of its name; None where there is no file of the
    user's to point at (a bundled foreign-runtime target)."""
    # A sweep's fault-free run (``ScenarioSweep.reference``); a fuzz finding has none.
    outcome = getattr(getattr(one, "reference", None), "outcome", None) or {}
    if "app" in outcome:
        return _app_place(outcome, failure)
    path = scenario_path(getattr(one, "ref", "") or one.name)
    if path is None:
        return None
    return _located(path, _line_of(path, rf'"name"\s*:\s*{re.escape(json.dumps(one.name))}'))


def scenario_path(ref: str) -> Path | None:
    """The file a scenario came from: the path given (a ``.json`` or a path with ``/``, as
    ``sim.world.scenario.load_scenario`` reads it) or the bundled scenario's; None if it does
    not exist (a target's name)."""
    if ref.endswith(".json") or "/" in ref:
        path = Path(ref)
    else:
        path = Path(str(SCENARIO_DIR), f"{ref}.json")
    return path if path.is_file() else None


def _app_place(outcome: dict[str, Any], failure: Any) -> Place | None:
    """The call site of the effect the failure's explanation names (the longest name that
    occurs as a word, so ``charge`` is not found in ``charged``), else the app's entry point."""
    sites: dict[str, dict[str, Any]] = outcome.get("effect_sites") or {}
    for name in sorted(sites, key=lambda n: (-len(n), n)):
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", failure.explanation):
            return _located(Path(sites[name]["file"]), int(sites[name]["line"]))
    where, _, function = str(outcome["app"]).rpartition(":")
    path = _app_file(where)
    if path is None:
        return None
    return _located(
        path, _line_of(path, rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(function)}\b")
    )


def _app_file(where: str) -> Path | None:
    """The app's file: the ``FILE.py`` given, or a ``MODULE``'s file found as ``python -m``
    would from the working directory and the path -- by looking, never importing (the parent
    never runs the user's code)."""
    if where.endswith(".py"):
        return Path(where) if Path(where).is_file() else None
    parts = where.split(".")
    for root in [os.getcwd(), *sys.path]:
        for candidate in (Path(root, *parts).with_suffix(".py"), Path(root, *parts, "__init__.py")):
            if root and candidate.is_file():
                return candidate
    return None


def _line_of(path: Path, pattern: str) -> int:
    """The first line of ``path`` that ``pattern`` matches, else 1 (the file itself)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    found = re.search(pattern, text, re.MULTILINE)
    return 1 if found is None else text.count("\n", 0, found.start()) + 1


def _located(path: Path, line: int) -> Place:
    """``path`` as a result names it: relative to the working directory when under it."""
    absolute = Path(os.path.abspath(path))
    try:
        inside = absolute.relative_to(os.getcwd())
    except ValueError:
        return Place(absolute.as_uri(), line, relative=False)
    return Place(inside.as_posix(), line, relative=True)
