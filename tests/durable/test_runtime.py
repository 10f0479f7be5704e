"""The runtime through its public API: runs, submissions, budgets, model errors, aborts, leases,
and the rule that only a crash may leave resumable state (docs/architecture.md, 1.3 and
1.5)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from testkit import (
    CONV,
    CounterIds,
    EffectTool,
    Harness,
    ScriptedModel,
    Stores,
    ToolLoopModel,
    answer,
    assert_contiguous,
    call,
    event_types,
    make_ports,
    of_type,
    settled,
    wait_until,
)

from durable import Budget, Fenced, ModelError, ModelRequest, ModelResponse, Runtime
from durable.config import RuntimeConfig
from durable.ports import real_ports
from durable.state import new_state, reduce
from durable.store import LeaseHeld
from sim.world.stores import StoreKind


def user_messages(request: ModelRequest) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


async def test_happy_path_tool_then_answer(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    tool = EffectTool("lookup", "replay_safe")
    model = ToolLoopModel("lookup", q="weather")
    harness = Harness(stores, model=model, tools=[tool.spec()])

    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("what is the weather?", request_id="req-1")
        submission = await settled(conversation, handle.id)
        state = conversation.state.model_copy(deep=True)

    assert submission.status == "done"
    assert submission.answer == f"answer after: lookup applied {CONV}:{tool.contexts[0].call_id}"
    assert len(tool.effects) == 1 and tool.contexts[0].attempt == "first"
    assert len(model.requests) == 2
    first, second = model.requests
    assert first.messages == [{"role": "user", "content": "what is the weather?"}]
    assert [m["role"] for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[1]["tool_calls"][0]["arguments"] == {"q": "weather"}

    records = await stores.records()
    assert_contiguous(records)
    assert event_types(records) == [
        "lease_acquired",
        "input_accepted",
        "run_started",
        "task_created",
        "model_requested",
        "model_completed",
        "task_checkpoint",
        "task_created",
        "task_waiting",
        "tool_intent",
        "tool_result",
        "task_settled",
        "task_settled",
        "task_created",
        "model_requested",
        "model_completed",
        "task_settled",
        "input_settled",
        "run_stopped",
    ]
    (run,) = state.runs.values()
    assert (run.status, run.stop_reason, run.model_turns, run.tool_calls) == (
        "stopped",
        "completed",
        2,
        1,
    )
    assert state.live_tasks() == [] and state.unresolved_intents() == []
    # The in-memory state is the reduction of the log, and the checkpoint at the stop agrees.
    assert reduce(new_state(CONV), records) == state
    (checkpoint, *_) = await stores().load_checkpoints(CONV)
    assert checkpoint.through_sequence == records[-1].sequence
    assert checkpoint.to_state() == state


async def test_request_id_dedupes_and_writes_nothing(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness = Harness(stores, model=ScriptedModel(default=answer("hi")))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello", request_id="req-1")
        await settled(conversation, handle.id)
        count = len(await stores.records())
        again = await conversation.submit("hello (retried)", request_id="req-1")
        assert again.id == handle.id
        assert len(await stores.records()) == count
        assert (await again.wait()).content == "hello"
        other = await conversation.submit("hello", request_id="req-2")
        assert other.id != handle.id
        await settled(conversation, other.id)

    # After a restart the request id is still known (it is in the log, not in memory).
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        count = len(await stores.records())
        again = await conversation.submit("hello", request_id="req-1")
        assert again.id == handle.id
        assert len(await stores.records()) == count
    assert len(harness.model.requests) == 2


async def test_input_queued_while_a_run_is_active_starts_the_next_run(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    release = trio.Event()
    asked = trio.Event()

    async def slow_first(request: ModelRequest) -> ModelResponse:
        asked.set()
        await release.wait()
        return answer("first answer")

    model = ScriptedModel([slow_first, answer("second answer")])
    harness = Harness(stores, model=model)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("first question")
        await asked.wait()
        second = await conversation.submit("second question")
        assert second.record.status == "queued"
        assert conversation.state.queue == [second.id]
        release.set()
        done_first = await settled(conversation, first.id)
        done_second = await settled(conversation, second.id)

    assert (done_first.status, done_first.answer) == ("done", "first answer")
    assert (done_second.status, done_second.answer) == ("done", "second answer")
    assert done_first.run_id != done_second.run_id
    assert user_messages(model.requests[0]) == ["first question"]
    # The second run's request ends with the new input, after the first run's exchange.
    assert model.requests[1].messages[-1] == {"role": "user", "content": "second question"}
    assert [m["role"] for m in model.requests[1].messages] == ["user", "assistant", "user"]
    starts = of_type(await stores.records(), "run_started")
    assert [s.inputs for s in starts] == [[first.id], [second.id]]


async def test_budget_exhausted_settles_the_run(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    tool = EffectTool("search", "replay_safe")
    model = ScriptedModel(default=call("search", q="more"))
    config = RuntimeConfig(budget=Budget(model_turns=1))
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("search forever")
        submission = await settled(conversation, handle.id)
        state = conversation.state

    assert (submission.status, submission.reason) == ("unanswered", "budget_exhausted")
    (run,) = state.runs.values()
    assert (run.status, run.stop_reason) == ("stopped", "budget_exhausted")
    assert run.detail == "1 model turns used of 1"
    assert len(model.requests) == 1 and len(tool.contexts) == 1
    assert state.live_tasks() == [] and state.unresolved_intents() == []


async def test_tool_call_budget_exhausted(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    tool = EffectTool("search", "replay_safe")
    response = ModelResponse(tool_calls=[call("search").tool_calls[0]] * 3)
    model = ScriptedModel(default=response)
    config = RuntimeConfig(budget=Budget(tool_calls=2))
    harness = Harness(stores, model=model, tools=[tool.spec()], config=config)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("search three times")
        submission = await settled(conversation, handle.id)

    assert (submission.status, submission.reason) == ("unanswered", "budget_exhausted")
    assert tool.contexts == []  # refused before any intent


async def test_no_model_settles_the_run(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    harness = Harness(stores, model=None)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("anyone there?")
        submission = await settled(conversation, handle.id)
        (run,) = conversation.state.runs.values()

    assert (submission.status, submission.reason) == ("unanswered", "no_model")
    assert (run.status, run.stop_reason) == ("stopped", "no_model")
    assert of_type(await stores.records(), "model_requested") == []


async def test_retryable_model_errors_back_off_on_the_clock(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        [
            ModelError("overloaded", retryable=True),
            ModelError("overloaded", retryable=True),
            ModelError("rate limited", retryable=True, retry_after_s=7.5),
            answer("finally"),
        ]
    )
    config = RuntimeConfig(backoff_base_s=2.0, max_model_attempts=4)
    harness = Harness(stores, model=model, config=config)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello")
        start = trio.current_time()
        submission = await settled(conversation, handle.id)

    assert (submission.status, submission.answer) == ("done", "finally")
    # Virtual time advanced by exactly the backoffs: 2 s, 4 s, then the server's 7.5 s.
    gaps = [round(b - a, 6) for a, b in zip(model.times, model.times[1:], strict=False)]
    assert gaps == [2.0, 4.0, 7.5]
    assert model.times[0] == pytest.approx(start)
    assert [r.attempt for r in model.requests] == [1, 2, 3, 4]
    records = await stores.records()
    retries = [e for e in of_type(records, "task_checkpoint") if e.phase == "retry"]
    assert [e.data["until_s"] - t for e, t in zip(retries, model.times, strict=False)] == [
        2.0,
        4.0,
        7.5,
    ]
    assert len(of_type(records, "model_failed")) == 3


async def test_retryable_errors_give_up_after_max_attempts(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(default=ModelError("overloaded", retryable=True))
    harness = Harness(stores, model=model, config=RuntimeConfig(max_model_attempts=3))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello")
        submission = await settled(conversation, handle.id)
        (run,) = conversation.state.runs.values()

    assert (submission.status, submission.reason) == ("unanswered", "model_error")
    assert len(model.requests) == 3
    assert run.detail == "overloaded (attempt 3)"


async def test_crash_during_backoff_resumes_at_the_committed_deadline(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """The retry deadline is in the checkpoint: a restarted process does not start a new wait."""

    model = ScriptedModel([ModelError("overloaded", retryable=True, retry_after_s=100.0)])
    harness = Harness(stores, model=model)
    submitted: list[str] = []

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello")
        submitted.append(handle.id)
        await wait_until(lambda: bool(model.times))
        await trio.sleep(40)  # inside the backoff
        await harness.crasher.crash()

    await harness.crash_run("owner-a", body)
    model.steps = [answer("after the wait")]
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, submitted[0])

    assert submission.answer == "after the wait"
    # owner-b waited out owner-a's lease (t=30) and then the committed deadline (t=100): the
    # second request went out at the first one's time + 100 s, not later.
    assert model.times[1] - model.times[0] == pytest.approx(100.0)


async def test_abort_mid_tool(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    tool = EffectTool("deploy", "unsafe", hang=True)
    model = ToolLoopModel("deploy")
    harness = Harness(stores, model=model, tools=[tool.spec()])
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("deploy it")
        await tool.started.wait()
        queued = await conversation.submit("and then this")
        await conversation.abort(reason="user pressed stop")
        submission = await settled(conversation, handle.id)
        withdrawn = await settled(conversation, queued.id)
        state = conversation.state

    assert (submission.status, submission.reason) == ("unanswered", "aborted")
    assert (withdrawn.status, withdrawn.reason) == ("unanswered", "aborted")
    (run,) = state.runs.values()
    assert (run.stop_reason, run.detail) == ("aborted", "user pressed stop")
    records = await stores.records()
    (intent,) = of_type(records, "tool_intent")
    results = [r for r in of_type(records, "tool_result") if r.call_id == intent.call_id]
    assert len(results) == 1 and results[0].source == "aborted" and results[0].is_error
    assert state.live_tasks() == [] and state.queue == []
    count, requests, attempts = len(records), len(model.requests), len(tool.contexts)

    # Nothing of the aborted run runs again in the next process.
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await trio.sleep(300)
    after = await stores.records()
    assert event_types(after[count:]) == ["lease_acquired"]
    assert (len(model.requests), len(tool.contexts)) == (requests, attempts)


async def test_abort_when_idle_writes_nothing(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness = Harness(stores, model=ScriptedModel(default=answer("ok")))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hi")
        await settled(conversation, handle.id)
        count = len(await stores.records())
        await conversation.abort()
        assert len(await stores.records()) == count
        # The conversation still works after an abort.
        later = await conversation.submit("again")
        assert (await settled(conversation, later.id)).status == "done"


async def test_stale_lease_is_fenced(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    asked = trio.Event()
    release = trio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        asked.set()
        await release.wait()
        return answer("too late")

    model = ScriptedModel([slow])
    config = RuntimeConfig(lease_ttl_s=10.0, heartbeat_s=5.0)
    harness = Harness(stores, model=model, config=config)
    outcomes: list[BaseException] = []

    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello")
        await asked.wait()

        async def waiter() -> None:
            try:
                await handle.wait()
            except Fenced as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            lease_a = conversation.journal.lease
            # Owner A's lease expired without a heartbeat (A was paused): B takes over.
            other = stores()
            with pytest.raises(LeaseHeld):
                await other.acquire_lease(CONV, "owner-b", ttl_s=10.0, now_s=trio.current_time())
            lease_b = await other.acquire_lease(
                CONV, "owner-b", ttl_s=10.0, now_s=lease_a.expires_at_s + 1.0
            )
            assert lease_b.epoch == lease_a.epoch + 1
            count = len(await stores.records())

            with pytest.raises(Fenced):
                await conversation.submit("from the zombie")
            assert len(await stores.records()) == count
            release.set()  # A's in-flight model call returns: its commit must fail too
            with trio.fail_after(60):
                await wait_until(lambda: bool(outcomes))
        assert conversation.journal.fenced
        with pytest.raises(Fenced):
            await handle.wait()
        with pytest.raises(Fenced):
            await conversation.submit("still a zombie")

    assert len(await stores.records()) == count
    assert await stores().current_lease(CONV) == lease_b  # A did not release B's lease
    assert len(outcomes) == 1


async def test_second_owner_waits_for_a_live_lease(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """A second process opening a conversation whose owner is alive (heartbeating) gives up
    after ``lease_wait_limit`` waits instead of stealing the lease."""
    config = RuntimeConfig(lease_ttl_s=10.0, heartbeat_s=2.0, lease_wait_limit=3)
    harness = Harness(stores, model=ScriptedModel(default=answer("ok")), config=config)
    async with harness.process("owner-a") as runtime_a:
        conversation = await runtime_a.conversation(CONV)
        epoch = conversation.journal.lease.epoch
        async with harness.process("owner-b") as runtime_b:
            with pytest.raises(LeaseHeld):
                await runtime_b.conversation(CONV)
        assert not conversation.journal.fenced
        lease = await stores().current_lease(CONV)
        assert lease is not None and lease.epoch == epoch
        handle = await conversation.submit("still mine")
        assert (await settled(conversation, handle.id)).status == "done"


async def test_seed_001_model_error_then_new_input(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """Seed 001: a run that returned control (model error) must not be resumable; the next input
    starts a fresh run whose request contains it, and a restart runs nothing of the old run."""
    model = ScriptedModel([ModelError("invalid api key", retryable=False), answer("second answer")])
    harness = Harness(stores, model=model)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("first message")
        failed = await settled(conversation, first.id)
        second = await conversation.submit("second message")
        done = await settled(conversation, second.id)
        state = conversation.state

    assert (failed.status, failed.reason) == ("unanswered", "model_error")
    assert failed.run_id is not None
    run_1 = state.runs[failed.run_id]
    assert (run_1.status, run_1.stop_reason) == ("stopped", "model_error")
    assert run_1.detail == "invalid api key (attempt 1)"
    assert (done.status, done.answer) == ("done", "second answer")
    assert done.run_id != failed.run_id
    assert model.requests[1].messages[-1] == {"role": "user", "content": "second message"}
    run_1_tasks = {t.id for t in state.tasks.values() if t.run_id == run_1.id}
    assert all(state.tasks[t].status == "terminal" for t in run_1_tasks)

    count, calls = len(await stores.records()), len(model.requests)
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await trio.sleep(300)
        assert conversation.state.submissions[first.id].status == "unanswered"
        assert conversation.state.active_run is None
    after = await stores.records()
    assert event_types(after[count:]) == ["lease_acquired"]
    assert len(model.requests) == calls
    task_ids = [getattr(r.event, "task_id", None) for r in after[count:]]
    assert not [t for t in task_ids if t in run_1_tasks]


async def test_seed_001_model_error_with_a_queued_input(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """The failing run's queued input is not displaced: it starts the next run at once."""
    asked = trio.Event()
    release = trio.Event()

    async def failing(request: ModelRequest) -> ModelResponse:
        asked.set()
        await release.wait()
        raise ModelError("context too long", retryable=False)

    model = ScriptedModel([failing, answer("answer to the second")])
    harness = Harness(stores, model=model)
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        first = await conversation.submit("first")
        await asked.wait()
        second = await conversation.submit("second")
        release.set()
        failed = await settled(conversation, first.id)
        done = await settled(conversation, second.id)

    assert (failed.status, failed.reason) == ("unanswered", "model_error")
    assert (done.status, done.answer) == ("done", "answer to the second")
    assert model.requests[1].messages[-1] == {"role": "user", "content": "second"}


async def test_crash_mid_model_call_resends_the_pinned_request(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    asked = trio.Event()

    async def never(request: ModelRequest) -> ModelResponse:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError

    model = ScriptedModel([never, answer("hello back")])
    harness = Harness(stores, model=model)
    submitted: list[str] = []

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        submitted.append((await conversation.submit("hello")).id)
        await asked.wait()
        await harness.crasher.crash()

    await harness.crash_run("owner-a", body)
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = await settled(conversation, submitted[0])

    assert submission.answer == "hello back"
    first, again = model.requests
    assert again == first  # the same pinned request, attempt included
    assert len(of_type(await stores.records(), "model_requested")) == 1


# -- regressions and open bugs ---------------------------------------------------------------------


def test_real_clock_lease_expiry_is_meaningful_to_the_next_process(tmp_path: Path) -> None:
    """Regression: lease expiries are compared by other processes, so the real clock must share
    its scale across processes (trio's own clock has a random offset per ``trio.run``)."""
    stores = Stores(StoreKind.FILE, tmp_path)
    ttl = 30.0

    async def process_a() -> float:
        lease = await stores().acquire_lease(
            CONV, "owner-a", ttl_s=ttl, now_s=real_ports().clock.now()
        )
        return lease.expires_at_s

    async def process_b_now() -> float:
        return real_ports().clock.now()

    expires_at = trio.run(process_a)
    now_b = trio.run(process_b_now)
    # Process A's lease was taken a moment ago with a 30 s TTL: to process B it must still have
    # (almost) 30 s to run, no more.
    assert 0.0 < expires_at - now_b <= ttl


LONE_SURROGATE_TEXT = "broken \ud800 text"  # what json.loads makes of a "\\ud800" escape


async def test_model_text_with_a_lone_surrogate_does_not_kill_the_runtime(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """Regression: sealing such a record raised UnicodeEncodeError, killing the runtime on every
    restart (the pinned request is re-sent, the same answer comes back)."""
    harness = Harness(stores, model=ScriptedModel(default=answer(LONE_SURROGATE_TEXT)))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello")
        submission = await settled(conversation, handle.id)
    assert (submission.status, submission.answer) == ("done", LONE_SURROGATE_TEXT)


async def test_model_text_with_a_lone_surrogate_survives_a_restart(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness = Harness(stores, model=ScriptedModel(default=answer(LONE_SURROGATE_TEXT)))
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("hello")
        await settled(conversation, handle.id)
        written = conversation.state.last_sequence
    records = await stores.records()  # a fresh reader, as the next process
    assert len(records) == written
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        submission = conversation.state.submissions[handle.id]
    assert (submission.status, submission.answer) == ("done", LONE_SURROGATE_TEXT)
    assert len(harness.model.requests) == 1


def test_counter_ids_are_unique_and_deterministic() -> None:
    a, b = CounterIds(), CounterIds()
    assert [a.new("run"), a.new("task")] == [b.new("run"), b.new("task")] == ["run-1", "task-2"]
    assert make_ports(a).ids is a
