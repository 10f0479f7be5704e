"""Sub-agents (docs/runtime.md, "Sub-agents"): a delegating call runs a child conversation derived
from the call; a call re-run after a crash finds the same child (its request id dedupes) and returns
its answer, instead of starting a second one."""

from __future__ import annotations

from typing import Any

import trio
from testkit import CONV, EffectTool, Harness, Stores, answer, call, of_type

from durable.model import ModelError, ModelRequest, ModelResponse
from durable.runtime import Runtime
from durable.subagent import child_ids, delegate
from durable.tools import ToolContext, ToolSpec

TASK = "fix the config"


class DelegatingModel:
    """The parent delegates ``TASK`` and answers with the sub-agent's report; the child (its first
    user message is ``TASK``) calls ``pay`` and answers. Decides from the request alone, so it
    answers the same in every process."""

    def __init__(self, *, child_fails: bool = False) -> None:
        self.child_fails = child_fails

    async def complete(self, request: ModelRequest) -> ModelResponse:
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        tools = [m["content"] for m in request.messages if m["role"] == "tool"]
        if users[0] == TASK:
            if self.child_fails:
                raise ModelError("child model refused", retryable=False)
            return answer(f"child done: {tools[0]}") if tools else call("pay")
        return answer(f"parent reports: {tools[0]}") if tools else call("delegate", task=TASK)


class Delegator:
    """The ``delegate`` tool, bound to the process's runtime once it is open."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.contexts: list[ToolContext] = []

    async def fn(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        self.contexts.append(ctx)
        assert self.runtime is not None
        return await delegate(self.runtime, str(arguments["task"]), ctx)

    def spec(self) -> ToolSpec:
        return ToolSpec(name="delegate", fn=self.fn, policy="replay_safe")


def test_child_ids_are_derived_from_the_call_not_the_attempt() -> None:
    first = ToolContext(
        conversation_id=CONV, call_id="call-7", idempotency_key="k", epoch=1, attempt="first"
    )
    again = ToolContext(
        conversation_id=CONV, call_id="call-7", idempotency_key="k", epoch=2, attempt="recovery"
    )
    assert child_ids(first) == child_ids(again) == (f"{CONV}.sub.call-7", "call-7:sub")


async def test_delegation_returns_the_childs_answer(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    pay = EffectTool("pay", "idempotent", dedupe=True)
    delegator = Delegator()
    harness = Harness(stores, model=DelegatingModel(), tools=[delegator.spec(), pay.spec()])
    async with harness.process("owner-a") as runtime:
        delegator.runtime = runtime
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("please delegate", request_id="req-1")
        settled = await handle.wait()

    (ctx,) = delegator.contexts
    child_id, request_id = child_ids(ctx)
    child_records = await stores.records(child_id)
    (accepted,) = of_type(child_records, "input_accepted")
    assert (accepted.request_id, accepted.content) == (request_id, TASK)
    child_answer = of_type(child_records, "input_settled")[0].answer
    (result,) = of_type(await stores.records(), "tool_result")
    pay_key = f"{child_id}:{pay.contexts[0].call_id}"  # the child's call, keyed in the child
    assert result.output == child_answer == f"child done: pay applied {pay_key}"
    assert settled.answer == f"parent reports: {child_answer}"
    assert pay.effects == [pay.contexts[0].idempotency_key]


async def test_recovered_delegation_finds_its_child(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """A crash after the child's effect (before its result): the parent's call is re-run, opens
    the same child -- which recovers its own call by policy -- and re-submits the same request id,
    which is deduped: one child input, one effect, the child's answer as the call's result."""
    delegator = Delegator()
    harness = Harness(stores, model=DelegatingModel())
    pay = EffectTool("pay", "idempotent", dedupe=True, crasher=harness.crasher)
    pay.crash_at = "after_effect"
    harness.specs = [delegator.spec(), pay.spec()]

    async def body(runtime: Runtime) -> None:
        delegator.runtime = runtime
        conversation = await runtime.conversation(CONV)
        await conversation.submit("please delegate", request_id="req-1")
        await trio.sleep_forever()

    await harness.crash_run("owner-a", body)
    async with harness.process("owner-b") as runtime:
        delegator.runtime = runtime
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("please delegate", request_id="req-1")
        settled = await handle.wait()

    assert [c.attempt for c in delegator.contexts] == ["first", "recovery"]
    assert child_ids(delegator.contexts[0]) == child_ids(delegator.contexts[1])
    child_id, _ = child_ids(delegator.contexts[0])
    assert await stores().list_conversations() == sorted([CONV, child_id])
    child_records = await stores.records(child_id)
    assert len(of_type(child_records, "input_accepted")) == 1
    assert [c.attempt for c in pay.contexts] == ["first", "recovery"]
    assert len(pay.effects) == 1  # the child's idempotent call: deduped by its key
    (result,) = of_type(await stores.records(), "tool_result")
    assert result.output == of_type(child_records, "input_settled")[0].answer
    assert settled.status == "done" and settled.answer == f"parent reports: {result.output}"


async def test_a_child_without_an_answer_fails_the_call(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    delegator = Delegator()
    model = DelegatingModel(child_fails=True)
    harness = Harness(stores, model=model, tools=[delegator.spec(), EffectTool("pay").spec()])
    async with harness.process("owner-a") as runtime:
        delegator.runtime = runtime
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("please delegate", request_id="req-1")
        settled = await handle.wait()

    (result,) = of_type(await stores.records(), "tool_result")
    assert result.is_error and "settled unanswered" in result.output
    assert settled.answer is not None and settled.answer.startswith("parent reports: ToolError")
