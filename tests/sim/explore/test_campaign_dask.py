"""The Dask engine on a real cluster: a scheduler and two workers started as separate processes on
loopback (as on machines of their own), each unit run in a fresh interpreter on its worker. The
merged results equal the one-process sweep's; a worker killed while it runs units has them run
again elsewhere, with the same results; a ``LocalCluster`` campaign equals too.

Every process a test starts is in a session of its own and killed in a ``finally``; every wait
is bounded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_campaign import KINDS, SMALL, campaign_document, same, small_plan, sweep_document
from testkit import needs

from sim.explore import forking
from sim.explore.campaign.run import run_campaign
from sim.world.stores import StoreKind

pytestmark = [
    needs("distributed", reason="needs the dask extra: pip install -e '.[dask]'"),
    pytest.mark.slow,
    pytest.mark.skipif(not forking.AVAILABLE, reason="needs fork and epoll"),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds a worker's units in /proc"),
]

DASK = str(Path(sys.executable).parent / "dask")
WAIT_S = 600.0  # the longest any wait below may take (a loaded machine is slow, not hung)
START_S = 120.0  # for the scheduler to write its file and the workers to join


@dataclass
class Cluster:
    address: str
    workers: list[subprocess.Popen[bytes]]


def _start(args: list[str], tmp: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TMPDIR": str(tmp)},
            start_new_session=True,
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait(timeout=WAIT_S)


def _address_in(scheduler_file: Path, *, deadline: float) -> str:
    """The scheduler's address, once its file is whole: the scheduler writes the file in place,
    so it can be seen empty or half-written before it parses."""
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError):
            return str(json.loads(scheduler_file.read_text())["address"])
        assert time.monotonic() < deadline, "the scheduler never wrote its address"
        time.sleep(0.1)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """``dask scheduler`` and two ``dask worker`` processes (one thread each) on 127.0.0.1."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    scheduler_file = tmp_path / "scheduler.json"
    started: list[subprocess.Popen[bytes]] = []
    try:
        command = [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0"]
        command += ["--scheduler-file", str(scheduler_file), "--no-dashboard"]
        started.append(_start(command, tmp, tmp_path / "scheduler.log"))
        address = _address_in(scheduler_file, deadline=time.monotonic() + START_S)
        for n in range(2):
            command = [DASK, "worker", "--scheduler-file", str(scheduler_file)]
            command += ["--nworkers", "1", "--nthreads", "1", "--no-dashboard"]
            started.append(_start(command, tmp, tmp_path / f"worker-{n}.log"))
        import distributed  # the extra's own: not imported at collection (testkit.needs)

        client = distributed.Client(  # type: ignore[no-untyped-call]  # unannotated there
            address, timeout=START_S
        )
        with client:
            client.wait_for_workers(2, timeout=START_S)
        yield Cluster(address, started[1:])
    finally:
        _stop(started)


def _units_of(session: int) -> list[int]:
    """The unit interpreters running in a worker's session."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"sim.explore.campaign.unit" in cmdline and os.getsid(int(entry.name)) == session:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return sweep_document()


def _engine(**options: Any) -> Any:
    from sim.explore.campaign.dask_engine import DaskEngine

    return DaskEngine.create(progress=None, **options)


def test_a_dask_campaign_equals_the_sweep(
    tmp_path: Path, cluster: Cluster, reference: dict[str, Any]
) -> None:
    plan = small_plan()
    result = run_campaign(plan, tmp_path / "c", engine=_engine(jobs=2, scheduler=cluster.address))
    assert not result.errors and not result.conflicts
    assert same(campaign_document(result), reference)


def test_a_worker_killed_while_it_runs_units_changes_nothing(
    tmp_path: Path, cluster: Cluster
) -> None:
    out = tmp_path / "c"
    args = ["campaign", *SMALL, "--store", "file", "--crash", ",".join(KINDS)]
    args += ["--points-per-unit", "30", "--engine", "dask", "--scheduler", cluster.address]
    driver = subprocess.Popen(
        [sys.executable, "-m", "sim", *args, "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        victim = cluster.workers[0]
        deadline = time.monotonic() + WAIT_S
        while not _units_of(victim.pid):
            assert time.monotonic() < deadline, "the worker never ran a unit"
            assert driver.poll() is None, driver.communicate()
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)  # the worker, its nanny and its unit at once
        _, err = driver.communicate(timeout=WAIT_S)
        assert driver.returncode == 0, err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=WAIT_S)
    expected = sweep_document(SMALL, (StoreKind.FILE,))
    assert same(json.loads((out / "results.json").read_text()), expected)


def test_a_local_cluster_campaign_equals_the_sweep(tmp_path: Path) -> None:
    plan = small_plan(SMALL, ("file",))
    result = run_campaign(plan, tmp_path / "c", engine=_engine(jobs=2, scheduler=None))
    assert not result.errors and not result.conflicts
    assert same(campaign_document(result), sweep_document(SMALL, (StoreKind.FILE,)))
