"""A campaign driver that dies (SIGKILL, as a machine that loses power) is resumed from its unit
files: the next run runs only the missing units and gives the same results. A driver told to
stop (SIGTERM, Ctrl-C) stops promptly, exit 130, leaving no process and no temporary file. And a
long-ish trace, swept by forking, is split into several units with the one-process results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_campaign import (
    KINDS,
    POINTS,
    SMALL,
    campaign_document,
    same,
    small_plan,
    sweep_document,
)
from testkit import python_with_sigint

from sim.explore import forking
from sim.explore.campaign.engines import LocalEngine
from sim.explore.campaign.run import run_campaign
from sim.explore.sweep import FORK_FROM_BOUNDARIES
from sim.world.stores import StoreKind

pytestmark = pytest.mark.skipif(not forking.AVAILABLE, reason="needs fork and epoll")

WAIT_S = 600.0  # the longest any wait below may take (a loaded machine is slow, not hung)
# How promptly a stopped campaign must end: its workers get ``parallel.KILL_GRACE_S`` (10 s) to
# stop their sweeps; a stop that waited for the running units would take their whole length.
STOP_S = 30.0


#: A campaign that cannot end while a stop test looks: ``SMALL`` alone (8 units, about 3 s)
#: once ended before the test, held up on a loaded machine, sent its signal.
LONGER = (*SMALL, "retry_backoff")


def _driver(
    out: Path, tmp: Path, *extra: str, names: tuple[str, ...] = SMALL
) -> subprocess.Popen[str]:
    """``durable-sim campaign`` of ``names`` on the file store, in a session of its own (so
    every process it starts can be found and killed), its temporary files under ``tmp``."""
    tmp.mkdir(exist_ok=True)
    args = ["campaign", *names, "--store", "file", "--crash", ",".join(KINDS)]
    args += ["--points-per-unit", str(POINTS), "--out", str(out), *extra]
    return subprocess.Popen(
        python_with_sigint("-m", "sim", *args),
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _session(sid: int) -> list[int]:
    """The processes still alive in session ``sid``."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    alive.append(int(entry.name))
            except OSError:
                continue
    return alive


@pytest.fixture
def driver_cleanup() -> Iterator[list[subprocess.Popen[str]]]:
    """Every driver a test starts: its whole session killed afterwards, whatever happened."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate(timeout=WAIT_S)


def _wait_for_units(units: Path, count: int, proc: subprocess.Popen[str]) -> list[Path]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        done = sorted(units.glob("*.json")) if units.exists() else []
        if len(done) >= count:
            return done
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} unit files after {WAIT_S} s")


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return sweep_document(SMALL, (StoreKind.FILE,))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the driver's processes in /proc")
def test_a_killed_driver_is_resumed_running_only_the_missing_units(
    tmp_path: Path, reference: dict[str, Any], driver_cleanup: list[subprocess.Popen[str]]
) -> None:
    out = tmp_path / "campaign"
    proc = _driver(out, tmp_path / "tmp", "--jobs", "1")
    driver_cleanup.append(proc)
    _wait_for_units(out / "units", 2, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, its workers and their children at once
    proc.communicate(timeout=WAIT_S)
    assert proc.returncode == -signal.SIGKILL
    written = {p.stem for p in (out / "units").glob("*.json")}
    plan = small_plan(SMALL, ("file",))
    assert 2 <= len(written) < len(plan.units)
    result = run_campaign(plan, out, engine=LocalEngine(2))
    assert result.skipped == len(written)
    assert sorted(result.ran) == sorted(u.address for u in plan.units if u.address not in written)
    assert same(campaign_document(result), reference)
    assert not [p for p in (out / "units").iterdir() if p.suffix != ".json"]  # no temporary


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the driver's processes in /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_driver_ends_promptly_and_leaves_nothing_behind(
    tmp_path: Path, signum: int, driver_cleanup: list[subprocess.Popen[str]]
) -> None:
    out, tmp = tmp_path / "campaign", tmp_path / "tmp"
    proc = _driver(out, tmp, "--jobs", "2", names=LONGER)
    driver_cleanup.append(proc)
    _wait_for_units(out / "units", 1, proc)
    assert len(_session(proc.pid)) > 1  # units are running in workers
    # Popen.send_signal sends nothing to a process that has ended: say so, not "exit 0".
    assert proc.poll() is None, "the campaign ended before the test could stop it"
    proc.send_signal(signum)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < STOP_S, err
    assert "interrupted" in err
    deadline = time.monotonic() + 30
    while _session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _session(proc.pid) == []  # no worker, no forked child left
    assert sorted(p.name for p in tmp.iterdir()) == []  # no temporary directory either
    assert not [p for p in (out / "units").iterdir() if p.suffix != ".json"]


@pytest.mark.slow
def test_a_forked_sweep_split_into_units_equals_the_sweep(tmp_path: Path) -> None:
    """``retry_backoff`` (184 boundaries on the file store) is swept by forking: its units each
    fork only the points whose fold root is theirs, and together they record the sweep."""
    names, stores = ("retry_backoff",), (StoreKind.FILE,)
    plan = small_plan(names, stores, KINDS, points=300)
    assert len(plan.units) >= 3
    result = run_campaign(plan, tmp_path, engine=LocalEngine(2))
    expected = sweep_document(names, stores, KINDS)
    assert expected["scenarios"][0]["boundaries"] >= FORK_FROM_BOUNDARIES
    assert same(campaign_document(result), expected)
    assert json.loads(json.dumps(expected))["totals"]["folded"] > 0
