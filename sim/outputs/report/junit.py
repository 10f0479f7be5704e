"""``junit.xml``: one testsuite per scenario x store, one testcase per schedule, for CI.

Each testcase is one schedule, with one exception, and each failing schedule is exactly one
failing testcase (a dashboard counts every failure once):

- the fault-free reference run;
- each crash point's schedule (a cell of the crash matrix: ``INDEX:WHEN:KIND LABEL``), failing
  if that schedule failed;
- every other failing schedule, on its own: an enumerated power tear (``14:after:power~3``),
  whose cell in the matrix shows the worst of the point's tears, and at depth 2 a schedule with
  a second crash;
- the exception: one passing testcase that counts the schedules not listed above, all passing
  (the tears and second crashes that passed), as ``N further schedules (...), all passing``.

Power-loss schedules that the store cannot simulate appear as one skipped testcase.

ElementTree escapes markup; characters XML 1.0 cannot carry at all (most control characters)
are replaced by their ``repr`` so that the file always parses.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from sim.outputs.report.json_report import (
    REFERENCE_SCHEDULE,
    failures_by_schedule,
    invariant_title,
    run_name,
    skipped_note,
    totals,
    visible,
)


def render(results: dict[str, Any]) -> str:
    t = totals(results)
    root = ET.Element("testsuites", name=visible(results.get("tool", "durable-sim")))
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for sweep in results.get("scenarios", []):
        suite = _suite(sweep)
        root.append(suite)
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
    for key, value in counts.items():
        root.set(key, str(value))
    root.set("time", f"{float(t['wall_s']):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _suite(s: dict[str, Any]) -> ET.Element:
    name, store = str(s.get("name", "?")), str(s.get("store", "?"))
    classname = visible(f"durable_sim.{name}.{store}")
    suite = ET.Element("testsuite", name=visible(run_name(s)))
    props = ET.SubElement(suite, "properties")
    for key in ("seed", "depth", "boundaries", "schedules", "reference_fingerprint"):
        ET.SubElement(props, "property", name=key, value=visible(s.get(key, "")))
    ET.SubElement(
        props, "property", name="crash_kinds", value=visible(",".join(s.get("crash_kinds", [])))
    )

    cases = _cases(s)
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for case_name, verdict, failure in cases:
        case = ET.SubElement(suite, "testcase", name=visible(case_name), classname=classname)
        counts["tests"] += 1
        if verdict == "pass":
            continue
        tag = "error" if verdict == "error" else "failure"
        counts["errors" if tag == "error" else "failures"] += 1
        _outcome(case, tag, verdict, failure, s)
    if s.get("skipped_power") or s.get("skipped_storage"):
        case = ET.SubElement(suite, "testcase", name="power-loss schedules", classname=classname)
        ET.SubElement(case, "skipped", message=visible(f"{store}: {skipped_note(str(store))}"))
        counts["tests"] += 1
        counts["skipped"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{float(s.get('wall_s', 0.0)):.3f}")
    return suite


Case = tuple[str, str, dict[str, Any] | None]  # (name, verdict, failure)


def _cases(s: dict[str, Any]) -> list[Case]:
    """The suite's testcases (see the module's docstring): the reference, a crash point's own
    schedule per matrix cell (the cells of enumerated tears excepted: each failing tear is its
    own testcase below, and a passing one is counted with the rest), every failure not listed
    yet, then the count of the passing rest."""
    failures = failures_by_schedule(s)
    labels: list[str] = [str(label) for label in s.get("labels", [])]
    reference = failures.pop(REFERENCE_SCHEDULE, None)
    verdict = str(reference.get("verdict", "error")) if reference else "pass"
    cases: list[Case] = [("reference (fault-free run)", verdict, reference)]
    base = str(s.get("base_schedule") or "none")
    for cell in s.get("matrix", []):
        if cell.get("kind") == "tear":
            continue  # the worst of a point's tears: each failing one is listed by itself
        schedule = f"{cell.get('index')}:{cell.get('when')}:{cell.get('kind')}"
        index = cell.get("index")
        label = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else "?"
        # A failure names its whole schedule: the scenario's base crash, if any, then the point.
        failure = failures.pop(schedule if base == "none" else f"{base},{schedule}", None)
        verdict = str(failure.get("verdict", "error")) if failure else "pass"
        cases.append((f"{schedule} {label}", verdict, failure))
    for schedule, failure in failures.items():
        crashed = " + ".join(map(str, failure.get("crash_labels", [])))
        cases.append(
            (f"{schedule} {crashed}".strip(), str(failure.get("verdict", "error")), failure)
        )
    unlisted = int(s.get("schedules", 0)) - len(cases)
    if unlisted > 0:
        what = "power tears" if s.get("depth", 1) == 1 else "second crashes and power tears"
        cases.append((f"{unlisted} further schedules ({what}), all passing", "pass", None))
    return cases


def _outcome(
    case: ET.Element, tag: str, verdict: str, f: dict[str, Any] | None, s: dict[str, Any]
) -> None:
    if f is None:
        message = visible(f"{verdict}: no failure details recorded")
        ET.SubElement(case, tag, message=message, type=visible(verdict))
        return
    invariant = str(f.get("invariant", "?"))
    element = ET.SubElement(
        case,
        tag,
        message=visible(f"{invariant}: {f.get('explanation', '')}"),
        type=visible(verdict),
    )
    lines = [
        f"scenario: {run_name(s)}  seed: {f.get('seed', s.get('seed', '?'))}",
        f"schedule: {f.get('schedule', '')}",
        f"verdict: {verdict}",
        f"invariant: {invariant_title(invariant)}",
        f"explanation: {f.get('explanation', '')}",
        f"expected: {f.get('expected', '')}",
        f"actual: {f.get('actual', '')}",
    ]
    if f.get("crash_labels"):
        lines.append("crashed at: " + ", ".join(map(str, f["crash_labels"])))
    if f.get("witness"):
        lines.append("witness:")
        lines += [f"  {w}" for w in f["witness"]]
    lines.append(f"repro: {f.get('repro', '')}")
    element.text = visible("\n".join(lines))
