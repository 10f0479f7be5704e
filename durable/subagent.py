"""Sub-agents: a tool call that runs a child conversation and returns its answer (docs/runtime.md,
"Sub-agents").

The child is an ordinary conversation on the same runtime and store, owned by the delegating
call: its id and its input's request id are derived from the call (``child_ids``), never from
the attempt. So a call re-run after a crash (``replay_safe`` or ``idempotent``) opens the same
child -- recovering whatever its log holds -- and re-submits the same request id, which the
child's ``submit`` dedupes: the recovered call waits for the child it started, instead of
starting a second one. The child's answer is the call's result.
"""

from __future__ import annotations

from durable.runtime import Runtime
from durable.tools import ToolContext, ToolError


def child_ids(ctx: ToolContext) -> tuple[str, str]:
    """The child conversation's id and its input's request id, derived from the delegating call
    only: every attempt of the call (the first, and each recovery) names the same child. Both
    are valid ids for every store (``durable.store.base.check_conversation_id``)."""
    return f"{ctx.conversation_id}.sub.{ctx.call_id}", f"{ctx.call_id}:sub"


async def delegate(runtime: Runtime, task: str, ctx: ToolContext) -> str:
    """Run ``task`` in the call's child conversation and return its answer. Opening the child
    acquires its lease and recovers its state (after a crash: its run resumes where its log
    left it); a child that settles without an answer fails the call (a ``ToolError``)."""
    conversation_id, request_id = child_ids(ctx)
    child = await runtime.conversation(conversation_id)
    submission = await child.submit(task, request_id=request_id)
    settled = await submission.wait()
    if settled.status != "done" or settled.answer is None:
        raise ToolError(f"sub-agent {conversation_id} settled {settled.status}: {settled.reason}")
    return settled.answer
