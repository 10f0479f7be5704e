"""Sweep reports: one directory per sweep, four views of one results document
(docs/architecture.md, 3).

The results document is ``{"schema_version": 1, "tool": "durable-sim", "tool_version": ...,
"config": {...}, "scenarios": [ScenarioSweep.to_json(), ...], "totals": {...}}``. Each format has
its own module with a ``render(results) -> str``; this module writes them side by side:

- ``results.json``: the document itself (indented, sorted keys), the machine-readable record;
- ``report.md``: summary tables and every failure with its repro command;
- ``junit.xml``: one testsuite per scenario x store, one testcase per schedule, for CI;
- ``index.html``: one self-contained page (no network) with a crash matrix per scenario x store.

Everything that comes from a scenario or a tool output is escaped for the format it lands in.

``write_sarif`` writes a fifth view where the user asks for it (``--sarif FILE``): the failures
as a SARIF 2.1.0 log for code scanning (``sarif``). It is rendered from the sweeps, not the
document, because a result points at the scenario's file, which only a sweep's ``ref`` names.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from sim.errors import UserError
from sim.outputs.report import html, json_report, junit, markdown, sarif

__all__ = ["REPORT_FILES", "ReportError", "write_report", "write_sarif"]


class ReportError(UserError):
    """The report directory could not be created or a report file could not be written."""


Renderer = Callable[[dict[str, Any]], str]

REPORT_FILES: tuple[tuple[str, Renderer], ...] = (
    ("results.json", json_report.render),
    ("report.md", markdown.render),
    ("junit.xml", junit.render),
    ("index.html", html.render),
)


def write_report(out_dir: pathlib.Path, results: dict[str, Any]) -> list[pathlib.Path]:
    """Write the four report files into ``out_dir`` (created with its parents); return their paths.

    Everything is rendered before anything is written, so a rendering bug never leaves a
    half-written directory behind. Raises ``ReportError`` (one line) when the directory cannot be
    created or a file cannot be written.
    """
    out_dir = pathlib.Path(out_dir)
    rendered = [(name, render(results)) for name, render in REPORT_FILES]
    paths: list[pathlib.Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in rendered:
            path = out_dir / name
            # Lone surrogates (only possible inside JSON strings) become \udXXX escapes.
            path.write_text(text, encoding="utf-8", errors="backslashreplace")
            paths.append(path)
    except OSError as exc:
        message = " ".join(str(exc).split())
        raise ReportError(f"cannot write report to {out_dir}: {message}") from exc
    return paths


def write_sarif(path: pathlib.Path, sweeps: Sequence[Any]) -> pathlib.Path:
    """Write the SARIF log of ``sweeps`` (``sarif.render``) to ``path``, its directory created;
    ``ReportError`` (one line) when it cannot be written."""
    path = pathlib.Path(path)
    text = sarif.render(sweeps)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        message = " ".join(str(exc).split())
        raise ReportError(f"cannot write SARIF to {path}: {message}") from exc
    return path
