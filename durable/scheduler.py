"""The scheduler: runs every runnable task of one conversation, each in its own cancel scope.

Event-driven, as in pi-durable: a commit kicks the scheduler; it starts an invocation for every
runnable task (pending, or waiting on tasks that are all terminal) that has none yet. Tool tasks of
one turn therefore run concurrently. ``running`` is process-local (an invocation), never persisted,
so after a crash every non-terminal task is pending with its checkpoint by construction — the
"running → pending on open" rule (docs/architecture.md, 1.3) without a commit per phase.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from durable.errors import Fenced
from durable.state import InvariantViolation
from durable.tasks import TaskEnv
from durable.tasks.compaction import run_compaction
from durable.tasks.compensation import run_compensation
from durable.tasks.generation import run_generation
from durable.tasks.tool import run_tool

_HANDLERS: dict[str, Callable[[TaskEnv, str], Awaitable[None]]] = {
    "generation": run_generation,
    "tool": run_tool,
    "compensation": run_compensation,
    "compaction": run_compaction,
}


class Scheduler:
    def __init__(self, env: TaskEnv, nursery: trio.Nursery) -> None:
        self._env = env
        self._nursery = nursery
        self._running: dict[str, trio.CancelScope] = {}
        self._wake = trio.Event()
        self._idle = trio.Event()
        self.paused = False
        self.on_fenced: Callable[[], None] = lambda: None

    def kick(self) -> None:
        self._wake.set()

    @property
    def running(self) -> list[str]:
        return list(self._running)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self.paused or self._env.journal.fenced:
                continue
            for task in self._env.journal.state.runnable_tasks():
                if task.id not in self._running:
                    scope = trio.CancelScope()
                    self._running[task.id] = scope
                    self._nursery.start_soon(self._invoke, task.id, task.kind, scope)

    async def _invoke(self, task_id: str, kind: str, scope: trio.CancelScope) -> None:
        journal = self._env.journal
        before = journal.state.last_sequence
        fenced = False
        try:
            with scope:
                try:
                    await _HANDLERS[kind](self._env, task_id)
                except Fenced:
                    fenced = True
        finally:
            # This process's memory only (the world is never touched here): an invocation that
            # is cancelled from outside must still leave the table, or ``cancel_all`` would wait
            # for it forever.
            del self._running[task_id]
            if not self._running:
                self._idle.set()
                self._idle = trio.Event()
        if fenced:
            self.on_fenced()
            return
        if not scope.cancelled_caught and journal.state.last_sequence == before:
            task = journal.state.tasks[task_id]
            if task.status != "terminal" and not (
                task.status == "waiting" and task.phase == "reconcile"
            ):
                raise InvariantViolation(f"task {task_id} ({kind}/{task.phase}) made no progress")
        self.kick()

    async def cancel_all(self) -> None:
        """Cancel every invocation and wait until they have all exited."""
        for scope in self._running.values():
            scope.cancel()
        while self._running:
            await self._idle.wait()
