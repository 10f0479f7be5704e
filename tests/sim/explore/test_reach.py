"""Reach: every recovery branch of ``durable/`` stays reached (sim/explore/reach/).

The full measurement (the default sweep and the fuzzer under coverage.py) takes many minutes, so
CI replays the *reach corpus* instead: a few schedules chosen from the full measurement so that
together they reach every recovery branch it reached. Each replay runs in a fresh interpreter that
starts coverage before ``durable`` is imported, as ``durable-sim coverage`` does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testkit import REPO

from sim.explore import reach
from sim.explore.reach.measurement import CaseRun

ROOT = REPO
CORPUS = ROOT / "tests" / "reach_corpus.json"


def _coverage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sim", "coverage", "--quiet", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def _report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return report


def test_the_reach_corpus_reaches_every_recovery_branch(tmp_path: Path) -> None:
    out = tmp_path / "reach.json"
    done = _coverage("--from-corpus", str(CORPUS), "--json", str(out))
    assert out.exists(), done.stderr
    report = _report(out)
    failing = [b for b in report["unreached"] if b["allowed"] is None]
    problems = [f"{b['branch']} in {b['function']}: {b['from']}  ->  {b['to']}" for b in failing]
    problems += [
        f"stale allowance in sim/explore/reach/regions.py: {s}" for s in report["stale_allowances"]
    ]
    problems += report["measurement"]["notes"]
    assert not problems and done.returncode == 0, (
        "recovery branches the reach corpus no longer reaches (a scenario or the runtime "
        "changed; if the boundary numbering moved, regenerate the corpus with "
        f"`{reach.REGENERATE}`, which runs the full measurement, and check that it still reaches "
        "them; otherwise add a scenario that does):\n  " + "\n  ".join(problems) + done.stderr
    )


def test_an_empty_corpus_reports_the_unreached_branches(tmp_path: Path) -> None:
    """The check can fail: with nothing replayed, every recovery branch is unreached."""
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema_version": 1, "seed": 0, "cases": []}))
    out = tmp_path / "reach.json"
    done = _coverage("--from-corpus", str(empty), "--json", str(out))
    assert done.returncode == 1, done.stderr
    report = _report(out)
    assert report["recovery"]["reached"] == 0
    assert report["recovery"]["unreached_failing"] > 0
    assert "durable/tasks/tool.py:" in done.stdout and "UNREACHED" in done.stdout
    assert any(b["function"] == "_recover" for b in report["unreached"])


@pytest.mark.slow
def test_forked_sweep_children_report_their_coverage(tmp_path: Path) -> None:
    """The branches only a crash reaches run in forked children, which leave with ``os._exit``:
    without the hook in ``sim.explore.forking`` the re-execution of a verified-not-applied edit
    (reached
    only after a crash before its effect) would count as unreached."""
    out = tmp_path / "reach.json"
    _coverage(
        "--scenario",
        "verify_then_continue_edit",
        "--store",
        "file",
        "--no-fuzz",
        "--json",
        str(out),
    )
    report = _report(out)
    (sweep,) = report["measurement"]["sweeps"]
    assert sweep["measured_children"] > 0
    recover_branches = [k for k in report["reached_keys"] if k.startswith("durable/tasks/tool.py")]
    assert recover_branches
    assert not any(
        b["function"] == "_recover" and b["from"] == 'if status == "not_applied":'
        for b in report["unreached"]
    )


def test_without_coverage_installed_the_command_is_one_line_and_exit_2() -> None:
    program = (
        "import sys; sys.modules['coverage'] = None\n"
        "from sim.outputs.cli import main\n"
        "sys.exit(main(['coverage', '--no-fuzz']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("durable-sim: coverage.py is not installed")


def test_a_region_that_is_gone_is_named() -> None:
    with pytest.raises(reach.ReachError, match=r"durable/journal\.py:no_such_function"):
        reach.find_regions(["durable/journal.py:no_such_function"])


def test_regions_include_their_nested_functions() -> None:
    (region,) = reach.find_regions(["durable/tasks/generation.py:_tools"])
    (nested,) = reach.find_regions(["durable/tasks/generation.py:_tools.build"])
    assert nested.lines < region.lines


def test_the_child_hook_does_nothing_outside_a_measurement() -> None:
    assert reach.measurement._SINK is None
    reach.save_child_coverage("3:after:process")  # returns at once: no sink, no coverage import


def test_the_corpus_names_the_boundaries_its_crash_points_were_chosen_at() -> None:
    doc = reach.load_corpus(str(CORPUS))
    assert doc["cases"]
    for case in doc["cases"]:
        for run in case["runs"]:
            points = [] if run["schedule"] == "none" else run["schedule"].split(",")
            assert len(run["labels"]) == len(points)


def test_the_corpus_is_a_greedy_cover_preferring_cheap_cases() -> None:
    """Each branch is covered once; of two cases reaching the same branches, the cheaper wins;
    a branch no case is credited with is named as uncovered."""
    path = "durable/tasks/tool.py"

    def case(schedule: str, cost: int, *arcs: tuple[int, int]) -> reach.Case:
        run: CaseRun = {"schedule": schedule, "fault_free": False, "labels": ["x"]}
        return reach.Case("s", "file", [run], {(path, a, b) for a, b in arcs}, cost)

    raw = reach.Raw(
        cases=[
            case("1:after:process", 50, (10, 11), (20, 21)),
            case("2:after:process", 10, (10, 11), (20, 21)),
            case("3:after:process", 10, (30, 31)),
        ]
    )
    keys = [f"{path}:10->11", f"{path}:20->21", f"{path}:30->31", f"{path}:40->41"]
    report = {"reached_keys": keys, "reached_allowed": []}
    corpus = reach.build_corpus(raw, report, seed=0, translate=lambda arcs: arcs)
    chosen = [c["runs"][0]["schedule"] for c in corpus["cases"]]
    assert chosen == ["2:after:process", "3:after:process"]
    assert corpus["uncovered"] == [f"{path}:40->41"]


@pytest.mark.slow
def test_a_written_corpus_replays_to_every_branch_its_measurement_reached(tmp_path: Path) -> None:
    """The whole pipeline on one scenario: forked children's coverage, credit beyond the
    fault-free runs, greedy cover, and the replay CI runs, which must reach the same branches."""
    corpus, measured, replayed = (tmp_path / n for n in ("c.json", "m.json", "r.json"))
    # Process kills and power losses only: with the pause kind, the replay missed one branch its
    # measurement reached (the fence's StaleLease, durable/store/base.py) -- a pause in a forked
    # child and in a fresh run agree on every verdict but not yet on every branch (docs/reach.md,
    # "Known gap").
    _coverage(
        *("--scenario", "zombie_abort", "--store", "file", "--no-fuzz", "--crash", "process,power"),
        *("--write-corpus", str(corpus), "--json", str(measured)),
    )
    assert _report(measured)["corpus"]["uncovered"] == []
    _coverage("--from-corpus", str(corpus), "--json", str(replayed))
    assert set(_report(replayed)["reached_keys"]) == set(_report(measured)["reached_keys"])
    assert 0 < len(reach.load_corpus(str(corpus))["cases"]) < 20
