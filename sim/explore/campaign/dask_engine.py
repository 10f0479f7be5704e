"""The Dask engine (``--engine dask``, the ``[dask]`` extra): the only module that imports Dask.

With no scheduler address it starts a ``LocalCluster`` of ``jobs`` worker *processes* (one thread
each); with ``--scheduler tcp://HOST:PORT`` it uses a running cluster. Each unit is one task that
runs the unit in a **fresh interpreter** on its worker (``unit.run_in_subprocess``): the sweep
forks, and forking a Dask worker, which runs threads, is unsafe. The task *returns* the unit's
document to this driver, which verifies and files it (``sim.explore.campaign.run``): workers need
the same installed code as the driver (a unit refuses to run on another version), not a shared
file system. A worker that dies has its tasks run again elsewhere (Dask reschedules them; a task
that raises is retried ``RETRIES`` times); a driver that dies is resumed from the unit files.

A ``--scheduler`` address is checked when the engine is created, before the campaign plans or
writes anything: one that is not ``tcp://HOST:PORT`` (or another TCP scheme of Dask's), or whose
host does not accept a connection within ``CONNECT_TIMEOUT_S``, is one line and exit 2
(``EngineUnavailable``), not Dask's traceback after a ``plan.json`` was written. The check is a
plain TCP connection, not a Dask client: a client starts threads, and the planner forks after it.
"""

from __future__ import annotations

import json
import logging
import socket
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
#: Wall time a scheduler has to accept a connection (the check in ``create``, then the client's).
CONNECT_TIMEOUT_S = 10.0
#: The address schemes of Dask's comms that run over TCP (``distributed.comm``): the ones the
#: connection check can try.
TCP_SCHEMES = ("tcp", "tls", "ws", "wss")


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
            # the dask extra: needed by the dask engine only
            import distributed
        except ImportError as exc:
            raise EngineUnavailable(
                f"--engine dask needs the dask extra: pip install 'durable-sim[dask]' ({exc})"
            ) from None
        if scheduler is not None:
            check_scheduler(scheduler, timeout_s=CONNECT_TIMEOUT_S)
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
            client = self._client(cluster)
            try:
                self._submit_and_wait(client, tasks, done)
            finally:
                client.close()
        finally:
            if cluster is not None:
                cluster.close()

    def _client(self, cluster: Any) -> Any:
        """A client of ``cluster``, or of the scheduler; one line if it cannot connect (a
        scheduler that went away since ``create`` checked it)."""
        try:
            return self.distributed.Client(
                cluster if cluster is not None else self.scheduler, timeout=CONNECT_TIMEOUT_S
            )
        except OSError as exc:
            raise EngineUnavailable(
                f"--scheduler {self.scheduler}: the Dask client could not connect within its "
                f"{CONNECT_TIMEOUT_S:g} s connect timeout ({_one_line(exc)})"
            ) from None

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
        interrupts.stop_if_requested()  # nothing is filed once a stop was requested
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


def check_scheduler(address: str, *, timeout_s: float) -> None:
    """``EngineUnavailable`` (one line) unless ``address`` is ``SCHEME://HOST:PORT`` with a TCP
    scheme of Dask's and its host accepts a TCP connection within ``timeout_s``."""
    scheme, sep, location = address.partition("://")
    endpoint = _host_port(location) if sep and scheme in TCP_SCHEMES else None
    if endpoint is None:
        raise EngineUnavailable(
            f"--scheduler {address!r} is not a Dask scheduler's address: expected "
            f"tcp://HOST:PORT (or {', '.join(s + '://' for s in TCP_SCHEMES[1:])})"
        )
    try:
        with socket.create_connection(endpoint, timeout=timeout_s):
            pass
    except OSError as exc:  # refused, no route, unknown host, or no answer in time
        why = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or _one_line(exc)
        raise EngineUnavailable(
            f"--scheduler {address}: cannot connect within the {timeout_s:g} s connect "
            f"timeout ({why})"
        ) from None


def _host_port(location: str) -> tuple[str, int] | None:
    """``HOST:PORT`` or ``[IPV6]:PORT`` as a socket address; None if it is not one."""
    host, sep, port = location.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or "/" in location or not port.isdigit():
        return None
    number = int(port)
    return (host, number) if 0 < number < 65536 else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
