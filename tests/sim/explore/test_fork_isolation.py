"""A forked child must not share trio's wakeup sockets with the forking parent.

The fast sweep forks inside ``trio.run``. When parent and child shared the wakeup socketpairs, a
child that drained the read end consumed a byte the parent was waiting for, and the parent hung
for ever (about one fast sweep in twelve). These tests reproduce that race deterministically: a
wakeup byte is pending in the parent at the moment of the fork, and the child must neither see
it nor be able to send one to the parent.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from sim.explore import forking
from sim.explore.plan import SweepPlan
from sim.world.faults import CrashKind, Schedule
from sim.world.stores import StoreKind

pytestmark = pytest.mark.skipif(not forking.AVAILABLE, reason="needs os.fork")

CHILD_CLEAN = 0
CHILD_SAW_PARENT_BYTE = 3


def _pairs() -> list[Any]:
    runner: Any = trio._core._run.GLOBAL_RUN_CONTEXT.runner
    return [runner.io_manager._force_wakeup, runner.entry_queue.wakeup]


def _fork_with_pending_wakeup(*, isolate: bool) -> tuple[int, list[bytes]]:
    """Inside trio.run (no checkpoint in between, so trio's own tasks cannot drain anything):
    put a wakeup byte in each of the parent's pairs, fork; the child (optionally isolated) tries
    to read those bytes, then writes a byte of its own to each pair and exits. Returns the
    child's exit code and what the parent then finds in its read ends."""

    async def main() -> tuple[int, list[bytes]]:
        pairs = _pairs()
        for pair in pairs:
            pair.write_sock.send(b"P")
        pid = os.fork()
        if pid == 0:
            code = CHILD_CLEAN
            try:
                if isolate:
                    forking._private_trio_io()
                for pair in _pairs():
                    try:
                        if pair.wakeup_sock.recv(16):
                            code = CHILD_SAW_PARENT_BYTE
                    except BlockingIOError:
                        pass
                    pair.write_sock.send(b"C")
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        found = []
        for pair in pairs:
            data = b""
            try:
                while chunk := pair.wakeup_sock.recv(16):
                    data += chunk
            except BlockingIOError:
                pass
            found.append(data)
        return os.waitstatus_to_exitcode(status), found

    return trio.run(main)


def test_child_has_private_wakeup_sockets() -> None:
    code, found = _fork_with_pending_wakeup(isolate=True)
    assert code == CHILD_CLEAN, "the child consumed a wakeup byte that was the parent's"
    assert found == [b"P", b"P"], "the parent lost its wakeup byte or received the child's"


def test_without_isolation_the_race_is_real() -> None:
    """The same fork without ``_private_trio_io``: the child steals the parent's byte. Keeps the
    test above honest (it would pass vacuously if the race could not happen here)."""
    code, found = _fork_with_pending_wakeup(isolate=False)
    assert code == CHILD_SAW_PARENT_BYTE
    assert found != [b"P", b"P"]


def test_a_hung_child_is_killed_and_reported(tmp_path: Path) -> None:
    """A child that never reports must not hang the sweep: past its wall-time bound it is
    killed, and its schedule gets an error outcome naming the bound."""
    plan = forking.ForkPlan(
        base=Schedule(),
        kinds=(CrashKind.PROCESS,),
        reference=None,  # type: ignore[arg-type]  # never read: no point is folded here
        reruns=lambda _text: False,
        tears={},
        jobs=1,
        workdir=str(tmp_path),
        child_timeout_s=0.5,
    )
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    out = tmp_path / "0-0.json"
    plan.running.append(
        forking._Child(pid, "3:after:process", str(out), time.monotonic(), counted=False)
    )
    plan.running[0].deadline += plan.child_timeout_s
    started = time.monotonic()
    plan.wait_all()
    assert time.monotonic() - started < 30
    assert plan.done == [("3:after:process", str(out))]
    assert "did not finish within 0.5 s" in json.loads(out.read_text())["error"]
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped, not left as a zombie


def test_a_requested_stop_ends_a_forking_sweep_at_its_next_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop flag (``interrupts.request_stop``): a forking sweep stops before its next fork
    even if the interrupt itself never reaches it, and leaves no child behind."""
    from sim.explore import interrupts
    from sim.explore.sweep import sweep
    from sim.world.scenario import load_scenario

    monkeypatch.setattr(interrupts, "STOP_REQUESTED", [True])
    with pytest.raises(BaseException) as caught:
        sweep(
            SweepPlan(
                scenario=load_scenario("read_edit_answer"),
                store=StoreKind.FILE,
                crash_kinds=(CrashKind.PROCESS,),
                determinism="off",
            ),
            fork_from=0,
        )
    pending, leaves = [caught.value], []
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    assert leaves and all(isinstance(e, KeyboardInterrupt) for e in leaves), caught.value
