"""Agent state (docs/architecture.md, 1.7) through the public API: the plan and its history,
file edits with content hashes and a mutation revision (exactly one bump per applied edit,
across crashes), validations against required criteria, and a provider cursor pinned only when
the model said it can resume from it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from testkit import (
    CONV,
    CRITERION,
    Harness,
    ScriptedModel,
    Stores,
    Workspace,
    answer,
    call,
    of_type,
    settled,
)

from durable.codec import canonical_json
from durable.config import RuntimeConfig
from durable.events import (
    EventRecord,
    FileChanged,
    ModelCompleted,
    ModelRequested,
    ToolIntent,
)
from durable.model import ModelRequest, ModelResponse
from durable.runtime import Runtime
from durable.state import InvariantViolation, State, apply
from durable.tools import ToolSpec, content_hash


def edit(old: str, new: str) -> ModelResponse:
    return call("edit", path="app.py", old=old, new=new)


def test_check(expect: str) -> ModelResponse:
    return call("test", path="app.py", expect=expect)


test_check.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def world(stores: Stores, steps: list[Any], **config: Any) -> tuple[Harness, Workspace]:
    workspace = Workspace({"app.py": "port = 80\ntls = off\n"})
    harness = Harness(
        stores,
        model=ScriptedModel(steps),
        tools=workspace.specs(),
        config=RuntimeConfig(**config),
    )
    workspace.crasher = harness.crasher
    return harness, workspace


async def one_input(harness: Harness, owner: str = "owner-a") -> State:
    async with harness.process(owner) as runtime:
        conversation = await runtime.conversation(CONV)
        handle = await conversation.submit("fix app.py", request_id="r1")
        await settled(conversation, handle.id)
        return conversation.state.model_copy(deep=True)


async def crash_then_recover(harness: Harness) -> State:
    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        await (await conversation.submit("fix app.py", request_id="r1")).wait()

    await harness.crash_run("owner-a", body)
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await settled(conversation, conversation.state.request_ids["r1"])
        return conversation.state.model_copy(deep=True)


def planned(steps: list[str], response: ModelResponse) -> ModelResponse:
    return response.model_copy(update={"plan": steps})


async def test_plan_and_its_history(stores: Stores, autojump_clock: trio.abc.Clock) -> None:
    steps = [
        planned(["edit", "answer"], edit("80", "443")),
        planned(["edit", "check", "answer"], answer("done")),
    ]
    harness, _ = world(stores, steps)
    state = await one_input(harness)
    assert state.plan == ["edit", "check", "answer"]
    assert [(p.revision, p.steps) for p in state.plan_history] == [
        (1, ["edit", "answer"]),
        (2, ["edit", "check", "answer"]),
    ]
    records = await stores.records()
    assert len(of_type(records, "plan_updated")) == 2


async def test_edits_record_hashes_and_bump_the_revision(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness, workspace = world(stores, [edit("80", "443"), edit("off", "on"), answer("done")])
    state = await one_input(harness)
    assert workspace.files["app.py"] == "port = 443\ntls = on\n"
    assert state.mutation_revision == 2
    assert [c.revision for c in state.file_changes] == [1, 2]
    assert len({c.call_id for c in state.file_changes}) == 2
    latest = state.changed_files["app.py"]
    assert latest.after_hash == content_hash(workspace.files["app.py"])
    assert latest.before_hash == state.file_changes[0].after_hash


@pytest.mark.parametrize("where", ["after", "before"])
async def test_an_interrupted_edit_bumps_the_revision_once(
    where: str, stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """A crash after the effect: the verifier finds the planned after-hash, the edit is not run
    again and the revision is bumped once; a crash before it: the before-hash, so it runs."""
    harness, workspace = world(stores, [edit("80", "443"), answer("done")])
    workspace.crash_after_edit = where == "after"
    workspace.crash_before_edit = where == "before"
    state = await crash_then_recover(harness)
    assert workspace.edits == 1 and workspace.files["app.py"] == "port = 443\ntls = off\n"
    assert workspace.verdicts == ["applied" if where == "after" else "not_applied"]
    assert state.mutation_revision == 1
    records = await stores.records()
    changes = [r.event for r in records if isinstance(r.event, FileChanged)]
    (intent,) = state.intents.values()
    assert [(c.call_id, c.revision) for c in changes] == [(intent.call_id, 1)]
    source = "verified" if where == "after" else "executed"
    assert state.tool_results[intent.call_id].source == source


async def test_completion_needs_a_passing_validation_at_the_current_revision(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    steps = [edit("80", "443"), test_check("port = 443"), edit("off", "on"), answer("done")]
    harness, _ = world(stores, steps, required_criteria=(CRITERION,))
    state = await one_input(harness)
    (run,) = state.runs.values()
    assert run.stop_reason == "unvalidated"
    assert "not validated at revision 2: tests pass" in run.detail
    (validation,) = state.validations
    assert (validation.passed, validation.revision) == (True, 1)
    assert state.submissions[state.request_ids["r1"]].status == "unanswered"


async def test_a_validation_at_the_current_revision_completes_the_run(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    steps = [edit("80", "443"), test_check("port = 443"), answer("done")]
    harness, _ = world(stores, steps, required_criteria=(CRITERION,))
    state = await one_input(harness)
    (run,) = state.runs.values()
    assert run.stop_reason == "completed"
    assert state.unvalidated([CRITERION]) == []


async def test_a_later_failure_at_the_same_revision_overrides_a_pass(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    steps = [test_check("port"), test_check("no such text"), answer("done")]
    harness, _ = world(stores, steps, required_criteria=(CRITERION,))
    state = await one_input(harness)
    assert [v.passed for v in state.validations] == [True, False]
    (run,) = state.runs.values()
    assert run.stop_reason == "unvalidated"


def with_cursor(response: ModelResponse, cursor: str, *, resumable: bool) -> ModelResponse:
    return response.model_copy(update={"cursor": cursor, "resumable": resumable})


async def test_only_a_resumable_cursor_is_sent(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    steps = [
        with_cursor(edit("80", "443"), "resp-a", resumable=False),
        with_cursor(edit("off", "on"), "resp-b", resumable=True),
        answer("done"),
    ]
    harness, _ = world(stores, steps)
    state = await one_input(harness)
    model = harness.model
    assert [r.cursor for r in model.requests] == [None, None, "resp-b"]
    assert state.cursor is not None and (state.cursor.cursor, state.cursor.resumable) == (
        "resp-b",
        True,
    )
    # A request without a cursor serialises as before the cursor existed.
    assert "cursor" not in model.requests[0].model_dump(mode="json")


async def test_a_resent_request_is_the_pinned_one_cursor_included(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """I11 with a cursor: the request that a crash interrupted is re-sent byte for byte, its
    pinned (resumable) cursor included."""
    sent: list[ModelRequest] = []
    crashed: list[bool] = []
    harness, _ = world(stores, [])

    async def crash_on_first_send(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        if not crashed:
            crashed.append(True)
            await harness.crasher.crash()
        return answer("done")

    first = with_cursor(edit("80", "443"), "resp-a", resumable=True)
    harness.model = ScriptedModel([first], default=crash_on_first_send)
    state = await crash_then_recover(harness)
    assert len(sent) >= 2 and sent[0].cursor == "resp-a"
    pinned = [canonical_json(r.model_dump(mode="json")) for r in sent]  # as the simulator's I11
    assert pinned == [pinned[0]] * len(sent)
    (run,) = state.runs.values()
    assert run.stop_reason == "completed"


def _state_with(records: list[EventRecord]) -> State:
    state = State(conversation_id=CONV)
    for record in records:
        apply(state, record)
    return state


async def test_the_reducer_refuses_a_cursor_that_was_not_resumable(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    steps = [with_cursor(edit("80", "443"), "resp-a", resumable=False), answer("done")]
    harness, _ = world(stores, steps)
    await one_input(harness)
    records = await stores.records()
    at = next(i for i, r in enumerate(records) if isinstance(r.event, ModelRequested) and i > 5)
    bad = records[at].model_copy(
        update={"event": records[at].event.model_copy(update={"cursor": "resp-a"})}
    )
    with pytest.raises(InvariantViolation, match="not a resumable cursor"):
        _state_with([*records[:at], bad])


async def test_the_reducer_refuses_a_revision_that_does_not_rise(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness, _ = world(stores, [edit("80", "443"), edit("off", "on"), answer("done")])
    await one_input(harness)
    records = await stores.records()
    second = [i for i, r in enumerate(records) if isinstance(r.event, FileChanged)][1]
    bad = records[second].model_copy(
        update={"event": records[second].event.model_copy(update={"revision": 1})}
    )
    with pytest.raises(InvariantViolation, match="mutation revision 1 not above 1"):
        _state_with([*records[:second], bad])


def test_an_edit_tool_needs_verify_then_continue() -> None:
    workspace = Workspace({})
    with pytest.raises(ValueError, match="needs verify_then_continue"):
        ToolSpec(name="edit", fn=workspace.edit, policy="unsafe", plan_edit=workspace.plan)


def test_unset_agent_fields_leave_the_serialised_state_unchanged() -> None:
    """Logs and checkpoints written without agent state keep their canonical JSON (and so
    their checksums and the simulator's fingerprints); set fields are serialised."""
    state = State(conversation_id=CONV)
    dumped = state.model_dump(mode="json")
    for name in ("plan", "plan_history", "mutation_revision", "changed_files", "cursor"):
        assert name not in dumped
    state.mutation_revision = 1
    assert state.model_dump(mode="json")["mutation_revision"] == 1
    intent = ToolIntent(
        task_id="t",
        call_id="c",
        tool="edit",
        arguments={},
        policy="unsafe",
        idempotency_key="k",
        epoch=1,
    )
    assert not {"edit", "validates"} & set(intent.model_dump(mode="json"))
    assert intent.model_copy(update={"validates": CRITERION}).model_dump()["validates"]
    completed = ModelCompleted(task_id="t", text="")
    assert not {"cursor", "resumable"} & set(completed.model_dump(mode="json"))
    with_cursor = ModelCompleted(task_id="t", text="", cursor="r", resumable=True)
    assert with_cursor.model_dump(mode="json") == {
        "type": "model_completed",
        "task_id": "t",
        "text": "",
        "tool_calls": [],
        "tokens": 0,
        "cursor": "r",
        "resumable": True,
    }


async def test_an_edit_settled_without_knowing_bumps_the_revision_unknown(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    """The edit landed, then the process died; the restarted process has the tool registered
    without its verifier (another policy), so recovery records it as interrupted: whether it
    landed is unknown, and the revision is bumped with no after-hash (an earlier validation no
    longer counts)."""
    harness, workspace = world(stores, [edit("80", "443"), answer("done")])
    workspace.crash_after_edit = True

    async def body(runtime: Runtime) -> None:
        conversation = await runtime.conversation(CONV)
        await (await conversation.submit("fix app.py", request_id="r1")).wait()

    await harness.crash_run("owner-a", body)
    harness.specs = [ToolSpec(name="edit", fn=workspace.edit, policy="unsafe")]
    async with harness.process("owner-b") as runtime:
        conversation = await runtime.conversation(CONV)
        await settled(conversation, conversation.state.request_ids["r1"])
        state = conversation.state
    (intent,) = state.intents.values()
    assert state.tool_results[intent.call_id].source == "interrupted"
    (change,) = state.file_changes
    assert (change.after_hash, change.revision, state.mutation_revision) == (None, 1, 1)


async def test_a_planner_that_fails_is_the_calls_error_result(
    stores: Stores, autojump_clock: trio.abc.Clock
) -> None:
    harness, workspace = world(stores, [call("edit", path="app.py"), answer("done")])
    state = await one_input(harness)  # the arguments lack old/new: the planner raises KeyError
    (result,) = state.tool_results.values()
    assert (result.source, result.is_error) == ("rejected", True)
    assert result.output.startswith("KeyError") and not state.intents
    assert state.mutation_revision == 0 and workspace.edits == 0
