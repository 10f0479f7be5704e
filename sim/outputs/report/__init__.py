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
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

from sim.errors import UserError
from sim.outputs.report import html, json_report, junit, markdown

__all__ = ["REPORT_FILES", "ReportError", "write_report"]


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
