"""Recovery only (``target sweep --recovery-only``, ``sim.targets.recovery_only``): each point
starts from a snapshot of the fault-free run's files at its instant, judged as the real way
judges it; a prefix that is not deterministic is caught by the check, which then sweeps the
real way; targets whose state is not all in the point's directory are refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from targetkit import app_options
from testkit import terminated
from tiers import tiered

from sim.explore.recording import ScenarioSweep
from sim.outputs.cli.main import main
from sim.targets import recovery_only
from sim.targets.host import Crash
from sim.targets.protocol import TargetOptions
from sim.targets.recovery_only import CHECK_ONE_IN, RecoveryCheck, checked, refusal
from sim.targets.registry import get_target, target_names
from sim.targets.snapshots import MANIFEST, Snapshotter, snapshots_in
from sim.targets.sweep import sweep_target
from sim.world.faults import When

#: A job whose prefix depends on a file outside its working directory (named by
#: ``PLANTED_OUTSIDE``): the first process that ever runs charges, then marks the order done;
#: every later one marks it done first. The fault-free run is the first; a real crash point's
#: first process is not, so its prefix differs from the snapshots'.
OUTSIDE_STATE_JOB = """\
import os
import sqlite3
from pathlib import Path


def charge(order):
    return f"charged {order}"


def main():
    outside = Path(os.environ["PLANTED_OUTSIDE"])
    first = not outside.exists()
    outside.write_text("seen", encoding="utf-8")
    db = sqlite3.connect("job.db")
    db.execute("create table if not exists done (id text primary key)")
    if db.execute("select 1 from done").fetchone() is None:
        if first:
            charge("o-1")
            with db:
                db.execute("insert into done values ('o-1')")
        else:
            with db:
                db.execute("insert into done values ('o-1')")
            charge("o-1")
    db.close()
    return "done"
"""


def _seen(sweep: ScenarioSweep) -> tuple[list[str], list[list[str]]]:
    matrix = [c["verdict"] for c in sweep.matrix]
    return matrix, [f.invariants for f in sweep.failures]


#: The targets whose points may start from snapshots (``snapshot_refusal`` None).
SNAPSHOTTED = [n for n in target_names() if get_target(n).snapshot_refusal is None]


@pytest.mark.parametrize(
    ("name", "variant"),
    # A framework's as-is demo (whose points fail) with --run-slow; its keyed one took the same
    # path through the snapshots when measured (docs/targets.md), a repetition not repeated here.
    tiered(
        [("python", "fixed"), *[(n, "as_is") for n in SNAPSHOTTED]],
        fast=[("python", "as_is"), ("python", "fixed")],
    ),
)
def test_every_point_from_its_snapshot_is_judged_as_the_real_way_judges_it(
    name: str, variant: str
) -> None:
    target = get_target(name)
    if target.missing() is not None:
        pytest.skip(target.missing() or "")
    demo = target.demo()
    options = demo.as_is if variant == "as_is" else demo.fixed
    real = sweep_target(target, options)
    snap = sweep_target(target, options, recovery=RecoveryCheck.FULL)
    assert _seen(snap) == _seen(real)
    assert (variant == "as_is") == bool(real.failures)
    children = snap.reference.outcome["children"]
    assert f"recovery only, from the fault-free run's files at each instant ({snap.schedules} " in (
        children
    ), children
    assert "not from snapshots" not in children
    if snap.failures:  # the timeline says no process was killed there
        assert any("CRASH (recorded: " in line for line in snap.failures[0].timeline)
        assert snap.failures[0].repro == real.failures[0].repro  # the real way replays it


@pytest.fixture
def outside_state_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TargetOptions:
    job = tmp_path / "outside_job.py"
    job.write_text(OUTSIDE_STATE_JOB, encoding="utf-8")
    monkeypatch.setenv("PLANTED_OUTSIDE", str(tmp_path / "seen-by-any-run"))
    return app_options("python", f"{job}:main", effects=["charge=exactly_once"])


def _clear_outside(tmp_path: Path) -> None:
    (tmp_path / "seen-by-any-run").unlink(missing_ok=True)


def test_the_check_catches_a_prefix_kept_outside_the_directory_and_sweeps_the_real_way(
    outside_state_job: TargetOptions,
) -> None:
    target = get_target("python")
    snap = sweep_target(target, outside_state_job, recovery=RecoveryCheck.FULL)
    children = snap.reference.outcome["children"]
    assert "not from snapshots: the check found point " in children, children
    assert "so every point ran the real way" in children
    # Swept again the real way, from the start: what a real sweep finds now (the file outside
    # is there, as it was for that second sweep).
    real = sweep_target(target, outside_state_job)
    assert _seen(snap) == _seen(real)


def test_without_the_check_the_snapshots_judge_that_prefix_wrongly(
    outside_state_job: TargetOptions, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: no point run the real way, nothing else notices the difference."""
    target = get_target("python")
    real = sweep_target(target, outside_state_job)
    _clear_outside(tmp_path)
    monkeypatch.setattr(recovery_only, "checked", lambda *_a, **_k: set())
    snap = sweep_target(target, outside_state_job, recovery=RecoveryCheck.SAMPLE)
    assert "not from snapshots" not in snap.reference.outcome["children"]
    assert _seen(snap) != _seen(real)


def test_the_sample_is_seeded_one_in_sixteen_and_at_least_one() -> None:
    crashes = [Crash(i, when, f"b#{i}") for i in range(40) for when in When]
    picked = checked(crashes, RecoveryCheck.SAMPLE)
    assert len(picked) == -(-80 // CHECK_ONE_IN) == 5
    assert picked == checked(list(reversed(crashes)), RecoveryCheck.SAMPLE)  # not by position
    assert picked != checked(crashes, RecoveryCheck.SAMPLE, seed=1)
    assert len(checked(crashes[:3], RecoveryCheck.SAMPLE)) == 1
    assert checked(crashes, RecoveryCheck.FULL) == {c.text() for c in crashes}
    assert checked([], RecoveryCheck.SAMPLE) == set()


def test_snapshots_stop_at_their_limit_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point, into = tmp_path / "point", tmp_path / "into"
    point.mkdir()
    into.mkdir()
    (point / "state.json").write_text('{"step": 1}', encoding="utf-8")
    (point / "sub").mkdir()
    (point / "sub" / "log").write_bytes(b"x" * 10)
    monkeypatch.setattr("sim.targets.snapshots.MAX_INSTANTS", 2)
    snap = Snapshotter(point, into)
    for label in ("a#1", "b#1", "c#1"):
        snap(label, "before")
    copies, full = snapshots_in(into)
    assert sorted(copies) == [("a#1", "before"), ("b#1", "before")]
    assert full is not None and "past 2 instants" in full
    assert (copies[("b#1", "before")] / "sub" / "log").read_bytes() == b"x" * 10
    assert len((into / MANIFEST).read_text(encoding="utf-8").splitlines()) == 3


def test_a_file_no_snapshot_holds_stops_the_snapshots_not_the_run(tmp_path: Path) -> None:
    """A FIFO in the directory (or a socket, a device): the copy stops there, says why, and
    raises nothing into the program whose call the instant is in; a file keeps its times."""
    point, into = tmp_path / "point", tmp_path / "into"
    point.mkdir()
    into.mkdir()
    (point / "state.json").write_text("{}", encoding="utf-8")
    os.utime(point / "state.json", ns=(1_000_000_000, 2_000_000_000))
    snap = Snapshotter(point, into)
    snap("a#1", "before")
    os.mkfifo(point / "pipe")
    snap("b#1", "before")
    snap("c#1", "before")
    copies, stopped = snapshots_in(into)
    assert sorted(copies) == [("a#1", "before")]
    assert stopped is not None and "is not a regular file" in stopped and "b#1" in stopped
    assert (copies[("a#1", "before")] / "state.json").stat().st_mtime_ns == 2_000_000_000
    assert sorted(p.name for p in into.iterdir()) == ["0", MANIFEST]  # no half copy left


def test_state_outside_the_point_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert refusal(get_target("langgraph"), TargetOptions()) is not None
    preempted = TargetOptions(app=get_target("python").demo().as_is.app, preempt_s=1.0)
    assert "preemption" in str(refusal(get_target("python"), preempted))
    assert main(["target", "sweep", "python", "--recovery-only=sometimes"]) == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


#: A job long enough to be stopped in the middle: 30 orders, each 50 ms of work.
LONG_JOB = """\
import sqlite3
import time


def charge(order):
    return f"charged {order}"


def main():
    db = sqlite3.connect("progress.sqlite")
    db.execute("create table if not exists done (id text primary key)")
    done = {row[0] for row in db.execute("select id from done")}
    for n in range(30):
        if f"o-{n}" not in done:
            time.sleep(0.05)
            charge(f"o-{n}")
            with db:
                db.execute("insert into done values (?)", (f"o-{n}",))
    return "done"
"""


@pytest.mark.slow
def test_sigterm_stops_a_recovery_only_sweep_started_with_sigint_ignored(tmp_path: Path) -> None:
    """SIGTERM stops the command as Ctrl-C would -- even started as a script's ``&`` job, with
    SIGINT ignored, where the SIGINT it turns into was once lost and the sweep ran every point
    -- and leaves no temporary directory (the snapshots' neither)."""
    job = tmp_path / "long_job.py"
    job.write_text(LONG_JOB, encoding="utf-8")
    command = ["target", "sweep", "python", "--app", f"{job}:main", "--effect", "charge"]
    command += ["--recovery-only", "--out", str(tmp_path / "report")]
    status, stderr = terminated(
        command, tmp_path, started="durable-sim-snapshots-*", sigint_ignored=True
    )
    assert status == 130, stderr
    assert stderr.strip().splitlines()[-1] == "durable-sim: interrupted", stderr
    assert "[120/120]" not in stderr, "the sweep ran to its end"
