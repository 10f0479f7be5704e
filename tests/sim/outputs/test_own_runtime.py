"""Testing your own code under the simulator (the README's worked example): swap the runtime or
the store through ``sim.run.runner.seams`` and run the same sweeps and oracles."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from durable import Runtime
from durable.events import EventRecord
from durable.store import FileStore
from sim.explore.plan import SweepPlan
from sim.explore.sweep import sweep
from sim.run.runner import seams
from sim.world.faults import CrashKind
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

# Not testkit.REPO: the CLI loads this file as a user's seam module (--file-store FILE.py:NAME),
# outside pytest, where the tests' helpers are not importable.
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_a_wrapped_runtime_runs_under_the_simulator() -> None:
    opened: list[str] = []

    @asynccontextmanager
    async def my_runtime(**kwargs: Any) -> AsyncIterator[Any]:
        opened.append(kwargs["owner_id"])
        async with Runtime.open(**kwargs) as runtime:
            yield runtime

    with seams(open_runtime=my_runtime):
        result = sweep(
            SweepPlan(
                scenario=load_scenario("idempotent_payment"),
                store=StoreKind.FILE,
                determinism="off",
            ),
            fast=False,
        )
    assert result.failures == []
    assert len(opened) > result.schedules  # every schedule opened at least one process


class WriteBackStore(FileStore):
    """A store that acknowledges appends before writing them (it flushes every third batch):
    faster, and wrong -- what the harness must show."""

    def __init__(self, root: str, *, fs: Any, fsync: bool) -> None:
        super().__init__(root, fs=fs, fsync=fsync)
        self._pending: list[tuple[str, list[EventRecord], dict[str, Any]]] = []

    async def append(self, conversation_id: str, records: list[EventRecord], **kw: Any) -> None:
        self._pending.append((conversation_id, records, kw))
        if len(self._pending) >= 3:
            pending, self._pending = self._pending, []
            for cid, batch, options in pending:
                await super().append(cid, batch, **options)


def write_back_store(root: str, fs: Any, fsync: bool) -> WriteBackStore:
    """The ``file_store`` seam, at module level so a repro line can name it."""
    return WriteBackStore(root, fs=fs, fsync=fsync)


def _caught_by_sweep() -> Any:
    return sweep(
        SweepPlan(
            scenario=load_scenario("idempotent_payment"),
            store=StoreKind.FILE,
            crash_kinds=(CrashKind.PROCESS,),
            determinism="off",
            stop_at_first_failure=True,
        ),
        fast=False,
    )


def test_a_store_that_acknowledges_too_early_is_caught() -> None:
    with seams(file_store=write_back_store):
        result = _caught_by_sweep()
    assert result.failures, "a store that loses acknowledged appends must fail the sweep"
    # I3: the process holds commits the store acknowledged but does not return.
    assert {"I0", "I2", "I3", "I12"} & set(result.failures[0].invariants)


def _replay(repro: str) -> subprocess.CompletedProcess[str]:
    words = shlex.split(repro)
    assert words[:2] == ["durable-sim", "replay"], repro
    return subprocess.run(
        [sys.executable, "-m", "sim", *words[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        check=False,
    )


def test_the_repro_line_of_a_seams_failure_replays_the_same_seams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repro line that replays the reference runtime would say ``pass``: the line must name
    the swapped seam, and running it must fail the same way."""
    monkeypatch.chdir(REPO)
    with seams(file_store=write_back_store):
        result = _caught_by_sweep()
    failure = result.failures[0]
    assert "--file-store tests/sim/outputs/test_own_runtime.py:write_back_store" in failure.repro
    replayed = _replay(failure.repro)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert failure.invariants[0] in replayed.stdout
    # Without the seam the same schedule passes: the option is what makes the repro true.
    plain = failure.repro.split(" --file-store")[0]
    assert _replay(plain).returncode == 0


def test_an_unnameable_seam_gets_no_false_replay_line() -> None:
    with seams(file_store=lambda root, fs, fsync: WriteBackStore(root, fs=fs, fsync=fsync)):
        failure = _caught_by_sweep().failures[0]
    assert not failure.repro.startswith("durable-sim"), failure.repro
    assert "no durable-sim replay line" in failure.repro
    assert "pytest " in failure.repro  # under pytest: the test to re-run instead
