"""Checkpoints, lease renewals and heartbeats fall where the log says (durable/journal.py,
durable/lease.py): a process that replaced a crashed one writes them where the crashed one
would have, not on a count or a clock started by its own opening."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import trio
import trio.testing
from testkit import CONV, EffectTool, Harness, Stores, ToolLoopModel, settled

from durable.config import RuntimeConfig
from durable.model import ModelRequest, ModelResponse
from durable.runtime import Runtime
from durable.store import Checkpoint, Lease, Store
from durable.tools import ToolContext, ToolSpec
from sim.world.stores import StoreKind

#: Two tasks settle per tool round (the generation and the call), a checkpoint every three.
CONFIG = RuntimeConfig(checkpoint_every_tasks=3, checkpoint_every=1_000)
ROUNDS = 6


class ThirdCallDies(EffectTool):
    """Kills its process after the effect of its third call (four tasks settled by then)."""

    async def _maybe_crash(self, point: Any) -> None:
        crasher = self.crasher
        if point == "after_effect" and len(self.contexts) == 3 and crasher is not None:
            self.crasher = None  # once: the replacement's retry of the call runs on
            await crasher.crash()


class Recorded(Stores):
    """File stores that log each checkpoint (the tasks settled in it) and each renewal."""

    def __init__(self, root: Path) -> None:
        super().__init__(StoreKind.FILE, root)
        self.log: list[tuple[str, str, float]] = []

    def __call__(self, fs: Any = None) -> Store:
        return cast(Store, _Recording(super().__call__(fs), self.log))  # a Store by its methods


class _Recording:
    def __init__(self, inner: Store, log: list[tuple[str, str, float]]) -> None:
        self._inner, self._log = inner, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def save_checkpoint(self, checkpoint: Checkpoint, *, owner_id: str, epoch: int) -> None:
        await self._inner.save_checkpoint(checkpoint, owner_id=owner_id, epoch=epoch)
        tasks = checkpoint.state["tasks"].values()
        settled = sum(task["status"] == "terminal" for task in tasks)
        self._log.append(("checkpoint", owner_id, float(settled)))

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        renewed = await self._inner.renew_lease(lease, ttl_s=ttl_s, now_s=now_s)
        self._log.append(("renew", lease.owner_id, now_s))
        return renewed


def _run(root: Path, *, crash: bool) -> list[tuple[str, str, float]]:
    stores = Recorded(root)
    lookup = ThirdCallDies("lookup", "replay_safe")
    harness = Harness(stores, model=ToolLoopModel("lookup", rounds=ROUNDS), config=CONFIG)
    harness.specs = [lookup.spec()]
    lookup.crasher = harness.crasher if crash else None

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        # One input: the replacement's submit finds the one its predecessor accepted.
        handle = await conversation.submit("look it up", request_id="req-1")
        await settled(conversation, handle.id)

    async def main() -> None:
        if crash:
            await harness.crash_run("owner-a", body)
        async with harness.process("owner-b") as runtime:
            await body(runtime)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return stores.log


def _checkpoints(log: list[tuple[str, str, float]], owner: str) -> list[float]:
    return [settled for kind, who, settled in log if kind == "checkpoint" and who == owner]


def test_a_replacement_checkpoints_at_the_tasks_the_crashed_process_would_have(
    tmp_path: Path,
) -> None:
    """The first process dies after its third call's effect, four tasks settled; the second
    recovers (a lease record, the call's second intent: records the fault-free run never
    wrote) and still checkpoints after the same settled tasks as the fault-free run: every
    third one, and at the run's stop. Counting from its own opening (records or tasks), it
    checkpointed elsewhere."""
    fault_free = _checkpoints(_run(tmp_path / "a", crash=False), "owner-b")
    crashed = _run(tmp_path / "b", crash=True)
    assert fault_free == [3, 6, 9, 12, 13]
    assert _checkpoints(crashed, "owner-a") == [3]
    assert _checkpoints(crashed, "owner-b") == [6, 9, 12, 13]


def test_a_checkpoint_placed_by_tasks_renews_the_lease(tmp_path: Path) -> None:
    """Each checkpoint but the run's last is followed by a renewal: the lease's phase is the
    log's, so the replacement renews as the fault-free run does from its first checkpoint."""
    log = _run(tmp_path, crash=True)
    owner_b = [(kind, at) for kind, who, at in log if who == "owner-b"]
    kinds = [kind for kind, _ in owner_b]
    assert kinds.count("checkpoint") == 4
    for i, kind in enumerate(kinds[:-1]):
        if kind == "checkpoint" and i < len(kinds) - 2:
            assert kinds[i + 1] == "renew", kinds


def test_the_heartbeat_beats_after_the_last_renewal(tmp_path: Path) -> None:
    """The first round's tasks settle 4 s after the process started and a checkpoint renews
    the lease then (t); the second round's call takes 25 s: the heartbeat renews at t + 10
    and t + 20 (``heartbeat_s`` after the last renewal), not at 10, 20 and 30 s from the
    process's start."""
    stores = Recorded(tmp_path)
    started: list[float] = []

    async def slow(arguments: dict[str, Any], ctx: ToolContext) -> str:
        started.append(trio.current_time())
        if len(started) == 2:
            await trio.sleep(25.0)
        return "done"

    class Thinking(ToolLoopModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            await trio.sleep(4.0)  # the renewal after this turn is off the start's grid
            return await super().complete(request)

    config = RuntimeConfig(checkpoint_every_tasks=1, checkpoint_every=1_000, heartbeat_s=10.0)
    spec = ToolSpec(name="slow", fn=slow, policy="replay_safe")
    harness = Harness(stores, model=Thinking("slow", rounds=2), tools=[spec], config=config)

    async def main() -> None:
        async with harness.process("owner-a") as runtime:
            conversation = await runtime.conversation(CONV)
            await settled(conversation, (await conversation.submit("go")).id)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    renewals = [at for kind, _, at in stores.log if kind == "renew"]
    checkpoint_renewal = max(at for at in renewals if at <= started[1])
    during = [at - checkpoint_renewal for at in renewals if started[1] < at < started[1] + 25.0]
    assert during == [10.0, 20.0], (renewals, started)
