"""The Dask engine (``--engine dask``, the ``[dask]`` extra): the only module that imports Dask.

With no scheduler address it starts a ``LocalCluster`` of ``jobs`` worker *processes* (one thread
each); with ``--scheduler tcp://HOST:PORT`` it uses a running cluster. Each unit is one task that
runs the unit in a **fresh interpreter** on its worker (``unit.run_in_subprocess``): the sweep
forks, and forking a Dask worker, which runs threads, is unsafe. The task *returns* the unit's
document to this driver, which verifies and files it (``sim.explore.campaign.run``): workers need
the same installed code as the driver (a unit refuses to run on another version), not a shared
file system. A worker that dies has its tasks run again elsewhere (Dask reschedules them; a task
that raises is retried ``RETRIES`` times); a driver that dies is resumed from the unit files.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.explore import interrupts
from sim.explore.campaign.tasks import Done, EngineUnavailable, Task
from sim.explore.campaign.unit import run_in_subprocess
from sim.explore.progress import Progress

#: Times a task that raised is tried again (a worker that dies does not count: its tasks are
#: rescheduled by the scheduler, up to its own ``allowed-failures``).
RETRIES = 2
POLL_S = 0.1  # how often the driver looks for finished tasks and for a stop request
CONNECT_TIMEOUT_S = 30.0


@dataclass
class DaskEngine:
    jobs: int
    scheduler: str | None
    distributed: Any  # the imported ``distributed`` module
    progress: Progress | None = None

    @classmethod
    def create(cls, *, jobs: int, scheduler: str | None, progress: Progress | None) -> DaskEngine:
        """The engine, or ``EngineUnavailable`` (one line) when the extra is not installed.
        Nothing starts until ``run``."""
        try:
            import distributed
        except ImportError as exc:
            raise EngineUnavailable(
                f"--engine dask needs the dask extra: pip install 'durable-sim[dask]' ({exc})"
            ) from None
        return cls(jobs, scheduler, distributed, progress)

    def run(self, tasks: Sequence[Task], done: Done) -> None:
        if not tasks:
            return
        cluster = None
        if self.scheduler is None:
            cluster = self.distributed.LocalCluster(
                n_workers=self.jobs,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
        try:
            client = self.distributed.Client(
                cluster if cluster is not None else self.scheduler, timeout=CONNECT_TIMEOUT_S
            )
            try:
                self._submit_and_wait(client, tasks, done)
            finally:
                client.close()
        finally:
            if cluster is not None:
                cluster.close()

    def _submit_and_wait(self, client: Any, tasks: Sequence[Task], done: Done) -> None:
        """Every task submitted at once, costliest first (Dask's priority); results handled as
        they arrive, in this thread; a stop request (SIGTERM) or an interrupt cancels the
        rest."""
        futures: dict[Any, Task] = {}
        rank = sorted(range(len(tasks)), key=lambda i: (-tasks[i].unit.cost, i))
        for priority, i in enumerate(reversed(rank)):
            task = tasks[i]
            future = client.submit(
                run_in_subprocess,
                json.dumps(task.payload),
                key=f"durable-sim-unit-{task.unit.address}",
                pure=False,
                retries=RETRIES,
                priority=priority,
            )
            futures[future] = task
        pending = self.distributed.as_completed(list(futures))
        try:
            while not pending.is_empty():
                interrupts.stop_if_requested()
                finished = pending.next_batch(block=False)
                if not finished:
                    time.sleep(POLL_S)
                    continue
                for future in finished:
                    self._finished(futures[future], future, done)
        finally:
            client.cancel(list(futures))

    def _finished(self, task: Task, future: Any, done: Done) -> None:
        label = task.unit.label
        if self.progress is not None:
            self.progress.start(label)
        try:
            doc, error = json.loads(future.result()), None
        except Exception as exc:  # the unit failed on every try: reported, run again next time
            doc, error = None, f"{type(exc).__name__}: {exc}"
        summary = done(task, doc, error)
        if self.progress is not None:
            self.progress.finish(summary, label=label)
