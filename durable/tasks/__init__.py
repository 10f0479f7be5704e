"""Task phase handlers. A handler runs one task from the phase its checkpoint names and must commit
progress (a new checkpoint, a wait, or a terminal outcome) before it returns."""

from __future__ import annotations

from dataclasses import dataclass

from durable.config import RuntimeConfig
from durable.journal import Journal
from durable.model import ModelDriver, ModelRequest
from durable.ports import Ports
from durable.state import State, Task
from durable.store.base import CorruptStore
from durable.tools import ToolRegistry

#: Errors no tool may turn into its result: damaged history (``CorruptStore``). A tool raises
#: one only when it reads the runtime's store itself -- a sub-agent opens its child
#: conversation on it (``durable.subagent``) -- and then the run must stop as if its own store
#: had refused: an error result would let the model answer on top of damaged history, and the
#: refusal that keeps the evidence would never happen. A child's *ownership* errors (its lease
#: held by a live process, lost, or its log appended to by another) stay the call's error
#: result: they say nothing about the parent's own lease, and stopping the parent for them would
#: make it crash-loop for as long as another process holds the child.
NOT_A_TOOL_RESULT: tuple[type[Exception], ...] = (CorruptStore,)


def is_tool_failure(exc: Exception) -> bool:
    """Whether ``exc``, raised by a tool (or its capture, planner, verifier or undo), is the
    call's error result -- False for ``NOT_A_TOOL_RESULT``, also inside an exception group (a
    tool that opened its child in a nursery), which the caller must then re-raise."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(NOT_A_TOOL_RESULT) is None
    return not isinstance(exc, NOT_A_TOOL_RESULT)


@dataclass(frozen=True, kw_only=True)
class TaskEnv:
    """Everything a phase handler may use. Nothing else reaches the world."""

    journal: Journal
    ports: Ports
    config: RuntimeConfig
    model: ModelDriver | None
    tools: ToolRegistry


def live_task(state: State, task_id: str) -> Task | None:
    """The task if it is still live in an active run (an abort may have settled it)."""
    task = state.tasks.get(task_id)
    if task is None or task.status == "terminal" or state.active_run != task.run_id:
        return None
    return task


def pinned_request(state: State, task_id: str) -> ModelRequest:
    """The request ``task_id`` pinned, as it is sent (and re-sent after a crash, byte for byte):
    its model, options, window, messages up to its cutoff, attempt and cursor. One rendering for
    every task that sends a pinned request (a generation turn, a compaction's summary)."""
    pinned = state.pinned.get(task_id)
    assert pinned is not None, f"{task_id} sends a request it never pinned"
    return ModelRequest(
        conversation_id=state.conversation_id,
        task_id=task_id,
        model=pinned.model,
        options=pinned.options,
        messages=state.context(pinned.cutoff, pinned.window),
        attempt=pinned.attempt,
        cursor=pinned.cursor,
    )
