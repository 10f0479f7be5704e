"""``index.html``: one self-contained page (inline CSS, no script, nothing fetched from anywhere).

Header with the totals and a legend, a summary table linking to each scenario x store, then per
scenario x store its crash matrix (rows: boundaries; columns: before/after x crash kind; cells
coloured by verdict, failing cells linking to their failure) and one section per failure with the
explanation, expected vs actual, witness rows, repro command and the timeline with crashes marked.

Every value taken from the results goes through ``_e`` (``html.escape``, quotes included); ids and
anchors are built from positions only, never from names.
"""

from __future__ import annotations

import html
import json
from typing import Any

from sim.judgement.oracles import worst_verdict
from sim.outputs.report.json_report import (
    DETAIL_LIMIT,
    DISPLAY_VERDICTS,
    REFERENCE_SCHEDULE,
    failures_by_schedule,
    invariant_title,
    run_name,
    sampled_note,
    skipped_note,
    totals,
    visible,
)

NOT_RUN = "notrun"
_SYMBOL = {
    "pass": "✓",
    "safety": "S",
    "liveness": "L",
    "nondeterminism": "N",
    "error": "E",
    NOT_RUN: "·",
}
_LEGEND = {
    "pass": "pass",
    "safety": "safety violation",
    "liveness": "liveness violation",
    "nondeterminism": "nondeterminism",
    "error": "harness error",
    NOT_RUN: "not run",
}

_CSS = """
:root { --pass:#2da44e; --safety:#cf222e; --liveness:#e16f24; --nondeterminism:#8250df;
  --error:#111; --notrun:#d0d7de; --ink:#1f2328; --muted:#59636e; --line:#d8dee4; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: #f6f8fa; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem 1.25rem 4rem; }
h1 { margin: 0 0 .25rem; font-size: 1.6rem; }
h2 { margin: 2.5rem 0 .5rem; padding-top: .5rem; border-top: 2px solid var(--line); }
h3 { margin: 1.5rem 0 .5rem; }
code, pre, .mono { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace;
  font-size: 12.5px; }
pre { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem;
  margin: .3rem 0 .8rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
.muted { color: var(--muted); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 1rem;
  margin: .8rem 0; }
.totals { display: flex; flex-wrap: wrap; gap: .5rem; margin: .8rem 0; }
.badge { display: inline-block; padding: .15rem .6rem; border-radius: 999px; color: #fff;
  font-weight: 600; white-space: nowrap; }
.badge.plain { background: #fff; color: var(--ink); border: 1px solid var(--line); }
.v-pass { background: var(--pass); color: #fff; }
.v-safety { background: var(--safety); color: #fff; }
.v-liveness { background: var(--liveness); color: #fff; }
.v-nondeterminism { background: var(--nondeterminism); color: #fff; }
.v-error { background: var(--error); color: #fff; }
.v-notrun { background: var(--notrun); color: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: .9rem; margin: .5rem 0; }
.legend span.sw { display: inline-block; width: 1.3em; height: 1.3em; border-radius: 3px;
  text-align: center; line-height: 1.3em; font-size: 12px; margin-right: .3rem;
  vertical-align: middle; }
table { border-collapse: collapse; background: #fff; }
table.summary td, table.summary th { border: 1px solid var(--line); padding: .3rem .6rem; }
table.summary td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.matrix { margin: .5rem 0 1rem; }
table.matrix th, table.matrix td { border: 1px solid var(--line); padding: 0 .4rem;
  height: 1.6em; }
table.matrix thead th { position: sticky; top: 0; background: #fff; font-weight: 600;
  font-size: 12px; }
table.matrix td.i { text-align: right; color: var(--muted); }
table.matrix td.label { max-width: 36rem; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
table.matrix td.cell { width: 4.2rem; text-align: center; font-weight: 700; padding: 0; }
table.matrix td.cell a { display: block; color: inherit; text-decoration: none; }
table.matrix tr:hover td.label { background: #fff8c5; }
.note { border-left: 4px solid var(--liveness); background: #fff8f0; padding: .4rem .8rem;
  margin: .6rem 0; }
.failure { border-left: 6px solid var(--safety); }
.failure.f-liveness { border-left-color: var(--liveness); }
.failure.f-nondeterminism { border-left-color: var(--nondeterminism); }
.failure.f-error { border-left-color: var(--error); }
.failure h3 { margin-top: 0; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.ea { display: grid; grid-template-columns: 1fr 1fr; gap: .8rem; }
.ea h4, .failure h4 { margin: .8rem 0 0; font-size: .9rem; }
pre.repro { background: #0d1117; color: #e6edf3; border-color: #0d1117; }
ol.timeline { list-style: none; margin: .3rem 0; padding: .4rem 0; background: #fff;
  border: 1px solid var(--line); border-radius: 6px; max-height: 28rem; overflow: auto; }
ol.timeline li { padding: 0 .8rem; white-space: pre; }
ol.timeline li.crash { background: #ffebe9; color: var(--safety); font-weight: 700; }
details > summary { cursor: pointer; color: var(--muted); }
a { color: #0969da; }
"""


def _e(value: Any) -> str:
    return html.escape(visible(value), quote=True)


def render(results: dict[str, Any]) -> str:
    runs: list[dict[str, Any]] = list(results.get("scenarios", []))
    t = totals(results)
    tool = _e(results.get("tool", "durable-sim"))
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{tool} report</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        "<header>",
        f"<h1>{tool} report</h1>",
        f'<div class="muted">{tool} {_e(results.get("tool_version", "?"))} · '
        f"{len(runs)} scenario &times; store runs · {_e(t['schedules'])} schedules · "
        f"{float(t['wall_s']):.2f} s</div>",
        '<div class="totals">',
        *(_badge(v, t["verdicts"].get(v, 0)) for v in DISPLAY_VERDICTS),
        "</div>",
    ]
    config = results.get("config") or {}
    if config:
        items = ", ".join(
            f"{_e(k)} <code>{_e(json.dumps(v, ensure_ascii=False, sort_keys=True))}</code>"
            for k, v in sorted(config.items())
        )
        out.append(f'<div class="muted">config: {items}</div>')
    out.append(_legend())
    out.append("</header>")
    out += _summary(runs)
    for n, sweep in enumerate(runs):
        out += _run(n, sweep)
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def _badge(verdict: str, count: Any) -> str:
    """A verdict count, coloured only when non-zero."""
    css = f"v-{verdict}" if count else "plain"
    return f'<span class="badge {css}">{verdict} {_e(count)}</span>'


def _legend() -> str:
    items = "".join(
        f'<span><span class="sw v-{v}">{_SYMBOL[v]}</span>{_LEGEND[v]}</span>'
        for v in (*DISPLAY_VERDICTS, NOT_RUN)
    )
    return f'<div class="legend" aria-label="legend">{items}</div>'


def _summary(runs: list[dict[str, Any]]) -> list[str]:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("scenario", "store", "boundaries", "schedules", *DISPLAY_VERDICTS, "wall s")
    )
    out = ['<table class="summary">', f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for n, s in enumerate(runs):
        verdicts = s.get("verdicts", {})
        counts = "".join(
            f'<td class="n{" v-" + v if verdicts.get(v) and v != "pass" else ""}">'
            f"{_e(verdicts.get(v, 0))}</td>"
            for v in DISPLAY_VERDICTS
        )
        out.append(
            f'<tr><td><a href="#run-{n}">{_e(s.get("name", "?"))}</a></td>'
            f"<td>{_e(s.get('store', '?'))}</td>"
            f'<td class="n">{_e(s.get("boundaries", 0))}</td>'
            f'<td class="n">{_e(s.get("schedules", 0))}{" sampled" if s.get("sampled") else ""}'
            f"</td>{counts}"
            f'<td class="n">{float(s.get("wall_s", 0.0)):.2f}</td></tr>'
        )
    out += ["</tbody>", "</table>"]
    return out


def _kinds(s: dict[str, Any]) -> list[str]:
    """Crash kinds that have matrix columns: those asked for and run, then any others seen."""
    kinds = [
        str(k)
        for k in s.get("crash_kinds", [])
        if not (k == "power" and s.get("skipped_power"))
        and not (k == "storage" and s.get("skipped_storage"))
        and not (k == "pause" and s.get("skipped_pause"))
    ]
    for cell in s.get("matrix", []):
        if str(cell.get("kind")) not in kinds:
            kinds.append(str(cell.get("kind")))
    return kinds


def _run(n: int, s: dict[str, Any]) -> list[str]:
    failures: list[dict[str, Any]] = list(s.get("failures", []))
    anchors: dict[str, str] = {}  # schedule text -> where its failure is shown
    for i, f in enumerate(failures):
        anchors.setdefault(
            str(f.get("schedule", "")), f"f-{n}-{i}" if i < DETAIL_LIMIT else f"more-{n}"
        )
    reference = failures_by_schedule(s).get(REFERENCE_SCHEDULE)
    ref_verdict = str(reference.get("verdict", "error")) if reference else "pass"
    ref_badge = f'<span class="badge v-{_e(ref_verdict)}">{_e(ref_verdict)}</span>'
    if reference:
        ref_badge = f'<a href="#{anchors[REFERENCE_SCHEDULE]}">{ref_badge}</a>'
    verdicts = s.get("verdicts", {})
    worst = worst_verdict(verdicts)
    out = [
        f'<section id="run-{n}">',
        f'<h2>{_e(run_name(s))} <span class="badge v-{_e(worst)}">{_e(worst)}</span></h2>',
        '<div class="card">',
        '<dl class="facts">',
        f"<dt>seed · depth</dt><dd>{_e(s.get('seed', '?'))} · {_e(s.get('depth', '?'))}</dd>",
        f"<dt>crash kinds</dt><dd>{_e(', '.join(map(str, s.get('crash_kinds', []))))}</dd>",
        f"<dt>boundaries</dt><dd>{_e(s.get('boundaries', 0))} ("
        + _e(", ".join(f"{k} {c}" for k, c in sorted(s.get("boundary_kinds", {}).items())))
        + ")</dd>",
        f"<dt>schedules</dt><dd>{_e(s.get('schedules', 0))}: "
        + " · ".join(f"{v} {_e(verdicts.get(v, 0))}" for v in DISPLAY_VERDICTS)
        + f" · {float(s.get('wall_s', 0.0)):.2f} s</dd>",
        *([f"<dt>sampled</dt><dd>{_e(sampled_note(s))}</dd>"] if s.get("sampled") else []),
        f"<dt>folded</dt><dd>{_e(s.get('folded', 0))} schedules not run: each leaves the world "
        "an earlier one leaves, and inherits its verdict (a failure is re-run on its own)</dd>",
        f"<dt>reference run</dt><dd>{ref_badge} fingerprint "
        f"<code>{_e(s.get('reference_fingerprint', ''))}</code></dd>",
    ]
    effects = s.get("effects", {})
    if effects:
        out.append(
            "<dt>effects applied</dt><dd>"
            + _e(", ".join(f"{k}: {c}" for k, c in sorted(effects.items())))
            + "</dd>"
        )
    outcome = s.get("reference_outcome", {})
    if outcome:
        out.append("<dt>reference answers</dt><dd>")
        for key, value in outcome.items():
            out.append(
                f"<div><code>{_e(key)}</code> "
                f"{_e(json.dumps(value, ensure_ascii=False, sort_keys=True))}</div>"
            )
        out.append("</dd>")
    out += ["</dl>", "</div>"]
    if s.get("skipped_power") or s.get("skipped_storage"):
        store = str(s.get("store", "?"))
        out.append(f'<div class="note">{_e(store)}: {_e(skipped_note(store))}</div>')
    out += _matrix(s, anchors)
    if failures:
        out.append(f"<h3>Failures ({len(failures)})</h3>")
        for i, f in enumerate(failures[:DETAIL_LIMIT]):
            out += _failure(f"f-{n}-{i}", i + 1, f)
        if len(failures) > DETAIL_LIMIT:
            out += _more(f"more-{n}", failures[DETAIL_LIMIT:])
    out.append("</section>")
    return out


def _matrix(s: dict[str, Any], anchors: dict[str, str]) -> list[str]:
    kinds = _kinds(s)
    columns = [(when, kind) for when in ("before", "after") for kind in kinds]
    labels: list[str] = [str(label) for label in s.get("labels", [])]
    cells: dict[tuple[Any, str, str], str] = {}
    for cell in s.get("matrix", []):
        key = (cell.get("index"), str(cell.get("when")), str(cell.get("kind")))
        cells[key] = str(cell.get("verdict", NOT_RUN))
    rows = max(len(labels), int(s.get("boundaries", 0) or 0))
    head = "".join(f"<th>{_e(when)}<br>{_e(kind)}</th>" for when, kind in columns)
    out = [
        f'<table class="matrix" aria-label="crash matrix {_e(run_name(s))}">',
        f"<thead><tr><th>#</th><th>boundary</th>{head}</tr></thead>",
        "<tbody>",
    ]
    for i in range(rows):
        label = labels[i] if i < len(labels) else "?"
        tds = []
        for when, kind in columns:
            verdict = cells.get((i, when, kind), NOT_RUN)
            css = verdict if verdict in _SYMBOL else "error"
            schedule = f"{i}:{when}:{kind}"
            title = _e(f"{schedule} {label}: {_LEGEND.get(verdict, verdict)}")
            symbol = _SYMBOL.get(verdict, "?")
            anchor = anchors.get(schedule) if verdict not in ("pass", NOT_RUN) else None
            inner = f'<a href="#{anchor}">{symbol}</a>' if anchor else symbol
            tds.append(f'<td class="cell v-{css}" title="{title}">{inner}</td>')
        out.append(
            f'<tr><td class="i mono">{i}</td><td class="label mono" title="{_e(label)}">'
            f"{_e(label)}</td>{''.join(tds)}</tr>"
        )
    if not rows:
        out.append(f'<tr><td colspan="{2 + len(columns)}" class="muted">no boundaries</td></tr>')
    out += ["</tbody>", "</table>"]
    return out


def _failure(anchor: str, number: int, f: dict[str, Any]) -> list[str]:
    verdict = str(f.get("verdict", "error"))
    invariant = str(f.get("invariant", "?"))
    out = [
        f'<article class="card failure f-{_e(verdict)}" id="{anchor}">',
        f"<h3>{number}. {_e(invariant_title(invariant))} "
        f'<span class="badge v-{_e(verdict)}">{_e(verdict)}</span></h3>',
        '<dl class="facts">',
        f"<dt>schedule</dt><dd><code>{_e(f.get('schedule', ''))}</code></dd>",
    ]
    labels = f.get("crash_labels", [])
    if labels:
        out.append(
            "<dt>crashed at</dt><dd>"
            + ", ".join(f"<code>{_e(label)}</code>" for label in labels)
            + "</dd>"
        )
    out += [
        f"<dt>explanation</dt><dd>{_e(f.get('explanation', '')) or '(none)'}</dd>",
        "</dl>",
        '<div class="ea">',
        f"<div><h4>expected</h4><pre>{_e(f.get('expected', ''))}</pre></div>",
        f"<div><h4>actual</h4><pre>{_e(f.get('actual', ''))}</pre></div>",
        "</div>",
    ]
    witness = f.get("witness", [])
    if witness:
        out.append("<h4>witness</h4>")
        out.append("<pre>" + "\n".join(_e(w) for w in witness) + "</pre>")
    out.append("<h4>repro</h4>")
    out.append(f'<pre class="repro">{_e(f.get("repro", ""))}</pre>')
    timeline = f.get("timeline", [])
    if timeline:
        out.append(f"<details open><summary>timeline ({len(timeline)} lines)</summary>")
        out.append('<ol class="timeline mono">')
        for line in timeline:
            css = ' class="crash"' if "CRASH" in str(line) else ""
            out.append(f"<li{css}>{_e(line)}</li>")
        out += ["</ol>", "</details>"]
    out.append("</article>")
    return out


def _more(anchor: str, rest: list[dict[str, Any]]) -> list[str]:
    out = [
        f'<div class="card" id="{anchor}">',
        f"<h4>{len(rest)} more failures (details in results.json)</h4>",
        '<table class="summary"><thead><tr><th>schedule</th><th>verdict</th>'
        "<th>invariant</th><th>repro</th></tr></thead><tbody>",
    ]
    for f in rest:
        out.append(
            f"<tr><td><code>{_e(f.get('schedule', ''))}</code></td>"
            f"<td>{_e(f.get('verdict', '?'))}</td>"
            f"<td>{_e(invariant_title(str(f.get('invariant', '?'))))}</td>"
            f"<td><code>{_e(f.get('repro', ''))}</code></td></tr>"
        )
    out += ["</tbody></table>", "</div>"]
    return out
