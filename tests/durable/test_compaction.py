"""Compaction as a task through the public API (no simulator): a budget or a "context exceeded"
refusal starts a compaction that the turn's ``prepare`` waits on; the summary is applied at a
turn boundary and later requests carry it in place of the prefix; an intent that predates a crash
is settled stale, never applied; and the reducer's guards (docs/architecture.md, 1.7)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from testkit import CONV, EffectTool, Harness, Stores, of_type, settled

from durable import ModelRequest, ModelResponse, ProposedCall
from durable.codec import canonical_json
from durable.compaction import estimate_tokens
from durable.config import RuntimeConfig
from durable.events import (
    CompactionApplied,
    CompactionSettled,
    CompactionStarted,
    EventRecord,
    ModelRequested,
)
from durable.model import ModelError
from durable.state import InvariantViolation, State, new_state, reduce


class CompactingModel:
    """Calls ``tool`` ``rounds`` times per user message, then answers; a summarisation request
    gets ``summary:<the user messages it saw>``. ``refuse_over`` refuses longer requests as
    "context exceeded"; ``on_summarise`` runs before a summary is returned (e.g. a crash)."""

    def __init__(self, tool: str, *, rounds: int, refuse_over: int | None = None) -> None:
        self.tool = tool
        self.rounds = rounds
        self.refuse_over = refuse_over
        self.requests: list[ModelRequest] = []
        self.on_summarise: Any = None
        self.refuse_summaries = False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        messages = request.messages
        if self.refuse_over is not None and estimate_tokens(messages) > self.refuse_over:
            raise ModelError("context exceeded", retryable=False, context_exceeded=True)
        if request.options.get("task") == "summarise":
            if self.on_summarise is not None:
                await self.on_summarise()
            if self.refuse_summaries:
                raise ModelError("no summaries today", retryable=False)
            users = [m["content"] for m in messages if m["role"] in ("user", "summary")]
            return ModelResponse(text=f"summary:{'|'.join(users)}#{rounds_since_user(messages)}")
        since = rounds_since_user(messages)
        if since < self.rounds:
            return ModelResponse(tool_calls=[ProposedCall(tool=self.tool)])
        return ModelResponse(text=f"done after {since} rounds")


def rounds_since_user(messages: list[dict[str, Any]]) -> int:
    """Assistant turns since the last user message (a summary carries its own count)."""
    since = 0
    for m in messages:
        if m["role"] == "summary":
            since = int(m["content"].rsplit("#", 1)[1])
        else:
            since = 0 if m["role"] == "user" else since + (m["role"] == "assistant")
    return since


def requests_of(model: CompactingModel, task: str | None) -> list[ModelRequest]:
    return [r for r in model.requests if r.options.get("task") == task]


def config(budget: int | None) -> RuntimeConfig:
    return RuntimeConfig(context_budget_tokens=budget)


async def test_a_budget_compacts_before_the_request_and_later_requests_carry_the_summary(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("lookup", "replay_safe")
    model = CompactingModel("lookup", rounds=3)
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config(120))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("look it up three times")
        assert (await settled(conversation, first.id)).answer == "done after 3 rounds"
        state = conversation.state
    records = await stores.records()
    started = of_type(records, "compaction_started")
    applied = of_type(records, "compaction_applied")
    assert started and [a.compaction_id for a in applied] == [s.compaction_id for s in started]
    summaries = requests_of(model, "summarise")
    assert len(summaries) == len(started)
    # The summarisation request is the intent's prefix: the messages before ``through``.
    first_intent = started[0]
    prefix = _before(records, first_intent).context(first_intent.through, first_intent.window)
    assert summaries[0].messages == prefix
    # The last request starts with the latest summary, then the messages after its prefix.
    last = applied[-1]
    final = requests_of(model, None)[-1]
    pin = of_type(records, "model_requested")[-1]
    assert final.messages[0] == {"role": "summary", "content": last.summary}
    assert final.messages[1:] == state.context(pin.cutoff)[len(state.context(last.through)) :]
    # The application is a turn boundary: its commit settles the compaction task and returns
    # the waiting turn to prepare, and nothing else.
    batch = [r for r in records if r.batch == _record_of(records, last).batch]
    assert [r.event.type for r in batch] == [
        "compaction_applied",
        "task_settled",
        "task_checkpoint",
    ]


def _record_of(records: list[EventRecord], event: object) -> EventRecord:
    return next(r for r in records if r.event == event)


def _before(records: list[EventRecord], event: object) -> State:
    """The state just before ``event``'s record."""
    index = records.index(_record_of(records, event))
    return reduce(new_state(CONV), records[:index])


async def test_context_exceeded_compacts_and_retries_with_the_next_attempt(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("lookup", "replay_safe")
    model = CompactingModel("lookup", rounds=3, refuse_over=150)
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config(None))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("look it up three times")
        assert (await settled(conversation, first.id)).answer == "done after 3 rounds"
    records = await stores.records()
    started = of_type(records, "compaction_started")
    assert started and {s.reason for s in started} == {"context_exceeded"}
    failed = of_type(records, "model_failed")
    assert failed and all(f.message == "context exceeded" for f in failed)
    pins = of_type(records, "model_requested")
    retried = [p for p in pins if p.attempt > 1]
    assert retried and all(p.window for p in retried)  # the retry carries the summary


async def test_a_refusal_that_compaction_cannot_fix_ends_the_run_with_a_model_error(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    model = CompactingModel("lookup", rounds=0, refuse_over=1)
    harness = Harness(stores, model=model, config=config(None))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("hello")
        done = await settled(conversation, first.id)
    assert (done.status, done.reason) == ("unanswered", "model_error")
    # Only one message: nothing to compact, so no summary was ever asked for.
    assert requests_of(model, "summarise") == []


async def test_a_failed_summary_lets_the_turn_go_on_uncompacted(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("lookup", "replay_safe")
    model = CompactingModel("lookup", rounds=2)
    model.refuse_summaries = True
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config(60))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("look it up twice")
        assert (await settled(conversation, first.id)).answer == "done after 2 rounds"
    records = await stores.records()
    outcomes = [s.outcome for s in of_type(records, "compaction_settled")]
    assert outcomes and set(outcomes) == {"failed"}
    assert of_type(records, "compaction_applied") == []
    assert all(not p.window for p in of_type(records, "model_requested"))


async def test_an_intent_that_predates_a_crash_is_settled_stale_and_a_new_one_applied(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("lookup", "replay_safe")
    model = CompactingModel("lookup", rounds=2)
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config(60))
    model.on_summarise = harness.crasher.crash  # the request is sent; the process dies

    async def body(runtime: Any) -> None:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("look it up twice", request_id="r1")
        await trio.sleep_forever()

    await harness.crash_run("owner-a", body)
    model.on_summarise = None
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        sub = conversation.state.request_ids["r1"]
        assert (await settled(conversation, sub)).answer == "done after 2 rounds"
    records = await stores.records()
    stale = [s for s in of_type(records, "compaction_settled") if s.outcome == "stale"]
    assert len(stale) == 1
    applied = {a.compaction_id for a in of_type(records, "compaction_applied")}
    assert stale[0].compaction_id not in applied and applied
    # The new intent was written by the recovering incarnation, after the stale settlement.
    compaction = (CompactionStarted, CompactionApplied, CompactionSettled)
    epochs = {r.event.compaction_id: r.epoch for r in records if isinstance(r.event, compaction)}
    assert all(epochs[c] == 2 for c in applied)


async def test_a_resent_request_keeps_its_pinned_window(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """I11: a request pinned with a summary window is re-sent after a crash byte for byte."""
    tool = EffectTool("lookup", "replay_safe")
    model = CompactingModel("lookup", rounds=2)
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config(60))
    original = model.complete

    async def crash_on_the_first_compacted_request(request: ModelRequest) -> ModelResponse:
        compacted = request.messages and request.messages[0]["role"] == "summary"
        if compacted and request.options.get("task") is None and not harness.crasher.crashed:
            model.requests.append(request)
            await harness.crasher.crash()
        return await original(request)

    model.complete = crash_on_the_first_compacted_request  # type: ignore[method-assign]  # patch

    async def body(runtime: Any) -> None:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("look it up twice", request_id="r1")
        await trio.sleep_forever()

    await harness.crash_run("owner-a", body)
    lost = model.requests[-1]
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await settled(conversation, conversation.state.request_ids["r1"])
    resent = next(r for r in model.requests if r is not lost and r.task_id == lost.task_id)
    assert canonical_json(resent.model_dump(mode="json")) == canonical_json(
        lost.model_dump(mode="json")
    )


def test_nothing_compaction_adds_is_encoded_while_unused() -> None:
    """Logs and checkpoints of conversations that never compacted keep their bytes."""
    pin = ModelRequested(task_id="t", model="m", cutoff=1, attempt=1)
    assert "window" not in canonical_json(pin.model_dump(mode="json"))
    state = canonical_json(new_state(CONV).model_dump(mode="json"))
    assert '"compactions"' not in state and '"window"' not in state
    # [{"content":"x..x","role":"user"}]: 70 characters of canonical JSON, / 4 rounded up.
    assert estimate_tokens([{"role": "user", "content": "x" * 40}]) == 18


async def test_reduce_refuses_a_stale_or_misplaced_application(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("lookup", "replay_safe")
    model = CompactingModel("lookup", rounds=2)
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config(60))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        await settled(conversation, (await conversation.submit("look it up twice")).id)
    records = await stores.records()
    apply_at = next(i for i, r in enumerate(records) if r.event.type == "compaction_applied")
    before = reduce(new_state(CONV), records[:apply_at])
    event = records[apply_at].event
    assert isinstance(event, CompactionApplied)
    # Applied by another epoch than the intent's: stale.
    later = before.model_copy(deep=True)
    later.epoch += 1
    with pytest.raises(InvariantViolation, match="stale"):
        reduce(later, [_again(records[apply_at], epoch=later.epoch)])
    # Applied to another prefix than the intent named.
    other = event.model_copy(update={"through": event.through - 1})
    with pytest.raises(InvariantViolation, match="another prefix"):
        reduce(before, [_again(records[apply_at], event=other)])
    # Applied while a tool of the run is live: not a turn boundary.
    busy = before.model_copy(deep=True)
    turn = busy.tasks[busy.compactions[event.compaction_id].requested_by]
    turn.phase = "tools"
    with pytest.raises(InvariantViolation, match="not a turn boundary"):
        reduce(busy, [records[apply_at]])
    # Settled stale first: never applied afterwards.
    settled_first = before.model_copy(deep=True)
    settled_first.compactions[event.compaction_id].status = "stale"
    with pytest.raises(InvariantViolation, match="is stale"):
        reduce(settled_first, [records[apply_at]])


def _again(record: EventRecord, **update: Any) -> EventRecord:
    return record.model_copy(update=update).sealed()
