"""Mutants of the inbox (docs/architecture.md, 1.5, "Inbox modes"): request-id dedupe, and
where, in which order and in which mode steering, follow-up and rejected inputs land."""

from __future__ import annotations

from typing import TypedDict, Unpack

from durable import runs as runs_mod
from durable import runtime as runtime_mod
from durable import state as state_mod
from durable.errors import ConversationBusy
from durable.events import Budget, Event, InboxMode, InputAccepted, InputsSteered
from durable.ports import Ids
from durable.runs import start_run
from durable.state import State
from durable.tasks import generation as generation_mod
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When

# The client re-sends ticket-1 after a crash that follows its acceptance.
AFTER_ACCEPTANCE = LabelledCrash(label="store.commit#2", when=When.AFTER, kind=CrashKind.PROCESS)


class _SubmitOptions(TypedDict, total=False):
    """The keyword options of ``Conversation.submit``, passed through as they came."""

    request_id: str | None
    mode: InboxMode


def _submit_without_dedupe(mp: Patcher) -> None:
    async def submit(
        self: runtime_mod.Conversation,
        content: str,
        *,
        request_id: str | None = None,
        mode: InboxMode = "follow_up",  # the scenarios of this mutant send follow-ups only
    ) -> runtime_mod.SubmissionHandle:
        ids = self.runtime.ports.ids
        budget = self.runtime.config.budget
        submission_id = ids.new("sub")

        def build(state: State) -> list[Event]:
            accepted = InputAccepted(
                submission_id=submission_id, request_id=request_id, content=content
            )
            if state.active_run is not None:
                return [accepted]
            return [accepted, *start_run(state, ids, budget, [submission_id])]

        await self.journal.commit(build)
        return runtime_mod.SubmissionHandle(self, submission_id)

    mp.setattr(runtime_mod.Conversation, "submit", submit)


@mutant(
    name="no-request-dedupe",
    bug_class="request_id dedupe missing (a re-sent request runs twice)",
    scenario="request_id_resubmit",
    caught_by=("I5",),
    witness=AFTER_ACCEPTANCE,
    first_kill="11:after:process",
)
def no_request_id_dedupe(mp: Patcher) -> None:
    """``submit`` drops the request-id dedupe, and the reducer (patched too, so the data reaches
    the log and the oracles' ``reduce``) lets a request id be re-mapped."""
    _submit_without_dedupe(mp)
    original = state_mod._APPLY[InputAccepted]

    def input_accepted(state: State, event: InputAccepted, sequence: int) -> None:
        if event.request_id is not None:  # no id maps nothing: the pop would find none
            state.request_ids.pop(event.request_id, None)
        original(state, event, sequence)

    mp.setitem(state_mod._APPLY, InputAccepted, input_accepted)


@mutant(
    name="no-request-dedupe-strict-reducer",
    bug_class="request_id dedupe missing from submit only (the reducer still refuses a re-mapped "
    "request id)",
    scenario="request_id_resubmit",
    caught_by=("I2", "I0"),
    witness=AFTER_ACCEPTANCE,
    first_kill="11:after:process",
)
def no_request_id_dedupe_strict_reducer(mp: Patcher) -> None:
    """Only ``submit`` drops the dedupe: the unpatched reducer refuses the duplicate request id
    *after* the store wrote it, so the runtime raises and the log no longer reduces -- and,
    with no reducible log, the inputs themselves cannot be judged."""
    _submit_without_dedupe(mp)


def _unchecked_steering(state: State, event: InputsSteered, sequence: int) -> None:
    """The reducer's steering placement without its boundary guard (a runtime whose reducer
    trusts the writer): the inputs join the run wherever the event stands."""
    run = state.runs[event.run_id]
    for sid in event.inputs:
        sub = state.submissions[sid]
        sub.status, sub.run_id = "placed", event.run_id
        state.queue.remove(sid)
        run.inputs.append(sid)
        state.messages.append(
            state_mod.Message(role="user", content=sub.content, submission_id=sid)
        )


@mutant(
    name="steer-anywhere",
    bug_class="a steering input placed when accepted, between a tool call and its result",
    scenario="steer_mid_tools",
    caught_by=("I14",),
    witness=None,  # steer-2 is placed in its own commit while the read is in flight
    first_kill="none",
)
def steer_anywhere(mp: Patcher) -> None:
    """A steering input is placed into the running run as soon as it is accepted (its own next
    commit), not at the next post-tools boundary: it lands between a tool call and its result.
    The reducer's guard is patched away too, so the misplacement reaches the log."""
    original = runtime_mod.Conversation.submit

    async def submit(
        self: runtime_mod.Conversation, content: str, **kwargs: Unpack[_SubmitOptions]
    ) -> runtime_mod.SubmissionHandle:
        handle = await original(self, content, **kwargs)

        def build(state: State) -> list[Event]:
            steering = state.steering_queue()
            turns = [
                t.id
                for t in state.tasks.values()
                if t.run_id == state.active_run and t.kind == "generation"
            ]
            run_id = state.active_run  # no active run: no turn is in it either
            if not steering or not turns or run_id is None:
                return []
            return [InputsSteered(run_id=run_id, task_id=turns[-1], inputs=steering)]

        await self.journal.commit(build)
        return handle

    mp.setattr(runtime_mod.Conversation, "submit", submit)
    mp.setitem(state_mod._APPLY, InputsSteered, _unchecked_steering)


@mutant(
    name="steer-reversed",
    bug_class="queued steering inputs placed newest first",
    scenario="steer_and_follow_up_queued",
    caught_by=("I15",),
    witness=None,
    first_kill="none",
)
def steer_reversed(mp: Patcher) -> None:
    """The post-tools boundary places the queued steering inputs newest first."""
    original = runs_mod.place_steering

    def place_steering(state: State, task_id: str) -> list[Event]:
        events = [e for e in original(state, task_id) if isinstance(e, InputsSteered)]  # all are
        return [e.model_copy(update={"inputs": e.inputs[::-1]}) for e in events]

    mp.setattr(generation_mod, "place_steering", place_steering)


@mutant(
    name="steer-queue-in-memory",
    bug_class="the steering queue read from process memory, not the log (lost on restart)",
    scenario="steer_mid_tools",
    caught_by=("I14",),
    # steer-2 queued, the read in flight: the restarted process forgets steer-2 at the
    # post-tools boundary.
    witness=LabelledCrash(label="store.lease.renew#1", when=When.BEFORE, kind=CrashKind.PROCESS),
    first_kill="27:before:process",
)
def steer_queue_in_memory(mp: Patcher) -> None:
    """The post-tools boundary places the steering inputs this process accepted, remembered in
    memory, instead of the durable queue: after a restart a queued steering input misses its
    boundary (and, if the run settles first, joins the next run)."""
    accepted: dict[int, tuple[State, set[str]]] = {}  # id(state) -> (the state, its steering ids)
    original_submit = runtime_mod.Conversation.submit
    original_place = runs_mod.place_steering

    def remembered(state: State) -> set[str]:
        entry = accepted.get(id(state))
        if entry is None or entry[0] is not state:
            entry = accepted[id(state)] = (state, set())
        return entry[1]

    async def submit(
        self: runtime_mod.Conversation, content: str, **kwargs: Unpack[_SubmitOptions]
    ) -> runtime_mod.SubmissionHandle:
        handle = await original_submit(self, content, **kwargs)
        if kwargs.get("mode") == "steer":
            remembered(self.journal.state).add(handle.id)
        return handle

    def place_steering(state: State, task_id: str) -> list[Event]:
        known = remembered(state)
        events = [e for e in original_place(state, task_id) if isinstance(e, InputsSteered)]
        kept = [
            e.model_copy(update={"inputs": [i for i in e.inputs if i in known]}) for e in events
        ]
        return [e for e in kept if e.inputs]

    mp.setattr(runtime_mod.Conversation, "submit", submit)
    mp.setattr(generation_mod, "place_steering", place_steering)


@mutant(
    name="reject-writes",
    bug_class="a rejected (busy) input committed before ConversationBusy is raised",
    scenario="reject_while_busy",
    caught_by=("I16",),
    witness=None,  # ping-2 is committed, then refused as busy
    first_kill="none",
)
def reject_writes(mp: Patcher) -> None:
    """A reject-mode input that meets an active run is committed (queued as a follow-up) before
    ``ConversationBusy`` is raised: the caller is told nothing was written, and a later re-send
    of the request id finds the input already there."""
    original = runtime_mod.Conversation.submit

    async def submit(
        self: runtime_mod.Conversation, content: str, **kwargs: Unpack[_SubmitOptions]
    ) -> runtime_mod.SubmissionHandle:
        request_id, mode = kwargs.get("request_id"), kwargs.get("mode", "follow_up")
        state = self.journal.state
        busy = state.active_run is not None and request_id not in state.request_ids
        if mode == "reject" and busy:
            await original(self, content, request_id=request_id, mode="follow_up")
            raise ConversationBusy(self.id, state.active_run or "?", request_id)
        return await original(self, content, **kwargs)

    mp.setattr(runtime_mod.Conversation, "submit", submit)


@mutant(
    name="steer-lost-on-settle",
    bug_class="queued steering inputs dropped when the run settles before a post-tools boundary",
    scenario="steer_misses_the_run",
    caught_by=("I7",),
    witness=None,  # steer-2 stays queued after run-1 settles
    first_kill="none",
)
def steer_lost_on_settle(mp: Patcher) -> None:
    """A run that settles before its post-tools boundary starts the next run with its queued
    follow-ups only: the steering inputs stay queued for ever (never placed, never settled)."""
    original = runs_mod.start_run

    def start_run(state: State, ids: Ids, budget: Budget, inputs: list[str]) -> list[Event]:
        kept = [sid for sid in inputs if state.submissions[sid].mode != "steer"]
        return original(state, ids, budget, kept) if kept else []

    mp.setattr(runs_mod, "start_run", start_run)


@mutant(
    name="steer-follow-ups",
    bug_class="queued follow-ups steered into the running run (the next run never starts)",
    scenario="steer_and_follow_up_queued",
    caught_by=("I21",),
    witness=None,  # tickets-2, a follow-up, is placed with steer-3 and steer-4
    first_kill="none",
)
def steer_follow_ups(mp: Patcher) -> None:
    """The post-tools boundary places the whole queue, follow-ups included, into the running
    run, which answers them all with its own answer; the reducer's mode guard is patched away
    too (a reducer that trusts the writer), so the placement reaches the log."""
    original_place = runs_mod.place_steering
    original_apply = state_mod._APPLY[InputsSteered]

    def place_steering(state: State, task_id: str) -> list[Event]:
        original_place(state, task_id)  # its assertions: a settled turn that waited on tools
        if not state.queue:
            return []
        run_id = state.tasks[task_id].run_id
        return [InputsSteered(run_id=run_id, task_id=task_id, inputs=list(state.queue))]

    def inputs_steered(state: State, event: InputsSteered, sequence: int) -> None:
        subs = [state.submissions[s] for s in event.inputs if s in state.submissions]
        modes = [sub.mode for sub in subs]
        for sub in subs:
            sub.mode = "steer"  # what the guard checks; restored below, as the log says
        try:
            original_apply(state, event, sequence)
        finally:
            for sub, mode in zip(subs, modes, strict=True):
                sub.mode = mode

    mp.setattr(generation_mod, "place_steering", place_steering)
    mp.setitem(state_mod._APPLY, InputsSteered, inputs_steered)
