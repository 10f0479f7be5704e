"""Sweep reports (docs/architecture.md, 3): the four files, their counts, and escaping of hostile
scenario text."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from sim.explore.plan import SweepPlan
from sim.outputs.report import ReportError, write_report
from sim.outputs.report.markdown import block, code
from sim.world.faults import CrashKind
from sim.world.stores import StoreKind

EVIL = "<script>alert(1)</script>"
PIPE_LABEL = f"tool.call|pipe {EVIL}"
REPRO = (
    "durable-sim replay --scenario evil_scenario --seed 7 --store file --schedule 1:after:process"
)
REPRO_D2 = (
    "durable-sim replay --scenario evil_scenario --seed 7 --store file "
    "--schedule 1:after:process,2:before:process"
)
NAMES = ["evil_scenario[file]", "calm[sqlite]"]


def _matrix(n: int, kinds: list[str], bad: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"index": i, "when": when, "kind": kind, "verdict": bad.get(f"{i}:{when}:{kind}", "pass")}
        for i in range(n)
        for when in ("before", "after")
        for kind in kinds
    ]


def _failure(
    schedule: str, verdict: str, invariant: str, repro: str, **extra: Any
) -> dict[str, Any]:
    failure = {
        "scenario": "evil_scenario",
        "store": "file",
        "seed": 7,
        "schedule": schedule,
        "verdict": verdict,
        "invariant": invariant,
        "explanation": "charged twice | <b>bold</b> & more",
        "witness": [f"payments.charge #1 answer={EVIL}", "payments.charge #2 ```fence```"],
        "expected": "1 charge",
        "actual": "2 charges \x1b[31m(ansi)\x1b[0m\x00",
        "repro": repro,
        "crash_labels": [PIPE_LABEL],
        "timeline": [
            "    0.000s [   0] p1 store.lease.acquire#1",
            f"    0.010s [   1] p1 {PIPE_LABEL}",
            f"💥 CRASH (process) after {PIPE_LABEL} in p1",
            "    0.020s [   2] p2 store.commit#1",
        ],
    }
    failure.update(extra)
    return failure


def synthetic_results() -> dict[str, Any]:
    evil_bad = {"1:after:process": "safety", "2:before:power": "liveness"}
    evil = {
        "name": "evil_scenario",
        "store": "file",
        "seed": 7,
        "depth": 2,
        "crash_kinds": ["process", "power"],
        "boundaries": 3,
        "boundary_kinds": {"lease": 1, "tool": 1, "commit": 1},
        # 1 reference + 12 depth-1 + 5 depth-2 (one of which failed)
        "schedules": 18,
        "verdicts": {"error": 1, "safety": 1, "liveness": 1, "nondeterminism": 0, "pass": 15},
        "failures": [
            _failure("1:after:process", "safety", "I1", REPRO),
            _failure("2:before:power", "liveness", "I7", REPRO.replace("1:after:process", "x")),
            _failure("1:after:process,2:before:process", "error", "I0", REPRO_D2),
        ],
        "matrix": _matrix(3, ["process", "power"], evil_bad),
        "labels": ["store.lease.acquire#1", PIPE_LABEL, "store.commit#1"],
        "reference_fingerprint": "abc123",
        "reference_outcome": {"pay-1": {"status": "done", "answer": EVIL, "reason": None}},
        "effects": {"payments.charge": 1},
        "skipped_power": False,
        "wall_s": 0.5,
    }
    calm = {
        "name": "calm",
        "store": "sqlite",
        "seed": 0,
        "depth": 1,
        "crash_kinds": ["process", "power"],
        "boundaries": 2,
        "boundary_kinds": {"commit": 2},
        "schedules": 5,
        "verdicts": {"error": 0, "safety": 0, "liveness": 0, "nondeterminism": 0, "pass": 5},
        "failures": [],
        "matrix": _matrix(2, ["process"], {}),
        "labels": ["store.commit#1", "sqlite.commit"],
        "reference_fingerprint": "def456",
        "reference_outcome": {},
        "effects": {},
        "skipped_power": True,
        "wall_s": 0.25,
    }
    return {
        "schema_version": 1,
        "tool": "durable-sim",
        "tool_version": "0.1.0",
        "config": {"depth": 2, "crash": ["process", "power"], "seed": 7},
        "scenarios": [evil, calm],
        "totals": {
            "schedules": 23,
            "verdicts": {"error": 1, "safety": 1, "liveness": 1, "nondeterminism": 0, "pass": 20},
            "wall_s": 0.75,
        },
    }


@pytest.fixture
def report(tmp_path: Path) -> tuple[Path, dict[str, Any], list[Path]]:
    results = synthetic_results()
    out = tmp_path / "nested" / "report"
    return out, results, write_report(out, results)


def test_writes_the_four_files(report: tuple[Path, dict[str, Any], list[Path]]) -> None:
    out, _, paths = report
    assert [p.name for p in paths] == ["results.json", "report.md", "junit.xml", "index.html"]
    assert all(p.parent == out and p.is_file() and p.stat().st_size > 0 for p in paths)


def test_results_json_round_trips(report: tuple[Path, dict[str, Any], list[Path]]) -> None:
    out, results, _ = report
    text = (out / "results.json").read_text(encoding="utf-8")
    assert json.loads(text) == results
    assert text.startswith('{\n  "config"')  # indented, keys sorted


def test_lone_surrogates_do_not_break_the_files(tmp_path: Path) -> None:
    results = synthetic_results()
    results["scenarios"][0]["failures"][0]["actual"] = "bad \udc80 bytes"
    write_report(tmp_path, results)
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8")) == results
    ET.parse(tmp_path / "junit.xml")
    assert "bad \\udc80 bytes" in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_junit_counts_and_failures(report: tuple[Path, dict[str, Any], list[Path]]) -> None:
    out, results, _ = report
    root = ET.parse(out / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == NAMES
    evil, calm = suites

    # reference + 12 depth-1 + the failing depth-2 schedule + one for the 4 passing depth-2 ones
    assert len(evil.findall("testcase")) == int(evil.attrib["tests"]) == 15
    assert (evil.get("failures"), evil.get("errors"), evil.get("skipped")) == ("2", "1", "0")
    assert {c.get("classname") for c in evil} - {None} == {"durable_sim.evil_scenario.file"}
    names = [c.attrib["name"] for c in evil.findall("testcase")]
    assert names[0].startswith("reference")
    assert names[1] == "0:before:process store.lease.acquire#1"
    assert f"1:after:process {PIPE_LABEL}" in names
    assert "4 further schedules (second crashes and power tears), all passing" in names

    # depth 1: one testcase per schedule (reference included) + the skipped power schedules
    assert int(calm.attrib["tests"]) == results["scenarios"][1]["schedules"] + 1 == 6
    assert (calm.get("failures"), calm.get("errors"), calm.get("skipped")) == ("0", "0", "1")

    for key in ("tests", "failures", "errors", "skipped"):
        assert int(root.attrib[key]) == sum(int(s.attrib[key]) for s in suites)

    case = next(c for c in evil if c.get("name", "").startswith("1:after:process "))
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "safety" and failure.text is not None
    assert failure.attrib["message"].startswith("I1: charged twice | <b>bold</b>")
    assert REPRO in failure.text
    assert f"payments.charge #1 answer={EVIL}" in failure.text
    assert "expected: 1 charge" in failure.text and "actual: 2 charges" in failure.text
    assert "\x1b" not in failure.text and "2 charges \\x1b[31m(ansi)\\x1b[0m\\x00" in failure.text

    depth2 = next(c for c in evil if c.get("name", "").startswith("1:after:process,2:"))
    assert depth2.find("failure") is None
    error = depth2.find("error")
    assert error is not None and error.text is not None and REPRO_D2 in error.text


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.classes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for key, value in attrs:
            if key == "id" and value:
                self.ids.append(value)
            if key == "class" and value:
                self.classes.append(value)


def test_html_is_self_contained_and_escaped(
    report: tuple[Path, dict[str, Any], list[Path]],
) -> None:
    out, _, _ = report
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page and "https://" not in page
    assert page.count('<table class="matrix"') == 2

    parsed = _Tags()
    parsed.feed(page)
    assert "script" not in parsed.tags
    assert not {"link", "img", "iframe", "object", "embed"} & set(parsed.tags)
    assert len(parsed.ids) == len(set(parsed.ids))
    assert "cell v-safety" in parsed.classes and "cell v-liveness" in parsed.classes
    assert "crash" in parsed.classes  # the CRASH timeline line is highlighted
    assert REPRO in page and REPRO_D2 in page
    assert "some crash kinds asked for are not simulated on this store" in page
    assert "\x1b" not in page and "\x00" not in page and "2 charges \\x1b[31m" in page
    # the matrix for calm[sqlite] has process columns only (power was not simulated)
    calm = page[page.index('aria-label="crash matrix calm[sqlite]"') :]
    calm = calm[: calm.index("</table>")]
    assert calm.count("<th>before<br>") == 1 and "power" not in calm


def test_markdown_escapes_and_carries_repro(
    report: tuple[Path, dict[str, Any], list[Path]],
) -> None:
    out, _, _ = report
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# durable-sim report")
    assert f"```sh\n{REPRO}\n```" in md
    assert "tool.call\\|pipe &lt;script&gt;alert(1)&lt;/script&gt;" in md
    for line in md.splitlines():
        if line.startswith("|"):
            assert "<" not in line and ">" not in line
            # every cell boundary is an unescaped pipe; the label's pipe is escaped
            assert "call|pipe" not in line
    assert "- sqlite: some crash kinds asked for are not simulated on this store" in md
    assert "| evil_scenario | file | 3 | 18 | 15 | 1 | 1 | 0 | 1 | 0.50 |" in md
    # the witness row with a ``` run is fenced with four backticks
    assert "````text\npayments.charge #1 answer=<script>" in md
    assert "I1 effects match policy" in md
    assert "\x1b" not in md and "\x00" not in md and "actual:   2 charges \\x1b[31m" in md


def test_many_failures_and_schedules_not_run(tmp_path: Path) -> None:
    results = synthetic_results()
    evil = results["scenarios"][0]
    evil["crash_kinds"] = ["process"]
    evil["boundaries"] = 40
    evil["labels"] = [f"store.commit#{i}" for i in range(40)]
    schedules = [f"{i}:{when}:process" for i in range(30) for when in ("before", "after")]
    evil["matrix"] = _matrix(30, ["process"], dict.fromkeys(schedules, "safety"))
    evil["failures"] = [
        _failure(sch, "safety", "I5", f"durable-sim replay --schedule {sch}") for sch in schedules
    ]
    evil["failures"].insert(
        0, _failure("none", "error", "I0", "durable-sim replay --schedule none")
    )
    evil["schedules"] = 61
    evil["verdicts"] = {"error": 1, "safety": 60, "liveness": 0, "nondeterminism": 0, "pass": 0}
    write_report(tmp_path, results)

    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    parsed = _Tags()
    parsed.feed(page)
    assert parsed.classes.count("cell v-safety") == 60
    assert parsed.classes.count("cell v-notrun") == 20  # boundaries 30..39 never crashed at
    assert page.count('<article class="card failure') == 50  # DETAIL_LIMIT of 61 in full
    assert 'id="more-0"' in page and 'href="#more-0"' in page
    assert "durable-sim replay --schedule 29:after:process" in page  # listed, not detailed
    assert '<a href="#f-0-0"><span class="badge v-error">error</span></a>' in page

    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("61", "60", "1")
    reference = suite.find("testcase")
    assert reference is not None and reference.find("error") is not None

    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert md.count("durable-sim replay --schedule") == 50
    assert md.count("| `29:after:process` | safety | I5 inputs settled, no duplicates |") == 1


def test_markdown_code_helpers() -> None:
    assert code("a`b") == "``a`b``"
    assert code("`x") == "`` `x ``"
    assert code("a|b", in_table=True) == "`a\\|b`"
    assert block(["```"]) == ["````text", "```", "````"]


def test_unwritable_out_dir_raises_report_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ReportError) as caught:
        write_report(blocker / "out", synthetic_results())
    message = str(caught.value)
    assert "\n" not in message and str(blocker) in message


def test_report_from_a_real_sweep(tmp_path: Path) -> None:
    from sim.explore.sweep import sweep
    from sim.world.scenario import load_scenario

    s = sweep(
        SweepPlan(
            scenario=load_scenario("idempotent_payment"),
            store=StoreKind.SQLITE,
            crash_kinds=(CrashKind.PROCESS, CrashKind.POWER, CrashKind.STORAGE),
            determinism="off",
        )
    )
    assert (
        not s.expansion.skipped_storage and not s.expansion.skipped_power
    )  # SQLite takes every kind
    results = {
        "schema_version": 1,
        "tool": "durable-sim",
        "tool_version": "0.1.0",
        "config": {"store": "sqlite", "depth": 1},
        "scenarios": [s.to_json()],
        "totals": {"schedules": s.schedules, "verdicts": s.verdicts, "wall_s": s.wall_s},
    }
    write_report(tmp_path, results)
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8")) == results
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "idempotent_payment[sqlite]"
    assert int(suite.attrib["tests"]) == s.schedules  # nothing skipped: SQLite takes every kind
    assert int(suite.attrib["skipped"]) == 0
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert page.count('<table class="matrix"') == 1
    assert page.count('<td class="i mono">') == s.reference.boundaries
    assert "http://" not in page and "https://" not in page
    assert "idempotent_payment" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_junit_names_the_schedules_outside_a_depth_1_matrix_power_tears() -> None:
    """A depth-1 sweep's schedules outside the matrix are its enumerated power tears
    (``3:after:power~1``), never "depth-2"."""
    from sim.outputs.report.junit import _suite

    cell = {"index": 0, "when": "after", "kind": "power", "verdict": "pass"}
    suite = _suite({"name": "s", "store": "file", "depth": 1, "schedules": 4, "matrix": [cell]})
    names = [c.get("name") for c in suite.findall("testcase")]
    assert "2 further schedules (power tears), all passing" in names
    assert not any("depth-2" in str(name) for name in names)


def _junit_cases(sweep: dict[str, Any]) -> tuple[ET.Element, dict[str, str]]:
    """The suite of ``sweep`` and each testcase's outcome by name: pass, or its tag."""
    from sim.outputs.report.junit import _suite

    suite = _suite(sweep)
    cases = {}
    for case in suite.findall("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "pass")
        cases[str(case.get("name"))] = outcome
    return suite, cases


def test_junit_counts_a_failing_tear_once_as_its_own_testcase() -> None:
    """A point's enumerated tears share one matrix cell showing the worst of them: that cell
    was a failing testcase ("no failure details recorded") beside the failing tear's own, so one
    failure counted twice. Now every failing schedule is one testcase and nothing else fails."""
    labels = ["store.commit#1", "fs.fsync:log"]
    matrix = [
        {"index": 1, "when": "after", "kind": "process", "verdict": "pass"},
        {"index": 1, "when": "after", "kind": "power", "verdict": "pass"},
        {"index": 1, "when": "after", "kind": "tear", "verdict": "safety"},  # ~1 passed, ~2 not
    ]
    tear = _failure("1:after:power~2", "safety", "I3", "durable-sim replay ... 1:after:power~2")
    sweep = {"name": "s", "store": "file", "depth": 1, "schedules": 5, "matrix": matrix}
    sweep |= {"labels": labels, "failures": [tear]}
    suite, cases = _junit_cases(sweep)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "0")
    assert cases == {
        "reference (fault-free run)": "pass",
        "1:after:process fs.fsync:log": "pass",
        "1:after:power fs.fsync:log": "pass",
        f"1:after:power~2 {PIPE_LABEL}": "failure",
        "1 further schedules (power tears), all passing": "pass",
    }


def test_junit_finds_the_failure_of_a_cell_after_a_base_crash() -> None:
    """A scenario with a crash of its own (its base schedule): a failure names the whole
    schedule (``0:after:process,2:before:process``), the matrix the point only. The cell's
    testcase carries that failure, once."""
    matrix = [{"index": 2, "when": "before", "kind": "process", "verdict": "safety"}]
    failure = _failure("0:after:process,2:before:process", "safety", "I1", REPRO_D2)
    sweep = {"name": "s", "store": "file", "depth": 1, "schedules": 2, "matrix": matrix}
    sweep |= {"labels": ["a", "b", "c"], "failures": [failure]}
    sweep["base_schedule"] = "0:after:process"
    suite, cases = _junit_cases(sweep)
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    assert cases == {"reference (fault-free run)": "pass", "2:before:process c": "failure"}
    text = "".join(suite.itertext())
    assert "no failure details" not in text and REPRO_D2 in text


def test_every_i2_failure_card_shows_expected_and_actual() -> None:
    """I2's violations (the log's form) had no expected/actual, so their cards showed two empty
    lines where every other invariant's show the difference. A fault-free run's log, broken in
    each way I2 tells apart."""
    import dataclasses

    from sim.judgement.oracles.log import check_log
    from sim.judgement.violation import Violation
    from sim.outputs.report.markdown import render
    from sim.run.runner import run_scenario
    from sim.world.scenario import load_scenario

    result = run_scenario(load_scenario("idempotent_payment"), seed=0, store="file")
    records = list(result.durable.records)
    assert len(records) > 3 and check_log(result) == []

    def unended(record: Any) -> Any:  # the same record, not the last of its batch, resealed
        return record.model_copy(update={"last_in_batch": False}).sealed()

    broken = {
        "sequences are not contiguous": records[:1] + records[2:],
        "fails its checksum": [records[0].model_copy(update={"checksum": "0" * 64}), *records[1:]],
        "a partial batch is visible": [*records[:-1], unended(records[-1])],
        "a batch ends without its last record": [unended(records[0]), *records[1:]],
    }
    violations: list[Violation] = []
    for what, log in broken.items():
        durable = dataclasses.replace(result.durable, records=log)
        violations = check_log(dataclasses.replace(result, durable=durable))
        assert what in violations[0].explanation, (what, violations)
        for v in violations:
            assert v.invariant == "I2" and v.expected and v.actual, (what, v)
    card = render(
        {"scenarios": [{"name": "s", "store": "file", "failures": [violations[0].to_json()]}]}
    )
    assert f"expected: {violations[0].expected}" in card
