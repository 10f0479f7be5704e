"""Inbox modes through the public API (no simulator): ``follow_up`` (queued for the next run),
``steer`` (placed into the running run at its next post-tools boundary) and ``reject``
(``ConversationBusy``, nothing written); and the reducer's guard on steering placements."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from testkit import (
    CONV,
    EffectTool,
    Harness,
    ScriptedModel,
    Stores,
    answer,
    call,
    event_types,
    of_type,
    one_commit_each,
    settled,
)

from durable import ConversationBusy, ModelRequest, ModelResponse
from durable.codec import canonical_json
from durable.events import EventRecord, InputAccepted, InputsSteered
from durable.state import InvariantViolation, new_state, reduce
from durable.tools import ToolContext


def roles(request: ModelRequest) -> list[str]:
    return [m["role"] for m in request.messages]


def users(request: ModelRequest) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


async def test_steer_lands_after_the_tool_results_before_the_next_request(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    release = trio.Event()
    gate = EffectTool("gate", "replay_safe")
    original = gate.fn

    async def gated(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await release.wait()
        return await original(arguments, ctx)

    gate.fn = gated  # type: ignore[method-assign]  # the test's patch
    model = ScriptedModel([call("gate"), answer("deployed to staging")])
    harness = Harness(stores, model=model, tools=[gate.spec()])
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("deploy it", request_id="r1")
        await trio.sleep(5)  # the tool is running
        follow = await conversation.submit("then report", request_id="r2")
        steer = await conversation.submit("use staging", request_id="r3", mode="steer")
        steer2 = await conversation.submit("and be quick", request_id="r4", mode="steer")
        assert steer.record.status == "queued" and steer.record.mode == "steer"
        assert conversation.state.queue == [follow.id, steer.id, steer2.id]
        assert conversation.state.steering_queue() == [steer.id, steer2.id]
        model.steps.append(answer("report"))
        release.set()
        done = await settled(conversation, first.id)
        steered = await settled(conversation, steer2.id)
        reported = await settled(conversation, follow.id)

    assert done.answer == steered.answer == "deployed to staging"
    assert reported.answer == "report" and reported.run_id != done.run_id
    second = model.requests[1]
    assert roles(second) == ["user", "assistant", "tool", "user", "user"]
    assert users(second) == ["deploy it", "use staging", "and be quick"]
    records = await stores.records()
    (placed,) = [r for r in records if isinstance(r.event, InputsSteered)]
    batch = [r for r in records if r.batch == placed.batch]
    assert event_types(batch) == ["task_settled", "inputs_steered", "task_created"]
    assert isinstance(placed.event, InputsSteered)
    assert placed.event.inputs == [steer.id, steer2.id]
    starts = of_type(records, "run_started")
    assert [s.inputs for s in starts] == [[first.id], [follow.id]]
    (run, _) = reduce(new_state(CONV), records).runs.values()
    assert run.inputs == [first.id, steer.id, steer2.id]


async def test_steering_that_misses_its_run_starts_the_next_one_in_acceptance_order(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """A run that answers without tools has no post-tools boundary: its queued steering inputs
    start the next run together with the follow-ups, in the order they were accepted."""
    release = trio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return answer("first")

    model = ScriptedModel([slow, answer("second")])
    harness = Harness(stores, model=model)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("one")
        await trio.sleep(1)
        steer = await conversation.submit("steer", mode="steer")
        follow = await conversation.submit("follow")
        release.set()
        await settled(conversation, first.id)
        done = await settled(conversation, follow.id)
    assert done.answer == "second"
    starts = of_type(await stores.records(), "run_started")
    assert [s.inputs for s in starts] == [[first.id], [steer.id, follow.id]]


async def test_steer_and_reject_when_idle_start_a_run(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness = Harness(stores, model=ScriptedModel(default=answer("ok")))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        steer = await conversation.submit("a", mode="steer")
        assert steer.record.status == "placed"
        await settled(conversation, steer.id)
        reject = await conversation.submit("b", request_id="rb", mode="reject")
        assert reject.record.status == "placed"
        assert (await settled(conversation, reject.id)).answer == "ok"
    accepted = of_type(await stores.records(), "input_accepted")
    assert [a.mode for a in accepted] == ["steer", "reject"]


async def test_reject_while_busy_writes_nothing_and_the_request_id_is_free_later(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    release = trio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return answer("first")

    harness = Harness(stores, model=ScriptedModel([slow], default=answer("later")))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("one")
        await trio.sleep(1)
        count = len(await stores.records())
        with pytest.raises(ConversationBusy, match="busy with run") as info:
            await conversation.submit("two", request_id="busy-1", mode="reject")
        assert info.value.request_id == "busy-1"
        assert len(await stores.records()) == count
        assert "busy-1" not in conversation.state.request_ids
        release.set()
        await settled(conversation, first.id)
        again = await conversation.submit("two", request_id="busy-1", mode="reject")
        assert (await settled(conversation, again.id)).answer == "later"
        # Known now: the same request id returns the submission even while busy.
        third = await conversation.submit("three")
        same = await conversation.submit("two", request_id="busy-1", mode="reject")
        assert same.id == again.id
        await settled(conversation, third.id)


async def test_abort_withdraws_queued_inputs_of_both_modes(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("deploy", "unsafe", hang=True)
    harness = Harness(stores, model=ScriptedModel([call("deploy")]), tools=[tool.spec()])
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("deploy")
        await tool.started.wait()
        steer = await conversation.submit("steer", mode="steer")
        follow = await conversation.submit("follow")
        await conversation.abort()
        for handle in (first, steer, follow):
            record = await settled(conversation, handle.id)
            assert (record.status, record.reason) == ("unanswered", "aborted")
        assert conversation.state.queue == []
    records = await stores.records()
    assert not [r for r in records if isinstance(r.event, InputsSteered)]
    assert len(of_type(records, "input_accepted")) == 3  # what was written stays


async def test_queued_steering_survives_a_restart_and_lands_at_the_boundary(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """The first process stops (not settling anything) while the tool runs and a steering input
    is queued; the next process re-executes the replay-safe tool and places the input then."""
    tool = EffectTool("lookup", "replay_safe", hang=True)
    model = ScriptedModel([call("lookup")], default=answer("done"))
    harness = Harness(stores, model=model, tools=[tool.spec()])
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("look it up")
        await tool.started.wait()
        steer = await conversation.submit("narrow it", mode="steer")
    assert reduce(new_state(CONV), await stores.records()).steering_queue() == [steer.id]
    await trio.sleep(60)  # the released lease is free at once; the clock moves on anyway
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        done = await settled(conversation, steer.id)
        assert (await settled(conversation, first.id)).answer == done.answer == "done"
    assert users(model.requests[-1]) == ["look it up", "narrow it"]
    assert roles(model.requests[-1])[-2:] == ["tool", "user"]


async def test_unknown_mode_is_refused(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    harness = Harness(stores, model=ScriptedModel(default=answer("ok")))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        with pytest.raises(ValueError, match="unknown inbox mode"):
            await conversation.submit("x", mode="shout")  # type: ignore[arg-type]  # tested


def test_follow_up_mode_is_not_encoded() -> None:
    """Logs and checkpoints written before modes existed keep their bytes (and checksums)."""
    plain = InputAccepted(submission_id="s", request_id=None, content="x")
    assert "mode" not in canonical_json(plain.model_dump(mode="json"))
    steer = plain.model_copy(update={"mode": "steer"})
    assert '"mode":"steer"' in canonical_json(steer.model_dump(mode="json"))


async def test_reduce_refuses_steering_outside_a_post_tools_boundary(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("deploy", "unsafe", hang=True)
    harness = Harness(stores, model=ScriptedModel([call("deploy")]), tools=[tool.spec()])
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("deploy")
        await tool.started.wait()
        steer = await conversation.submit("steer", mode="steer")
        follow = await conversation.submit("follow")
        state = conversation.state.model_copy(deep=True)
        await conversation.abort()
    (gen,) = [t for t in state.tasks.values() if t.kind == "generation"]
    run_id = state.active_run
    assert run_id is not None

    def steered(*inputs: str) -> list[EventRecord]:
        """One placement per input, each its own commit after the state's log."""
        events = [InputsSteered(run_id=run_id, task_id=gen.id, inputs=[i]) for i in inputs]
        return one_commit_each(events, start=state.last_sequence + 1)

    with pytest.raises(InvariantViolation, match="not a settled generation task"):
        reduce(state, steered(steer.id))
    # Pretend the boundary was reached: a follow-up may still not be steered in.
    state.tasks[gen.id].status = "terminal"
    state.tasks[gen.id].outcome = "completed"
    for task in state.tasks.values():
        task.status = "terminal"
    with pytest.raises(InvariantViolation, match="steered into a running run"):
        reduce(state, steered(follow.id))
    twice = steered(steer.id, steer.id)
    with pytest.raises(InvariantViolation, match="placed twice"):
        reduce(state, twice)
