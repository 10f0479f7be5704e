"""Testing your own code under the simulator (the README's worked example): swap the runtime or
the store through ``sim.runner.seams`` and run the same sweeps and oracles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from durable import Runtime
from durable.events import EventRecord
from durable.store import FileStore
from sim.runner import seams
from sim.scenario import load_scenario
from sim.sweep import sweep


def test_a_wrapped_runtime_runs_under_the_simulator() -> None:
    opened: list[str] = []

    @asynccontextmanager
    async def my_runtime(**kwargs: Any) -> AsyncIterator[Any]:
        opened.append(kwargs["owner_id"])
        async with Runtime.open(**kwargs) as runtime:
            yield runtime

    with seams(open_runtime=my_runtime):
        result = sweep(
            load_scenario("idempotent_payment"), store="file", determinism=False, fast=False
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


def test_a_store_that_acknowledges_too_early_is_caught() -> None:
    with seams(file_store=lambda root, fs, fsync: WriteBackStore(root, fs=fs, fsync=fsync)):
        result = sweep(
            load_scenario("idempotent_payment"),
            store="file",
            crash_kinds=("process",),
            determinism=False,
            fast=False,
            stop_at_first_failure=True,
        )
    assert result.failures, "a store that loses acknowledged appends must fail the sweep"
    assert {"I0", "I2", "I12"} & set(result.failures[0].invariants)
