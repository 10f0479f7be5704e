"""The runtimes' scoreboard: every registered target x durability mode x variant, swept, in one
generated table (``docs/scoreboard.md``) and its data (``docs/scoreboard.json``).

Why generated: a table kept by hand drifts from what the sweeps find each time a framework, a
target or the judge changes; this one is what a sweep printed, with the framework's versions and
one replay line per row that reproduces its first failure. ``make scoreboard`` runs it (hours on
the 2-core machine: every point of every combination, in real processes); the test
``tests/sim/outputs/test_scoreboard.py`` checks that the markdown is exactly what ``render``
writes from the JSON, so neither is edited by hand.

    durable-sim scoreboard [--targets NAME,...] [--json FILE] [--markdown FILE]

A combination a target refuses (a variant one of its durability modes does not take) is left
out with its reason; a target whose extra is not installed is listed as not installed. The
``python`` target sweeps its demo job (``Target.demo``): the job as first written, and keyed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sim.errors import UserError
from sim.targets.environments import ensure
from sim.targets.host import Crash
from sim.targets.kit.options import check_options
from sim.targets.protocol import Target, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import run_name, sweep_target, target_versions

SCHEMA_VERSION = 1
#: Seconds one child may run: Prefect's children start an API server each, and a loaded
#: machine is slow, not wrong.
CHILD_TIMEOUT_S = 300.0
JSON_PATH = Path("docs/scoreboard.json")
MARKDOWN_PATH = Path("docs/scoreboard.md")


def combinations(target: Target) -> Iterator[tuple[str, TargetOptions]]:
    """Each (variant's name, options) the target takes, every durability mode by every
    variant; the python target's are its demo job's two versions."""
    if target.app_shape is not None and target.demo().as_is.app is not None:
        demo = target.demo()
        yield "as_is", demo.as_is
        yield "keyed", demo.fixed
        return
    for durability in target.durabilities:
        for variant in target.variants:
            yield variant, TargetOptions(durability=durability, variant=variant)


def score(target: Target, options: TargetOptions, variant: str) -> dict[str, Any]:
    """One row: the full sweep of one combination, a progress line per crash point on stderr
    (a combination of a slow target runs for many minutes)."""
    checked = check_options(target, options)

    def progress(n: int, total: int, crash: Crash, verdict: str) -> None:
        print(f"scoreboard:   {target.name} {variant} {n}/{total}: {verdict}", file=sys.stderr)

    result = sweep_target(target, checked, timeout_s=CHILD_TIMEOUT_S, progress=progress)
    failing = [f.schedule for f in result.failures]
    invariants = sorted({i for f in result.failures for i in f.invariants or [f.invariant]})
    return {
        "target": target.name,
        "run": run_name(target, checked),
        "durability": checked.durability,
        "variant": variant,
        "saver": checked.saver,
        "boundaries": result.reference.boundaries,
        "schedules": result.schedules,
        "failing": len(failing),
        "failing_points": failing,
        "invariants": invariants,
        "replay": result.failures[0].repro if result.failures else "",
        "wall_s": round(result.wall_s, 1),
    }


def _row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["target"], row["durability"], row["variant"])


def scoreboard(
    names: list[str],
    *,
    progress: bool = True,
    done: dict[str, Any] | None = None,
    save: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Sweep every combination of the targets ``names``; the document ``render`` reads.
    ``done``: a document an interrupted generation saved: its rows for the same framework
    versions are kept, not swept again (hours of real processes are not thrown away by one
    Ctrl-C). ``save`` is called with the document after every row."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "versions": {},
        "rows": [],
        "skipped": [],
    }
    kept = _reusable(done)
    for name in names:
        target = get_target(name)
        missing = target.missing()
        if missing is not None:
            doc["skipped"].append({"target": name, "why": missing})
            continue
        if target.environment is not None:
            # Its versions are read from its venv's site directory: made first (once), or the
            # board would say its framework is not installed.
            try:
                if progress:
                    ensure(target.environment)
                else:
                    ensure(target.environment, say=lambda _: None)
            except UserError as exc:
                doc["skipped"].append({"target": name, "why": str(exc)})
                continue
        doc["versions"][name] = target_versions(target)
        for variant, options in combinations(target):
            # Rows are keyed by the checked durability (the default mode's name, not "").
            durability = options.durability or target.durabilities[0]
            previous = kept.get((name, durability, variant))
            if previous is not None and previous["versions"] == doc["versions"][name]:
                doc["rows"].append(previous["row"])
                continue
            started = time.perf_counter()
            try:
                row = score(target, options, variant)
            except UserError as exc:
                doc["skipped"].append({"target": name, "why": str(exc)})
                continue
            doc["rows"].append(row)
            if save is not None:
                save(doc)
            if progress:
                print(
                    f"scoreboard: {row['run']} {row['durability']}: {row['failing']} of "
                    f"{row['schedules']} failing ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                )
    return doc


def _reusable(done: dict[str, Any] | None) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The rows of a saved document this generation may keep, each with the versions it was
    swept under (kept only if the installed versions are the same): same schema only."""
    if done is None or done.get("schema_version") != SCHEMA_VERSION:
        return {}
    return {
        _row_key(row): {"row": row, "versions": done["versions"].get(row["target"])}
        for row in done["rows"]
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(doc: dict[str, Any]) -> str:
    """The markdown of a scoreboard document: one row per combination, the framework's versions,
    what was left out and why."""
    out = [
        "# Scoreboard",
        "",
        "Generated by `make scoreboard` (`sim/outputs/scoreboard.py`) from",
        "[scoreboard.json](scoreboard.json): every target x durability mode x variant, every",
        "crash point of its fault-free trace, killed in a real process and resumed. Do not edit",
        "by hand: `tests/sim/outputs/test_scoreboard.py` checks this file is what the generator",
        "writes from the JSON.",
        "",
        "| target | versions | durability | variant | boundaries | schedules | failing | "
        "invariants | replay of the first failure | wall s |",
        "|---|---|---|---|---:|---:|---:|---|---|---:|",
    ]
    for row in doc["rows"]:
        versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].get(row["target"], {}).items())
        replay = f"`{_cell(row['replay'])}`" if row["replay"] else "--"
        out.append(
            f"| {row['target']} | {_cell(versions) or '--'} | {row['durability']} | "
            f"{row['variant']} | {row['boundaries']} | {row['schedules']} | {row['failing']} | "
            f"{', '.join(row['invariants']) or '--'} | {replay} | {row['wall_s']:.1f} |"
        )
    if doc["skipped"]:
        out += ["", "Left out:", ""]
        out += [f"- {item['target']}: {item['why']}" for item in doc["skipped"]]
    return "\n".join(out) + "\n"
