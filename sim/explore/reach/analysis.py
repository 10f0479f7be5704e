"""The reach report (per-file figures, the recovery branches nothing reached, stale
allowances) and the reach corpus (a greedy set cover of the reached branches by the
measurement's candidates)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from sim.explore.reach.measurement import (
    CORPUS_SCHEMA_VERSION,
    REGENERATE,
    Case,
    CaseRun,
    Raw,
    quiet_coverage,
)
from sim.explore.reach.regions import (
    ALLOWED_UNREACHED,
    Allowance,
    Arc,
    Region,
    durable_dir,
    find_regions,
    relative_source,
    source_lines,
    source_root,
)


class _Summary(TypedDict):
    """A file's (or the total's) counts in coverage.py's JSON report (format 3)."""

    num_statements: int
    covered_lines: int
    num_branches: NotRequired[int]  # only in a branch measurement, which this always is
    covered_branches: NotRequired[int]


class _FileReport(TypedDict):
    """What the analysis reads of one file in coverage.py's JSON report (format 3)."""

    summary: _Summary
    executed_branches: NotRequired[list[list[int]]]
    missing_branches: NotRequired[list[list[int]]]
    missing_lines: NotRequired[list[int]]


class _Count(TypedDict):
    covered: int
    total: int


class Figures(TypedDict):
    """One file's (or the total's) line and branch coverage, as the report lists it."""

    lines: _Count
    branches: _Count
    lines_percent: float
    branches_percent: float


class FileFigures(Figures):
    file: str


#: A recovery branch as the report lists it (``from`` is a keyword: the functional form).
BranchDoc = TypedDict(
    "BranchDoc", {"branch": str, "function": str, "from": str, "to": str, "allowed": str | None}
)


class CorpusCase(TypedDict):
    """A reach corpus case: the runs to replay and the recovery branches it is chosen for."""

    scenario: str
    store: str
    runs: list[CaseRun]
    reaches: list[str]


class ReachCorpus(TypedDict):
    """The reach corpus file (``--write-corpus``; ``tests/reach_corpus.json``)."""

    schema_version: int
    generated_by: str
    seed: int
    cases: list[CorpusCase]
    uncovered: list[str]


def _coverage_report(arcs: set[Arc]) -> dict[str, _FileReport]:
    """coverage.py's JSON report (format 3) of ``arcs`` over every file of ``durable/``: the
    possible arcs come from its static analysis, so a never-imported file counts as 0%."""
    # coverage.py (the reach extra): only `durable-sim coverage` needs it
    import coverage

    quiet_coverage()
    cov = coverage.Coverage(
        data_file=None, branch=True, source=[str(durable_dir())], config_file=False, auto_data=False
    )
    data = cov.get_data()
    by_file: dict[str, list[tuple[int, int]]] = {}
    for path, a, b in arcs:
        by_file.setdefault(str(source_root() / path), []).append((a, b))
    for file in sorted(durable_dir().rglob("*.py")):
        by_file.setdefault(str(file), [])
    data.add_arcs(by_file)
    with tempfile.TemporaryDirectory(prefix="durable-sim-reach-") as tmp:
        out = Path(tmp, "coverage.json")
        cov.json_report(outfile=str(out))
        report: dict[str, dict[str, _FileReport]] = json.loads(out.read_text(encoding="utf-8"))
    return {
        rel: body
        for filename, body in report["files"].items()
        if (rel := relative_source(os.path.abspath(filename))) is not None  # relative to the cwd
    }


@dataclass
class Branch:
    """One recovery branch (arc) and what it is."""

    path: str
    source: int
    target: int  # negative: leaves the code object starting at line -target
    region: str
    source_text: str
    target_text: str
    allowed: str | None = None  # the reason, if it is allowed to stay unreached

    def key(self) -> str:
        return f"{self.path}:{self.source}->{self.target_label()}"

    def target_label(self) -> str:
        return str(self.target) if self.target > 0 else "exit"

    def to_json(self) -> BranchDoc:
        return {
            "branch": self.key(),
            "function": self.region.partition(":")[2],
            "from": self.source_text,
            "to": self.target_text,
            "allowed": self.allowed,
        }


def analyze(raw: Raw) -> dict[str, Any]:
    """Per-file figures of ``durable/``, the recovery branches nothing reached (allowed or not),
    stale allowances, and the reach corpus the measurement supports."""
    files = _coverage_report(raw.arcs)
    regions = find_regions()
    sources = {r.path: source_lines(r.path) for r in regions}
    missing: list[Branch] = []
    reached: list[Branch] = []
    unreached_lines: list[str] = []
    used: set[Allowance] = set()
    for region in regions:
        body = files[region.path]
        lines = sources[region.path]
        buckets = (
            (missing, body.get("missing_branches", [])),
            (reached, body.get("executed_branches", [])),
        )
        for bucket, pairs in buckets:
            for a, b in pairs:
                if a in region.lines and _innermost(regions, region.path, a) is region:
                    branch = _branch(region, a, b, lines)
                    allowance = _allowance(branch)
                    if allowance is not None:
                        used.add(allowance)
                        branch.allowed = allowance.reason
                    bucket.append(branch)
        for line in body.get("missing_lines", []):
            if line in region.lines and _innermost(regions, region.path, line) is region:
                unreached_lines.append(f"{region.path}:{line} ({region.name.partition(':')[2]})")
    stale = [a for a in ALLOWED_UNREACHED if a not in used]
    failing = [b for b in missing if b.allowed is None]
    return {
        "files": _file_figures(files),
        "totals": _totals(files),
        "recovery": {
            "regions": len(regions),
            "branches": len(missing) + len(reached),
            "reached": len(reached),
            "unreached": len(missing),
            "unreached_allowed": len(missing) - len(failing),
            "unreached_failing": len(failing),
        },
        "unreached": [b.to_json() for b in sorted(missing, key=_order)],
        "unreached_lines": unreached_lines,
        "reached_allowed": [b.to_json() for b in reached if b.allowed is not None],
        "stale_allowances": [f"{a.region}: {a.source} -> {a.target}" for a in stale],
        "reached_keys": sorted(b.key() for b in reached),
        "measurement": {"sweeps": raw.sweeps, "notes": raw.notes, "wall_s": round(raw.wall_s, 1)},
    }


def _order(branch: Branch) -> tuple[str, int, int]:
    return (branch.path, branch.source, branch.target)


def _innermost(regions: list[Region], path: str, line: int) -> Region | None:
    """The smallest region holding ``line``: a nested region listed on its own, or a method of a
    listed class, reports the branch under its own name."""
    holding = [r for r in regions if r.path == path and line in r.lines]
    return min(holding, key=lambda r: len(r.lines), default=None)


def _branch(region: Region, a: int, b: int, lines: list[str]) -> Branch:
    def text(n: int) -> str:
        return lines[n - 1].strip() if 0 < n <= len(lines) else "?"

    return Branch(region.path, a, b, region.name, text(a), text(b) if b > 0 else "exit")


def _allowance(branch: Branch) -> Allowance | None:
    for allowance in ALLOWED_UNREACHED:
        if (
            allowance.region == branch.region
            and allowance.source == branch.source_text
            and allowance.target == branch.target_text
        ):
            return allowance
    return None


def _figures(summary: _Summary) -> Figures:
    lines = summary["num_statements"]
    branches = summary.get("num_branches", 0)
    return {
        "lines": {"covered": summary["covered_lines"], "total": lines},
        "branches": {"covered": summary.get("covered_branches", 0), "total": branches},
        "lines_percent": round(100.0 * summary["covered_lines"] / lines, 1) if lines else 100.0,
        "branches_percent": (
            round(100.0 * summary.get("covered_branches", 0) / branches, 1) if branches else 100.0
        ),
    }


def _file_figures(files: dict[str, _FileReport]) -> list[FileFigures]:
    return [{"file": path, **_figures(files[path]["summary"])} for path in sorted(files)]


def _totals(files: dict[str, _FileReport]) -> Figures:
    summaries = [body["summary"] for body in files.values()]
    total: _Summary = {
        "num_statements": sum(s.get("num_statements", 0) for s in summaries),
        "covered_lines": sum(s.get("covered_lines", 0) for s in summaries),
        "num_branches": sum(s.get("num_branches", 0) for s in summaries),
        "covered_branches": sum(s.get("covered_branches", 0) for s in summaries),
    }
    return _figures(total)


# -- the reach corpus ----------------------------------------------------------------------------


def build_corpus(
    raw: Raw,
    report: dict[str, Any],
    *,
    seed: int,
    translate: Callable[[set[Arc]], set[Arc]] | None = None,
) -> ReachCorpus:
    """A greedy set cover of the reached recovery branches by the measurement's corpus
    candidates. Branches no candidate is credited with (reached only by the fuzzer, or only in
    the parent between sweeps) are listed in ``uncovered``: the corpus test will report them.
    ``translate`` maps a case's raw arcs to the report's (coverage.py's mapping by default)."""
    wanted = set(report["reached_keys"])
    allowed = {b["branch"] for b in report["reached_allowed"]}
    wanted -= allowed
    translate = translate or _translator()
    sets = [(case, {_key(arc) for arc in translate(case.arcs)} & wanted) for case in raw.cases]
    chosen: list[tuple[Case, set[str]]] = []
    left = set(wanted)
    while left:
        # The most new branches; among equals the cheapest case (the first one on a tie: the
        # candidates come in sweep order, so the corpus is the same on every run).
        case, gain = max(
            sets, key=lambda cs: (len(cs[1] & left), -cs[0].cost), default=(None, set())
        )
        gain = gain & left
        if case is None or not gain:
            break
        chosen.append((case, gain))
        left -= gain
    return {
        "schema_version": CORPUS_SCHEMA_VERSION,
        "generated_by": REGENERATE,
        "seed": seed,
        "cases": [
            {"scenario": c.scenario, "store": c.store, "runs": c.runs, "reaches": sorted(g)}
            for c, g in chosen
        ],
        "uncovered": sorted(left),
    }


def _translator() -> Callable[[set[Arc]], set[Arc]]:
    """Raw arcs as coverage.py reports them: an arc into or out of a statement spanning several
    lines is reported from and to its first line (``FileReporter.translate_arcs``), so a case's
    raw arcs must be translated before they are compared with the report's branches."""
    # coverage.py (the reach extra): only `durable-sim coverage` needs it
    import coverage
    from coverage.python import PythonFileReporter

    cov = coverage.Coverage(data_file=None, branch=True, config_file=False, auto_data=False)
    reporters: dict[str, PythonFileReporter] = {}

    def translate(arcs: set[Arc]) -> set[Arc]:
        by_file: dict[str, list[tuple[int, int]]] = {}
        for path, a, b in arcs:
            by_file.setdefault(path, []).append((a, b))
        out: set[Arc] = set()
        for path, pairs in by_file.items():
            if path not in reporters:
                reporters[path] = PythonFileReporter(str(source_root() / path), coverage=cov)
            out.update((path, a, b) for a, b in reporters[path].translate_arcs(pairs))
        return out

    return translate


def _key(arc: Arc) -> str:
    path, a, b = arc
    return f"{path}:{a}->{b if b > 0 else 'exit'}"
