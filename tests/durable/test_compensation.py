"""Compensation (docs/runtime.md, "Compensation"): an abandoned run -- by the caller (``abandon``)
or by an operator rejecting an interrupted call (``reject``) -- undoes its completed compensable
calls in reverse order, each once, journaled like a call so that a crash mid-compensation resumes
it."""

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
    wait_until,
)

from durable.events import CompensationIntent, EventRecord, ToolIntent
from durable.inspect import inspect_store
from durable.runtime import Conversation, Runtime
from durable.state import InvariantViolation, new_state, reduce
from durable.tools import Compensation, ToolContext, ToolSpec

INITIAL = {"a.txt": "alpha\n", "b.txt": "beta\n"}


class Workspace:
    """A fake file service: ``edit`` appends a line; its compensation restores the pre-image the
    runtime captured before the intent, deduped by the compensation's key. ``crash_undo`` kills
    the process right after the n-th applied undo (its effect landed, no result committed)."""

    def __init__(self, harness: Harness | None = None, *, crash_undo: int | None = None) -> None:
        self.files = dict(INITIAL)
        self.undone: list[str] = []  # call ids of applied undos, in order
        self.undo_keys: list[str] = []  # every undo attempt's key
        self.harness = harness
        self.crash_undo = crash_undo

    async def edit(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        path = arguments["path"]
        self.files[path] = self.files.get(path, "") + f"{arguments['line']}\n"
        return f"edited {path}"

    async def capture(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"path": arguments["path"], "content": self.files.get(arguments["path"])}

    async def undo(self, arguments: dict[str, Any], pre: dict[str, Any], ctx: ToolContext) -> str:
        self.undo_keys.append(ctx.idempotency_key)
        if ctx.idempotency_key in self.undo_keys[:-1]:
            return "already restored"
        self.undone.append(ctx.call_id)
        if pre["content"] is None:
            self.files.pop(pre["path"], None)
        else:
            self.files[pre["path"]] = pre["content"]
        if self.crash_undo is not None and len(self.undone) == self.crash_undo:
            self.crash_undo = None
            assert self.harness is not None
            await self.harness.crasher.crash()
        return f"restored {pre['path']}"

    def spec(self, name: str = "edit", policy: Any = "idempotent") -> ToolSpec:
        compensation = Compensation(undo=self.undo, capture=self.capture)
        return ToolSpec(name=name, fn=self.edit, policy=policy, compensation=compensation)


def three_edits_then(tool: str) -> ScriptedModel:
    """a.txt, b.txt, a.txt again (so only the reverse order restores a.txt), then ``tool``."""
    return ScriptedModel(
        [
            call("edit", path="a.txt", line="one"),
            call("edit", path="b.txt", line="two"),
            call("edit", path="a.txt", line="three"),
            call(tool),
        ]
    )


async def stopped(conversation: Conversation) -> None:
    await wait_until(lambda: conversation.state.active_run is None)


async def inspected_compensations(stores: Stores) -> list[dict[str, Any]]:
    """What ``python -m durable inspect`` reports of the compensations of the one conversation."""
    report = await inspect_store(str(stores.path))
    (conversation,) = report.conversations
    compensations: list[dict[str, Any]] = conversation.to_json()["compensations"]
    return compensations


def intents(records: list[EventRecord]) -> list[str]:
    return [r.event.call_id for r in records if isinstance(r.event, ToolIntent)]


async def test_abandon_undoes_completed_calls_in_reverse_order(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    hang = EffectTool("wait", "unsafe", hang=True)
    harness = Harness(stores, model=three_edits_then("wait"))
    workspace = Workspace()
    harness.specs = [workspace.spec(), hang.spec()]
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("tune both files")
        await hang.started.wait()
        assert workspace.files != INITIAL
        await conversation.abandon(reason="user gave up")
        await stopped(conversation)
        submission = conversation.state.submissions[handle.id]
        (run,) = conversation.state.runs.values()

    assert workspace.files == INITIAL
    records = await stores.records()
    edits = intents(records)[:3]
    assert workspace.undone == [f"{c}.undo" for c in reversed(edits)]
    assert (run.stop_reason, run.detail) == ("abandoned", "user gave up")
    assert (submission.status, submission.reason) == ("unanswered", "abandoned")
    tail = event_types(records)[-9:]
    assert tail == ["compensation_intent", "compensation_result"] * 3 + [
        "task_settled",
        "input_settled",
        "run_stopped",
    ]
    planned = [r.event for r in records if r.event.type == "task_created"][-1]
    assert (planned.kind, planned.data["calls"]) == ("compensation", list(reversed(edits)))


async def test_crash_between_compensation_effect_and_result_applies_it_once(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    hang = EffectTool("wait", "unsafe", hang=True)
    harness = Harness(stores, model=three_edits_then("wait"))
    workspace = Workspace(harness, crash_undo=2)  # the second compensation (b.txt's edit)
    harness.specs = [workspace.spec(), hang.spec()]

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("tune both files")
        await hang.started.wait()
        await conversation.abandon()
        await trio.sleep_forever()

    await harness.crash_run("owner-a", body)
    edits = intents(await stores.records())[:3]
    compensations = await inspected_compensations(stores)
    assert [(c["call_id"], c["status"]) for c in compensations] == [
        (edits[2], "done"),
        (edits[1], "intent"),  # the crash hit between its effect and its result
        (edits[0], "pending"),
    ]
    assert workspace.undone == [f"{edits[2]}.undo", f"{edits[1]}.undo"]
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await stopped(conversation)

    assert workspace.files == INITIAL
    assert workspace.undone == [f"{c}.undo" for c in reversed(edits)]
    second_key = f"{CONV}:{edits[1]}:undo"
    assert workspace.undo_keys.count(second_key) == 2  # re-run once, same key, deduped
    records = await stores.records()
    compensated = of_type(records, "compensation_intent")
    assert [e.call_id for e in compensated] == list(reversed(edits))  # one intent each
    assert len(of_type(records, "compensation_result")) == 3


async def test_abandon_without_compensable_calls_stops_the_run_at_once(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    hang = EffectTool("wait", "unsafe", hang=True)
    harness = Harness(stores, model=ScriptedModel([call("wait")]), tools=[hang.spec()])
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("wait")
        await hang.started.wait()
        await conversation.abandon()
        assert conversation.state.active_run is None
    records = await stores.records()
    assert "compensation_intent" not in event_types(records)
    (stop,) = of_type(records, "run_stopped")
    assert stop.reason == "abandoned"


async def test_operator_reject_undoes_the_rejected_call_first(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    model = ScriptedModel(
        [call("edit", path="a.txt", line="one"), call("risky", path="b.txt", line="two")],
        default=answer("done"),
    )
    harness = Harness(stores, model=model)
    workspace = Workspace()
    risky = workspace.spec("risky", "manual")

    async def crash_after(arguments: dict[str, Any], ctx: ToolContext) -> str:
        await workspace.edit(arguments, ctx)
        await harness.crasher.crash()
        raise AssertionError("unreachable")

    harness.specs = [workspace.spec(), risky]

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("edit both")
        await trio.sleep_forever()

    harness.specs[1] = ToolSpec(
        name="risky", fn=crash_after, policy="manual", compensation=risky.compensation
    )
    await harness.crash_run("owner-a", body)
    harness.specs[1] = risky
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await wait_until(lambda: bool(conversation.pending_reconciliations()))
        (waiting,) = conversation.pending_reconciliations()
        with pytest.raises(ValueError, match="not waiting"):
            await conversation.reject("call-404")
        await conversation.reject(waiting.call_id, reason="too risky")
        await stopped(conversation)
        (run,) = conversation.state.runs.values()

    assert workspace.files == INITIAL
    first, rejected = intents(await stores.records())
    assert workspace.undone == [f"{rejected}.undo", f"{first}.undo"]
    assert (run.stop_reason, run.detail) == ("abandoned", "too risky")


async def test_abort_leaves_a_run_being_compensated_to_its_compensations(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    hang = EffectTool("wait", "unsafe", hang=True)
    harness = Harness(stores, model=three_edits_then("wait"))
    workspace = Workspace()
    harness.specs = [workspace.spec(), hang.spec()]
    async with harness.process("owner-a") as runtime:
        conversation = await runtime.conversation(CONV)
        await conversation.submit("tune both files")
        await hang.started.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conversation.abandon)
            await wait_until(lambda: conversation.state.compensating_task() is not None, step_s=0)
            await conversation.abort()
            await conversation.abandon()  # a second abandonment changes nothing either
        await stopped(conversation)
        (run,) = conversation.state.runs.values()
    assert run.stop_reason == "abandoned" and workspace.files == INITIAL
    assert len(of_type(await stores.records(), "compensation_result")) == 3


def test_reduce_refuses_compensations_out_of_the_plan_order() -> None:
    """The reducer holds the order the plan committed: a compensation intent for a call while
    an earlier call of the plan has no compensation result is an invariant violation."""
    from durable.events import Budget as B
    from durable.events import (
        InputAccepted,
        LeaseAcquired,
        RunStarted,
        TaskCreated,
        TaskSettled,
        ToolCall,
        ToolResult,
    )

    events: list[Any] = [
        LeaseAcquired(owner_id="o", epoch=1, expires_at_s=30.0),
        InputAccepted(submission_id="s", request_id=None, content="x"),
        RunStarted(run_id="r", inputs=["s"], budget=B()),
    ]
    for n in (1, 2):
        tool_call = ToolCall(call_id=f"c{n}", tool="edit", arguments={})
        events += [
            TaskCreated(task_id=f"t{n}", kind="tool", run_id="r", phase="call", call=tool_call),
            ToolIntent(
                task_id=f"t{n}",
                call_id=f"c{n}",
                tool="edit",
                arguments={},
                policy="idempotent",
                idempotency_key=f"k{n}",
                epoch=1,
                compensable=True,
                pre_image={"content": "x"},
            ),
            ToolResult(
                task_id=f"t{n}", call_id=f"c{n}", output="", is_error=False, source="executed"
            ),
            TaskSettled(task_id=f"t{n}", outcome="completed"),
        ]
    events.append(
        TaskCreated(
            task_id="u",
            kind="compensation",
            run_id="r",
            phase="compensate",
            data={"calls": ["c2", "c1"]},
        )
    )
    records = one_commit_each(events)

    def plus(call_id: str) -> list[EventRecord]:
        undo = CompensationIntent(task_id="u", call_id=call_id, idempotency_key="k", epoch=1)
        return [*records, *one_commit_each([undo], start=len(records) + 1)]

    assert reduce(new_state(CONV), plus("c2")).intents["c2"].compensation_sequence is not None
    with pytest.raises(InvariantViolation, match="reverse order"):
        reduce(new_state(CONV), plus("c1"))
