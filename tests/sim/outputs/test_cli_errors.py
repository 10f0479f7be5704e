"""Bad input and long runs on the command line: one line and exit 2, never a traceback; progress
that a CI log shows; a scenario whose fault-free run fails is refused at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from testkit import REPO, terminated
from tiers import tiered

from sim.outputs import options
from sim.outputs.cli import main
from sim.outputs.cli.bench import _sweep_totals
from sim.outputs.cli.sweep import FAILURES_SHOWN
from sim.world.faults import CrashKind
from sim.world.scenario import SCENARIO_DIR, ScenarioError
from sim.world.stores import StoreKind


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in a child process whose stderr is a pipe, as in CI."""
    return subprocess.run(
        [sys.executable, "-m", "sim", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd or REPO,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _one_line_usage_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


# Each of these families starts a process per case: the fast tier keeps one case of each.
@pytest.mark.parametrize(
    "seed",
    tiered(
        ["-1", "99999999999999999999999999", "18446744073709551616", "x"],
        fast=["18446744073709551616"],  # one past the largest seed accepted below
    ),
)
def test_seeds_outside_the_documented_range_are_refused(seed: str) -> None:
    line = _one_line_usage_error(_cli("sweep", "read_edit_answer", "--seed", seed))
    assert "--seed" in line


def test_the_largest_seed_is_accepted() -> None:
    done = _cli("run", "idempotent_payment", "--seed", str(2**64 - 1))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "args",
    tiered(
        [
            ["sweep", "--bogus"],
            ["replay", "--scenario", "idempotent_payment"],
            ["sweep", "--store", "tape"],
            ["nonsense"],
            [],
        ],
        fast=[["sweep", "--bogus"]],
    ),
)
def test_usage_errors_are_one_line(args: list[str]) -> None:
    _one_line_usage_error(_cli(*args))


def test_a_seam_that_cannot_be_loaded_is_one_line() -> None:
    line = _one_line_usage_error(
        _cli(
            "replay",
            "--scenario",
            "idempotent_payment",
            "--schedule",
            "3:after:process",
            "--file-store",
            "no/such/file.py:store",
        )
    )
    assert "no/such/file.py" in line


@pytest.mark.parametrize(
    "content",
    tiered(
        [
            '{"x": 1}',
            "not json",
            '{"totals": {"schedules": 1}}',
            '{"totals": [1]}',
            '{"totals": {"schedules": 1, "failures": 0, "wall_s": 1.5, "folded": "many"}}',
        ],
        fast=["not json"],
    ),
)
def test_bench_refuses_a_bad_results_document_before_it_measures(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "results.json"
    path.write_text(content)
    line = _one_line_usage_error(_cli("bench", "--sweep-results", str(path)))
    assert str(path) in line


def test_bench_reads_a_results_document_from_before_folding(tmp_path: Path) -> None:
    """Documents written before folding existed have no ``folded`` total: read, not refused."""
    path = tmp_path / "results.json"
    path.write_text('{"totals": {"schedules": 10, "failures": 0, "wall_s": 2.5}}')
    totals = _sweep_totals(path)
    assert totals == {
        "path": str(path),
        "schedules": 10,
        "failures": 0,
        "wall_s": 2.5,
        "folded": None,
    }


def _never_settling(tmp_path: Path) -> Path:
    """A valid scenario whose fault-free run cannot settle: the tool takes longer than the
    liveness bound allows."""
    doc = json.loads((SCENARIO_DIR / "idempotent_payment.json").read_text())
    doc["name"] = "never_settles"
    doc["tools"][0]["latency_s"] = 100.0
    doc["liveness_bound_s"] = 10.0
    path = tmp_path / "never_settles.json"
    path.write_text(json.dumps(doc))
    return path


def test_run_says_why_a_fault_free_run_fails(tmp_path: Path) -> None:
    done = _cli("run", str(_never_settling(tmp_path)))
    assert done.returncode == 2
    assert "did not settle within its liveness bound (10 s" in done.stderr


def test_sweep_refuses_a_scenario_whose_fault_free_run_fails(tmp_path: Path) -> None:
    done = _cli(
        "sweep", str(_never_settling(tmp_path)), "--store", "file", "--out", str(tmp_path / "r")
    )
    assert done.returncode == 2, done.stderr  # refused: bad input, like every item here
    assert "its fault-free run fails (I7" in done.stderr
    assert "no crash schedule was run" in done.stderr
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["totals"]["schedules"] == 1
    assert doc["scenarios"][0]["reference_failed"] is True


@pytest.mark.slow
def test_sweep_prints_progress_lines_when_not_on_a_terminal(tmp_path: Path) -> None:
    done = _cli(
        "sweep",
        "idempotent_payment",
        "--store",
        "both",
        "--crash",
        "process",
        "--no-determinism-check",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("sweep: ")]
    assert progress[0] == "sweep: idempotent_payment[file] ..."
    assert any(
        line.startswith("sweep: idempotent_payment[sqlite] ") and "pass" in line
        for line in progress
    )
    quiet = _cli(
        "sweep",
        "idempotent_payment",
        "--store",
        "file",
        "--crash",
        "process",
        "--no-determinism-check",
        "--quiet",
        "--out",
        str(tmp_path),
    )
    assert quiet.stderr == ""


def test_the_summary_says_how_many_failures_it_did_not_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.explore.mutants import mutant_named, planted

    mutant = mutant_named("key-per-attempt")
    with planted(mutant):
        code = main(
            [
                "sweep",
                mutant.scenario,
                "--store",
                "file",
                "--no-determinism-check",
                "--quiet",
                "--out",
                str(tmp_path),
            ]
        )
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "results.json").read_text())
    failures = doc["totals"]["failures"]
    assert code == 1 and failures > FAILURES_SHOWN
    assert f"and {failures - FAILURES_SHOWN} more failures of" in out


def test_fuzz_writes_nothing_into_a_foreign_directory(tmp_path: Path) -> None:
    """Run outside the repository, a passing fuzz run leaves the current directory empty."""
    done = _cli(
        "fuzz",
        "idempotent_payment",
        "--examples",
        "3",
        "--no-machine",
        "--hypothesis-dir",
        str(tmp_path / "hyp"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name for p in tmp_path.iterdir()} <= {"hyp"}  # no corpus, no .hypothesis
    assert "fuzz: schedules of idempotent_payment[file] no failure" in done.stderr
    # --examples is what one fuzzer runs, and the total says so (it once read "102 examples")
    assert "fuzz: 3 examples (1 fuzzer, up to 3 each)" in done.stdout


@pytest.mark.slow
def test_sigterm_stops_a_sweep_cleanly(tmp_path: Path) -> None:
    """A cancelled CI job sends SIGTERM: the sweep stops with exit 130, kills its forked
    children and leaves no temporary directory behind."""
    command = ["sweep", "long_horizon", "--store", "file", "--crash", "process"]
    command += ["--no-determinism-check", "--out", str(tmp_path / "r")]
    status, stderr = terminated(command, tmp_path, started="durable-sim-fork-*")
    assert status == 130, stderr
    assert "durable-sim: interrupted" in stderr
    assert "Traceback" not in stderr


def test_a_reader_that_goes_away_gets_no_traceback() -> None:
    """``durable-sim replay ... | head``: the reader is gone; the command stops quietly (status
    141, as for SIGPIPE) instead of printing a BrokenPipeError traceback. The pipe's read end is
    closed before the command starts, so its first write fails, every time."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sim", "run", "idempotent_payment"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr.decode()
    assert b"Traceback" not in done.stderr


def _refused_in_one_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``main`` in this process: exit 2, one line on stderr, no traceback."""
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


TOO_MANY_JOBS = str(options.max_jobs() + 1)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["sweep", "--store", "tape"], "unknown store kind 'tape'"),
        (["sweep", "--store", "file,,sqlite"], "an empty item in 'file,,sqlite'"),
        (["sweep", "--store", ""], "--store"),
        (["sweep", "--crash", "process,,power"], "an empty item in 'process,,power'"),
        (["sweep", "--crash", "powr"], "unknown crash kind 'powr'"),
        (["sweep", "--out", ""], "--out"),
        (["sweep", ""], "SCENARIO"),
        (["sweep", "--file-store", ""], "--file-store"),
        (["sweep", "--jobs", "0"], "--jobs"),
        (["sweep", "--jobs", TOO_MANY_JOBS], f"{TOO_MANY_JOBS} is outside 1..{options.max_jobs()}"),
        (["sweep", "--depth", "3"], "--depth"),
        (["replay", "--scenario", "idempotent_payment", "--schedule", ""], "--schedule"),
        (["replay", "--scenario", "", "--schedule", "none"], "--scenario"),
        (["replay", "--scenario", "x", "--schedule", "3:after:powr"], "'3:after:powr'"),
        (
            ["replay", "--scenario", "x", "--schedule", "20:before:process,14:after:power"],
            "crash points out of order in '20:before:process,14:after:power'",
        ),
        (["run", "idempotent_payment", "--store", "file,sqlite"], "run runs one store"),
        (["run", "idempotent_payment", "--store", "both"], "run runs one store"),
        (["realcrash", "read_edit_answer", "--store", "postgres"], "realcrash does not take"),
        (["realcrash", "read_edit_answer", "--points", "0"], "--points"),
        (["fuzz", "--store", "postgres"], "fuzz does not take the postgres store"),
        (["fuzz", "--examples", "0"], "--examples"),
        (["fuzz", "--corpus", ""], "--corpus"),
        (["fuzz", "--budget", "1m", "--examples", "5"], "--examples and --budget"),
        (["fuzz", "--unit-examples", "5"], "--unit-examples needs --budget"),
        (["coverage", "--store", "postgres"], "coverage does not take the postgres store"),
        (["coverage", "--crash", "process,"], "--crash"),
        (["bench", "--repeats", "51"], "--repeats"),
        (["bench", "--growth-turns", "10,,25"], "--growth-turns"),
        (["bench", "--growth-turns", "201"], "--growth-turns"),
        (["bench", "--scenarios", ""], "--scenarios"),
        (["workers", "--workers", "17"], "--workers"),
        (["workers", "--seed", "-1"], "--seed"),
        (["workers", "--deadline", "0"], "--deadline"),
        (["workers", "--store", "tape"], "unknown store kind 'tape'"),
        (["target", "sweep", "langgraph", "--timeout", "0"], "--timeout"),
        (["target", "replay", "langgraph", "--schedule", ""], "--schedule"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_every_refusal_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    line = _refused_in_one_line(capsys, *args)
    assert named in line, line


def test_both_is_file_and_sqlite_and_postgres_is_only_taken_by_name() -> None:
    both = (StoreKind.FILE, StoreKind.SQLITE)
    assert options.stores("both", command="sweep") == both
    assert options.stores("file,sqlite,file", command="sweep") == both
    assert options.stores("postgres,both", command="sweep") == (StoreKind.POSTGRES, *both)
    assert StoreKind.POSTGRES not in options.DEFAULT_STORES
    assert options.crash_kinds(" process , power ") == (CrashKind.PROCESS, CrashKind.POWER)


SEAMS = """
from durable.store.file import FileStore

def raising_store(root, fs, fsync):
    raise ValueError("boom")

def store_of_the_wrong_type(root, fs, fsync):
    return 42

def raising_runtime(**keywords):
    raise ValueError("no runtime today")

def runtime_of_the_wrong_type(**keywords):
    return "a runtime"
"""


@pytest.mark.parametrize(
    ("seam", "status", "named"),
    [
        ("--file-store=seams.py:raising_store", 5, "the file_store seam"),
        ("--file-store=seams.py:store_of_the_wrong_type", 2, "not a store"),
        ("--open-runtime=seams.py:raising_runtime", 5, "raised ValueError: no runtime today"),
        ("--open-runtime=seams.py:runtime_of_the_wrong_type", 2, "not an async context manager"),
    ],
    ids=["store-raises", "store-wrong-type", "runtime-raises", "runtime-wrong-type"],
)
def test_user_code_at_a_seam_is_one_line_never_a_safety_verdict(
    tmp_path: Path, seam: str, status: int, named: str
) -> None:
    """Exit 2 for a seam that builds the wrong thing, 5 (the harness's) for one that raises
    while the simulator runs it -- never 1 (a safety violation), never a traceback."""
    (tmp_path / "seams.py").write_text(SEAMS)
    done = _cli(
        "replay", "--scenario", "idempotent_payment", "--schedule", "none", seam, cwd=tmp_path
    )
    assert done.returncode == status, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert named in lines[0] and "seams.py:" in lines[0], lines


def test_debug_raises_bad_input_with_its_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ScenarioError, match="unknown scenario"):
        main(["--debug", "run", "no_such_scenario"])
    assert "unknown scenario" in _refused_in_one_line(capsys, "run", "no_such_scenario")


def test_a_long_repro_line_is_printed_on_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary is as wide as the terminal; a repro line longer than that (a scenario file
    deep in a tree, a seam) must still come out as one line, or its first line, copied, runs as
    a broken command (it once did: exit 2)."""
    from rich.console import Console

    from sim.explore.recording import Failure, ReferenceRun, ScenarioSweep
    from sim.explore.results import DISPLAY_VERDICTS
    from sim.outputs.cli import sweep as sweep_cli

    monkeypatch.setattr(sweep_cli, "wide_console", lambda: Console(width=80))  # a terminal's

    repro = (
        "durable-sim replay --scenario s.json --schedule "
        + ",".join(["3:after:process"] * 8)
        + " --file-store "
        + "a/" * 40
        + "store.py:make_store --seed 0"
    )
    failure = Failure(
        scenario="s",
        store="file",
        seed=0,
        schedule="3:after:process",
        verdict="safety",
        invariant="I1",
        explanation="x",
        witness=[],
        expected="",
        actual="",
        repro=repro,
    )
    result = ScenarioSweep(
        "s",
        "file",
        0,
        1,
        ["process"],
        reference=ReferenceRun(boundaries=9),
        schedules=18,
        verdicts=dict.fromkeys(DISPLAY_VERDICTS, 0),
        wall_s=1.0,
        failures=[failure],
    )
    sweep_cli._summary([result])
    lines = capsys.readouterr().out.splitlines()
    assert f"  repro: {repro}" in lines


def test_the_readme_says_what_a_seam_that_raises_exits_with() -> None:
    """A seam's code that raises (or does not take the seam's arguments) exits 5, the harness's
    status (``sim.errors.SeamFailed``: it is code the harness could not run, never a verdict on
    the runtime): the README's exit-status sentence says so, next to the other statuses."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    start = readme.index("Exit status: 0 all pass")
    sentence = readme[start : readme.index("Seeds are integers", start)]
    assert "5 harness error" in sentence and "--open-runtime" in sentence, sentence
    assert "--file-store" in sentence and "130 interrupted" in sentence, sentence


def test_an_interrupted_fleet_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``durable-sim workers`` stopped by Ctrl-C or SIGTERM once left its fleet's directory in
    the temporary directory (the workers were killed, the directory kept). Now it goes, unless
    ``--keep`` asked for every fleet's."""
    from sim.outputs.cli import workers
    from sim.world import tempdirs

    def interrupted(options: Any, fleet_dir: Path, **kwargs: Any) -> Any:
        (fleet_dir / "ledger.sqlite").write_text("what a fleet writes")
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the module tempdirs calls
    monkeypatch.setattr(workers, "run_fleet", interrupted)
    assert main(["workers", "--workers", "1", "--conversations", "1"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "durable-sim: interrupted"
    assert list(tmp_path.iterdir()) == []
    assert main(["workers", "--workers", "1", "--conversations", "1", "--keep"]) == 130
    (kept,) = tmp_path.iterdir()
    assert (kept / tempdirs.KEPT_FILE).exists()  # asked to keep: kept, never cleaned


ABANDONED = """
import sys
from sim.outputs.cli.main import quiet_abandoned_runs

async def step():
    pass

LEFT = step()  # a task's first step an interrupt abandoned: never awaited
quiet_abandoned_runs()
print("durable-sim: interrupted", file=sys.stderr)
sys.exit(130)
"""


def test_an_interrupted_exit_says_its_one_line_and_no_abandoned_coroutine() -> None:
    """What the interpreter says of a coroutine an interrupt left unawaited, on its way out,
    is not added to the one line (without ``quiet_abandoned_runs``: two lines more)."""
    done = subprocess.run(
        [sys.executable, "-c", ABANDONED], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130
    assert done.stderr.splitlines() == ["durable-sim: interrupted"], done.stderr
