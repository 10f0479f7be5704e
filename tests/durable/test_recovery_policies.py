"""Recovery policies (docs/architecture.md, 1.4) and the crash points between a tool's intent and
its result, through the public API.

Each test kills a process between a tool's intent and its result (in-process: the scope around
the runtime is cancelled, so nothing more reaches the store), then opens a fresh runtime with a new
owner on the same store path. The new runtime waits out the dead owner's lease on the (mock)
clock by itself, recovers, and applies the tool's recovery policy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio
from testkit import (
    CONV,
    CrashingFS,
    EffectTool,
    Harness,
    Stores,
    ToolLoopModel,
    assert_contiguous,
    of_type,
    settled,
    wait_until,
)

from durable.config import RuntimeConfig
from durable.runtime import Runtime
from durable.tools import interrupted_message
from sim.world.stores import StoreKind


def world(stores: Stores, tool: EffectTool, **config: Any) -> tuple[Harness, ToolLoopModel]:
    model = ToolLoopModel(tool.name, amount=10)
    harness = Harness(stores, model=model, tools=[tool.spec()], config=RuntimeConfig(**config))
    tool.crasher = harness.crasher
    return harness, model


async def crash_mid_tool(harness: Harness) -> str:
    """Submit one input in process A and let the tool kill A; returns the submission id."""
    submitted: list[str] = []

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("pay the invoice")
        submitted.append(handle.id)
        await handle.wait()

    await harness.crash_run("owner-a", body)
    records = await harness.stores.records()
    intents = of_type(records, "tool_intent")
    assert len(intents) == 1 and not of_type(records, "tool_result"), "crash not mid-tool"
    return submitted[0]


async def test_replay_safe_executes_again(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    tool = EffectTool(policy="replay_safe", crash_at="after_effect")
    harness, _ = world(stores, tool)
    sid = await crash_mid_tool(harness)
    assert len(tool.effects) == 1

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    assert len(tool.effects) == 2  # at least once: the effect landed before the crash, and again
    assert [c.attempt for c in tool.contexts] == ["first", "recovery"]
    results = of_type(await stores.records(), "tool_result")
    assert [(r.source, r.is_error) for r in results] == [("executed", False)]


async def test_idempotent_executes_again_with_the_same_key(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool(policy="idempotent", dedupe=True, crash_at="after_effect")
    harness, _ = world(stores, tool)
    sid = await crash_mid_tool(harness)

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    first, again = tool.contexts
    assert again.idempotency_key == first.idempotency_key == f"{CONV}:{first.call_id}"
    assert again.call_id == first.call_id
    assert again.attempt == "recovery"
    assert again.epoch > first.epoch  # the new owner's fencing token
    assert tool.effects == [first.idempotency_key]  # the service deduped: exactly once
    records = await stores.records()
    assert len(of_type(records, "tool_result")) == 1
    assert of_type(records, "tool_intent")[0].idempotency_key == first.idempotency_key


async def test_verify_then_continue_applied_records_the_verified_result(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool(policy="verify_then_continue", crash_at="after_effect", verdict="applied")
    harness, model = world(stores, tool)
    sid = await crash_mid_tool(harness)

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    assert len(tool.contexts) == 1 and len(tool.effects) == 1  # never executed again
    assert len(tool.verifications) == 1
    records = await stores.records()
    (result,) = of_type(records, "tool_result")
    assert (result.source, result.is_error) == ("verified", False)
    assert result.output == f"pay verified {tool.contexts[0].call_id}"
    assert len(of_type(records, "tool_interrupted")) == 1
    tool_messages = [m for m in model.requests[-1].messages if m["role"] == "tool"]
    assert tool_messages[-1]["content"] == result.output


async def test_verify_then_continue_not_applied_executes(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool(
        policy="verify_then_continue", crash_at="before_effect", verdict="not_applied"
    )
    harness, _ = world(stores, tool)
    sid = await crash_mid_tool(harness)
    assert tool.effects == []

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    assert len(tool.verifications) == 1
    assert [c.attempt for c in tool.contexts] == ["first", "recovery"]
    assert len(tool.effects) == 1  # exactly once
    (result,) = of_type(await stores.records(), "tool_result")
    assert result.source == "executed"


@pytest.mark.parametrize("verdict", ["unknown", "raise"])
async def test_verify_then_continue_unknown_waits_for_reconciliation(
    stores: Stores, autojump_clock: trio.abc.Clock, verdict: Any
) -> None:
    tool = EffectTool(policy="verify_then_continue", crash_at="after_effect", verdict=verdict)
    harness, _ = world(stores, tool)
    sid = await crash_mid_tool(harness)

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await wait_until(lambda: bool(conversation.pending_reconciliations()))
        (pending,) = conversation.pending_reconciliations()
        assert conversation.state.submissions[sid].status == "placed"
        await conversation.resolve(pending.call_id, output="operator: the payment went through")
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    assert len(tool.contexts) == 1 and len(tool.effects) == 1
    records = await stores.records()
    (request,) = of_type(records, "reconciliation_requested")
    assert request.reason.startswith("verifier could not tell")
    (result,) = of_type(records, "tool_result")
    assert result.source == "operator"


async def test_unsafe_is_never_executed_again_and_the_model_sees_the_error(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool(policy="unsafe", crash_at="after_effect")
    harness, model = world(stores, tool)
    sid = await crash_mid_tool(harness)
    requests_before = len(model.requests)

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, sid)

    assert len(tool.contexts) == 1 and len(tool.effects) == 1  # at most once
    records = await stores.records()
    (result,) = of_type(records, "tool_result")
    assert (result.source, result.is_error) == ("interrupted", True)
    assert result.output == interrupted_message("pay")
    assert result.output == "Tool pay was interrupted and may have partially run"
    # The run went on: the model was asked again and saw the error as the call's result.
    assert len(model.requests) == requests_before + 1
    tool_message = [m for m in model.requests[-1].messages if m["role"] == "tool"][-1]
    assert tool_message["is_error"] is True
    assert tool_message["content"] == interrupted_message("pay")
    assert submission.status == "done"
    assert submission.answer == f"answer after: {interrupted_message('pay')}"


async def test_manual_waits_for_an_operator(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    tool = EffectTool(policy="manual", crash_at="after_effect")
    harness, model = world(stores, tool)
    sid = await crash_mid_tool(harness)
    requests_before = len(model.requests)

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await wait_until(lambda: bool(conversation.pending_reconciliations()))
        # The run waits: time passes (heartbeats), nothing else happens.
        await trio.sleep(120)
        (pending,) = conversation.pending_reconciliations()
        assert pending.tool == "pay" and pending.policy == "manual"
        assert conversation.state.submissions[sid].status == "placed"
        assert len(model.requests) == requests_before
        with pytest.raises(ValueError):
            await conversation.resolve("call-unknown", output="nope")
        await conversation.resolve(pending.call_id, output="operator: refunded, do not retry")
        submission = await settled(conversation, sid)

    assert conversation.pending_reconciliations() == []
    assert submission.status == "done"
    assert submission.answer == "answer after: operator: refunded, do not retry"
    assert len(tool.contexts) == 1 and len(tool.effects) == 1
    (result,) = of_type(await stores.records(), "tool_result")
    assert (result.source, result.is_error) == ("operator", False)


async def test_manual_reconciliation_survives_another_restart(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """A waiting reconciliation is durable: a third process still waits and can resolve it."""
    tool = EffectTool(policy="manual", crash_at="after_effect")
    harness, _ = world(stores, tool)
    sid = await crash_mid_tool(harness)

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await wait_until(lambda: bool(conversation.pending_reconciliations()))
    async with harness.process("owner-c") as runtime:
        conversation = await runtime.conversation(CONV)
        (pending,) = conversation.pending_reconciliations()
        await conversation.resolve(pending.call_id, output="done by hand")
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    records = await stores.records()
    assert len(of_type(records, "reconciliation_requested")) == 1
    assert len(tool.contexts) == 1


async def test_policy_changed_since_the_intent_falls_back_to_unsafe(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """The intent recorded ``replay_safe``; the restarted process registers the tool as
    ``idempotent``: the recorded promise no longer holds, so the call is not re-executed."""
    tool = EffectTool(policy="replay_safe", crash_at="after_effect")
    harness, _ = world(stores, tool)
    sid = await crash_mid_tool(harness)
    tool.policy = "idempotent"
    harness.specs = [tool.spec()]

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, sid)

    assert submission.status == "done"
    assert len(tool.contexts) == 1
    (result,) = of_type(await stores.records(), "tool_result")
    assert result.source == "interrupted"


# -- the crash-point test: every point between a tool's intent and the next checkpoint -----------

CRASH_POINTS = [
    "after_tool_intent",
    "after_tool_effect",
    "after_tool_result",
    "before_checkpoint_rename",
    "after_checkpoint_rename",
]
_CHECKPOINT_FILE = re.compile(r"/checkpoint-\d{12}\.json$")


@pytest.mark.parametrize("crash_point", CRASH_POINTS)
async def test_intent_to_checkpoint_crash_points(
    crash_point: str, tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """An idempotent payment, the process killed at each point from its intent to the next
    checkpoint: after reopening, the run completes, the effect happened exactly once (the service
    dedupes by key) and the log's sequences are exactly 1..n. A checkpoint is written after every
    commit, and the checkpoint crash points hit the one written right after the tool's result."""
    stores = Stores(StoreKind.FILE, tmp_path)
    tool = EffectTool(policy="idempotent", dedupe=True)
    harness, _ = world(stores, tool, checkpoint_every=1)
    seen_result = False

    def trigger(op: str, args: tuple[Any, ...]) -> Any:
        nonlocal seen_result
        if op == "append" and b'"type":"tool_intent"' in args[1]:
            return "after" if crash_point == "after_tool_intent" else None
        if op == "append" and b'"type":"tool_result"' in args[1]:
            seen_result = True
            return "after" if crash_point == "after_tool_result" else None
        if op == "rename" and seen_result and _CHECKPOINT_FILE.search(args[1]):
            return {"before_checkpoint_rename": "before", "after_checkpoint_rename": "after"}.get(
                crash_point
            )
        return None

    if crash_point == "after_tool_effect":
        tool.crash_at = "after_effect"
    fs = CrashingFS(harness.crasher, trigger)
    submitted: list[str] = []

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("pay the invoice", request_id="req-1")
        submitted.append(handle.id)
        await handle.wait()

    await harness.crash_run("owner-a", body, fs=fs)
    assert fs.fired or crash_point == "after_tool_effect"

    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, submitted[0])
        # The retried request is deduplicated, as before the crash.
        again = await conversation.submit("pay the invoice", request_id="req-1")
        assert again.id == submitted[0]

    assert submission.status == "done"
    assert len(tool.effects) == 1
    records = await stores.records()
    assert_contiguous(records)
    assert len(of_type(records, "tool_intent")) == 1
    assert len(of_type(records, "tool_result")) == 1
    (stopped,) = of_type(records, "run_stopped")
    assert stopped.reason == "completed"
    # The newest checkpoint is usable by the next process and describes the whole log.
    (checkpoint, *_) = await stores().load_checkpoints(CONV)
    assert checkpoint.verify() and checkpoint.through_sequence == records[-1].sequence
