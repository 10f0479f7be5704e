"""``report.md``: totals, one table row per scenario x store, then every failure with its repro.

Scenario data is untrusted text: prose and table cells go through ``text`` (backslash escapes for
Markdown punctuation, ``&lt;``/``&gt;`` for angle brackets, newlines folded), and anything that is
really data (schedules, witness rows, expected/actual, repro commands) goes into code spans or
fenced blocks whose fences are longer than any backtick run inside them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sim.outputs.report.json_report import (
    DETAIL_LIMIT,
    DISPLAY_VERDICTS,
    invariant_title,
    run_name,
    sampled_note,
    skipped_note,
    skipped_power_stores,
    totals,
    visible,
)

_PUNCTUATION = re.compile(r"([\\`*\[\]|~])")
# GFM never reads an underscore between two alphanumerics as emphasis: leave identifiers readable.
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_BACKTICKS = re.compile(r"`+")


def text(value: Any) -> str:
    """Untrusted text for prose or a table cell: one line, no Markdown or HTML meaning."""
    s = " ".join(visible(value).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _UNDERSCORE.sub(r"\\_", _PUNCTUATION.sub(r"\\\1", s))


def code(value: Any, *, in_table: bool = False) -> str:
    """An inline code span holding ``value`` verbatim (folded to one line)."""
    s = " ".join(visible(value).split())
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0)
    fence = "`" * (longest + 1)
    if s.startswith("`") or s.endswith("`"):
        s = f" {s} "
    span = f"{fence}{s}{fence}" if s else "` `"
    # GFM splits table cells on every unescaped pipe, code spans included.
    return span.replace("|", "\\|") if in_table else span


def block(lines: list[str], info: str = "text") -> list[str]:
    """A fenced code block holding ``lines`` verbatim."""
    body = [visible(line) for line in lines] or [""]
    longest = max((len(m) for line in body for m in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", *body, fence]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]], *, numeric_from: int = 99) -> list[str]:
    align = ["---:" if i >= numeric_from else "---" for i in range(len(header))]
    return [_row(header), _row(align), *(_row(r) for r in rows)]


def undeclared_note(s: dict[str, Any]) -> str:
    """The app's tools that landed no declared effect in the fault-free run (a target's
    ``--app`` sweep): counted, not judged -- name their service clients with ``--effect``."""
    undeclared = s.get("reference_outcome", {}).get("undeclared_effects") or {}
    if not undeclared:
        return ""
    calls = ", ".join(f"{tool} ({n} call{'s' if n != 1 else ''})" for tool, n in undeclared.items())
    return (
        f"undeclared effects: {calls} -- tools that landed no declared effect, counted but not "
        "judged; name their clients of outside services with --effect"
    )


def app_notes(s: dict[str, Any]) -> list[str]:
    """What a target sweep of a user's app says about the app (``sim.targets.sweep.app_outcome``):
    its entry point and declared effects, then what the fault-free run showed was left unjudged
    -- tools that landed no declared effect, declared effects never called, HTTP patterns no
    call matched. And how its children ran: forked from a warm zygote, or fresh interpreters and
    why (``sim.targets.sweep.warm``)."""
    outcome = s.get("reference_outcome", {})
    children = [f"children: {outcome['children']}"] if outcome.get("children") else []
    if "app" not in outcome:
        return children + ([undeclared_note(s)] if undeclared_note(s) else [])
    notes = [
        *children,
        f"app {outcome['app']}, effects: {', '.join(outcome.get('declared_effects', []))}",
    ]
    if undeclared_note(s):
        notes.append(undeclared_note(s))
    if outcome.get("never_called"):
        notes.append(
            "never called: "
            + ", ".join(outcome["never_called"])
            + " -- declared effects the fault-free run never called, so nothing judged them "
            "(a method of a class the app never instantiates? another module's function?)"
        )
    if outcome.get("unmatched_http"):
        notes.append(
            "no call matched: "
            + ", ".join(outcome["unmatched_http"])
            + " -- declared HTTP effects the fault-free run never made"
        )
    return notes


def render(results: dict[str, Any]) -> str:
    runs: list[dict[str, Any]] = list(results.get("scenarios", []))
    t = totals(results)
    tool = text(results.get("tool", "durable-sim"))
    out = [f"# {tool} report", ""]
    out.append(
        f"{tool} {text(results.get('tool_version', '?'))} · "
        f"{len(runs)} scenario \u00d7 store runs · {t['schedules']} schedules · "
        f"{t['wall_s']:.2f} s"
    )
    out.append("")
    out.append(
        "**Verdicts:** " + " · ".join(f"{v} {t['verdicts'].get(v, 0)}" for v in DISPLAY_VERDICTS)
    )
    config = results.get("config") or {}
    if config:
        out += [
            "",
            "**Config:** "
            + ", ".join(
                f"{text(k)} {code(json.dumps(v, ensure_ascii=False, sort_keys=True))}"
                for k, v in sorted(config.items())
            ),
        ]

    out += ["", "## Results", ""]
    header = ["scenario", "store", "boundaries", "schedules", *DISPLAY_VERDICTS, "wall s"]
    rows = [
        [
            text(s.get("name", "?")),
            text(s.get("store", "?")),
            str(s.get("boundaries", 0)),
            str(s.get("schedules", 0)) + (" sampled" if s.get("sampled") else ""),
            *(str(s.get("verdicts", {}).get(v, 0)) for v in DISPLAY_VERDICTS),
            f"{s.get('wall_s', 0.0):.2f}",
        ]
        for s in runs
    ]
    out += _table(header, rows, numeric_from=2)
    notes = [f"- {text(store)}: {skipped_note(store)}" for store in skipped_power_stores(results)]
    notes += [f"- {text(run_name(s))}: {text(sampled_note(s))}" for s in runs if s.get("sampled")]
    notes += [f"- {text(run_name(s))}: {text(note)}" for s in runs for note in app_notes(s)]
    if notes:
        out += ["", "**Notes**", "", *notes]

    out += ["", "## Boundary kinds", ""]
    out += _table(
        ["scenario", "store", "kinds"],
        [
            [
                text(s.get("name", "?")),
                text(s.get("store", "?")),
                ", ".join(f"{text(k)} {n}" for k, n in sorted(s.get("boundary_kinds", {}).items()))
                or "none",
            ]
            for s in runs
        ],
    )

    failing = [s for s in runs if s.get("failures")]
    count = sum(len(s["failures"]) for s in failing)
    out += ["", f"## Failures ({count})", ""]
    if not failing:
        out.append("Every schedule passed every oracle.")
    for s in failing:
        out += _failures(s)
    return "\n".join(out).rstrip("\n") + "\n"


def _failures(s: dict[str, Any]) -> list[str]:
    failures: list[dict[str, Any]] = s["failures"]
    out = [f"### {text(s.get('name', '?'))} \\[{text(s.get('store', '?'))}\\]", ""]
    out += _table(
        ["#", "schedule", "verdict", "invariant", "crashed at"],
        [
            [
                str(n),
                code(f.get("schedule", ""), in_table=True),
                text(f.get("verdict", "?")),
                text(invariant_title(str(f.get("invariant", "?")))),
                text(", ".join(map(str, f.get("crash_labels", []))) or "-"),
            ]
            for n, f in enumerate(failures, 1)
        ],
    )
    for n, f in enumerate(failures[:DETAIL_LIMIT], 1):
        out += ["", *_failure(n, f)]
    if len(failures) > DETAIL_LIMIT:
        rest = len(failures) - DETAIL_LIMIT
        out += ["", f"{rest} more failures are listed above; results.json has their details."]
    out.append("")
    return out


def _failure(n: int, f: dict[str, Any]) -> list[str]:
    invariant = text(invariant_title(str(f.get("invariant", "?"))))
    out = [f"#### {n}. {invariant} ({text(f.get('verdict', '?'))})", ""]
    out.append(f"- schedule: {code(f.get('schedule', ''))}")
    labels = f.get("crash_labels", [])
    if labels:
        out.append("- crashed at: " + ", ".join(code(label) for label in labels))
    out.append(f"- explanation: {text(f.get('explanation', '')) or '(none)'}")
    out += ["", "Expected vs actual:", ""]
    out += block([f"expected: {f.get('expected', '')}", f"actual:   {f.get('actual', '')}"])
    witness = f.get("witness", [])
    if witness:
        out += ["", "Witness:", "", *block([str(w) for w in witness])]
    out += ["", "Repro:", "", *block([str(f.get("repro", ""))], "sh")]
    return out
