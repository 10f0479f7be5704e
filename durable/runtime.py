"""The public runtime API: open a runtime, open conversations, submit inputs, wait for answers.

    async with Runtime.open(store=store, model=model, tools=tools) as runtime:
        conversation = await runtime.conversation("support-42")
        submission = await conversation.submit("fix the config", request_id="req-1")
        settled = await submission.wait()      # settled.status: "done" | "unanswered"

``submit`` returns once the input is durable. Leaving the ``async with`` normally stops the
conversations' work and releases their leases *without settling* anything in flight: like a
crash, a shutdown is not a return of control to the run's caller, so the next process resumes it.
Every return of control to a run's caller settles the run (docs/architecture.md, 1.5).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from durable.agent import outcome_events
from durable.config import RuntimeConfig
from durable.errors import ConversationBusy, Fenced
from durable.events import Event, InboxMode, InputAccepted, TaskSettled, ToolResult
from durable.journal import Journal
from durable.lease import heartbeat
from durable.model import ModelDriver
from durable.ports import Ports, real_ports
from durable.runs import abandon_run, settle_run, start_run, withdraw_queued
from durable.scheduler import Scheduler
from durable.state import Intent, State, Submission
from durable.store.base import Store
from durable.tasks import TaskEnv
from durable.tools import ToolRegistry

INBOX_MODES: tuple[InboxMode, ...] = ("follow_up", "steer", "reject")


class Runtime:
    """One process's runtime: a nursery holding every open conversation's work."""

    def __init__(
        self,
        *,
        store: Store,
        ports: Ports,
        model: ModelDriver | None,
        tools: ToolRegistry,
        config: RuntimeConfig,
        owner_id: str,
        nursery: trio.Nursery,
    ) -> None:
        self.store = store
        self.ports = ports
        self.model = model
        self.tools = tools
        self.config = config
        self.owner_id = owner_id
        self._nursery = nursery
        self._conversations: dict[str, Conversation] = {}

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        store: Store,
        model: ModelDriver | None,
        tools: ToolRegistry | None = None,
        ports: Ports | None = None,
        config: RuntimeConfig | None = None,
        owner_id: str | None = None,
    ) -> AsyncIterator[Runtime]:
        ports = ports if ports is not None else real_ports()
        async with trio.open_nursery() as nursery:
            runtime = cls(
                store=store,
                ports=ports,
                model=model,
                tools=tools if tools is not None else ToolRegistry(),
                config=config if config is not None else RuntimeConfig(),
                owner_id=owner_id if owner_id is not None else ports.ids.new("owner"),
                nursery=nursery,
            )
            yield runtime
            # Reached only on a normal exit: an exception (or a crash) skips the release.
            await runtime._shutdown()
            nursery.cancel_scope.cancel()

    async def conversation(self, conversation_id: str) -> Conversation:
        """Open (or return the already open) conversation: acquire its lease, recover its state
        from checkpoint + log, and start its scheduler. Resumes whatever a crash left in flight."""
        existing = self._conversations.get(conversation_id)
        if existing is not None and not existing.journal.fenced:
            return existing
        journal = await Journal.open(
            store=self.store,
            ports=self.ports,
            config=self.config,
            conversation_id=conversation_id,
            owner_id=self.owner_id,
        )
        conversation = Conversation(self, journal)
        await self._nursery.start(conversation._serve)
        self._conversations[conversation_id] = conversation
        return conversation

    async def list_conversations(self) -> list[str]:
        return await self.store.list_conversations()

    def open_conversations(self) -> list[Conversation]:
        """The conversations this runtime has open now (a host inspecting its process, e.g.
        whether a request is pinned and unanswered when the process dies)."""
        return list(self._conversations.values())

    async def _shutdown(self) -> None:
        """Stop every conversation's work, wait until it has stopped, then release the leases:
        a lease released while a tool is still running would let another owner start early."""
        for conversation in self._conversations.values():
            conversation._scope.cancel()
        for conversation in self._conversations.values():
            await conversation._stopped.wait()
            if not conversation.journal.fenced:
                await self.store.release_lease(conversation.journal.lease)


class Conversation:
    """A handle on one open conversation (its journal, scheduler and heartbeat)."""

    def __init__(self, runtime: Runtime, journal: Journal) -> None:
        self.runtime = runtime
        self.journal = journal
        self.id = journal.state.conversation_id
        self._scope = trio.CancelScope()
        self._stopped = trio.Event()
        self._scheduler: Scheduler | None = None

    @property
    def state(self) -> State:
        """The committed state (read-only by convention: mutate it only through commits)."""
        return self.journal.state

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        rt = self.runtime
        env = TaskEnv(
            journal=self.journal, ports=rt.ports, config=rt.config, model=rt.model, tools=rt.tools
        )
        with self._scope:
            async with trio.open_nursery() as nursery:
                scheduler = Scheduler(env, nursery)
                scheduler.on_fenced = self._on_fenced
                self._scheduler = scheduler
                self.journal.on_commit = scheduler.kick
                nursery.start_soon(scheduler.run)
                nursery.start_soon(lambda: heartbeat(self.journal, on_fenced=self._on_fenced))
                scheduler.kick()
                task_status.started()
        self._stopped.set()  # reached only when the work ended without an exception

    def _on_fenced(self) -> None:
        """Lost the lease: stop all of this conversation's work in this process (in memory)."""
        self.journal.fence()
        self._scope.cancel()

    # -- inputs --------------------------------------------------------------------------------

    async def submit(
        self, content: str, *, request_id: str | None = None, mode: InboxMode = "follow_up"
    ) -> SubmissionHandle:
        """Accept an input durably. The same ``request_id`` returns the existing submission and
        writes nothing. If no run is active, the input starts one in the same commit, whatever
        its mode. While a run is active, ``mode`` decides: ``follow_up`` queues it for the next
        run; ``steer`` queues it for the running run's next post-tools boundary (or the next
        run, if this one settles first); ``reject`` raises ``ConversationBusy`` and writes
        nothing. The decision is taken against the state the commit builds on, so it cannot
        race a run settling."""
        if mode not in INBOX_MODES:
            raise ValueError(f"unknown inbox mode {mode!r} (one of {', '.join(INBOX_MODES)})")
        ids = self.runtime.ports.ids
        budget = self.runtime.config.budget
        submission_id = ids.new("sub")
        found: list[str] = []

        def build(state: State) -> list[Event]:
            if request_id is not None and request_id in state.request_ids:
                found.append(state.request_ids[request_id])
                return []
            if mode == "reject" and state.active_run is not None:
                raise ConversationBusy(self.id, state.active_run, request_id)
            accepted = InputAccepted(
                submission_id=submission_id, request_id=request_id, content=content, mode=mode
            )
            if state.active_run is not None:
                return [accepted]
            assert not state.queue, "inputs queued while no run is active"
            return [accepted, *start_run(state, ids, budget, [submission_id])]

        await self.journal.commit(build)
        return SubmissionHandle(self, found[0] if found else submission_id)

    def submission(self, submission_id: str) -> SubmissionHandle:
        if submission_id not in self.state.submissions:
            raise KeyError(f"unknown submission {submission_id}")
        return SubmissionHandle(self, submission_id)

    async def abort(self, *, reason: str = "aborted by the caller") -> None:
        """Stop the active run and withdraw queued inputs. Settles everything (nothing of it will
        run again); does not undo effects that already happened (``abandon`` does)."""
        ids, budget = self.runtime.ports.ids, self.runtime.config.budget

        def build(state: State) -> list[Event]:
            events: list[Event] = []
            # A run being abandoned is left to its compensations (docs/runtime.md, "Compensation").
            if state.active_run is not None and state.compensating_task() is None:
                events += settle_run(
                    state, ids, budget, reason="aborted", detail=reason, start_next=False
                )
            return events + withdraw_queued(state, "aborted")

        await self._stopping_work(build)

    async def abandon(self, *, reason: str = "abandoned by the caller") -> None:
        """Abort the active run *and undo it*: stop its work, withdraw queued inputs, and apply
        the compensations of its completed compensable calls in reverse order, each once,
        journaled like a call (docs/runtime.md, "Compensation"). Returns once the abandonment is
        durable; the compensations run in the background (and resume after a crash), and the
        run stops (``abandoned``) when they have all settled."""
        ids, budget = self.runtime.ports.ids, self.runtime.config.budget
        await self._stopping_work(lambda s: abandon_run(s, ids, budget, detail=reason))

    async def _stopping_work(self, build: Callable[[State], list[Event]]) -> None:
        """Commit ``build`` with the scheduler paused and every invocation cancelled, so no task
        of the run can commit after the decision is taken."""
        scheduler = self._scheduler
        assert scheduler is not None
        if self.journal.fenced:
            raise Fenced(f"{self.id}: lease lost; this process can no longer stop its run")
        scheduler.paused = True
        try:
            await scheduler.cancel_all()
            await self.journal.commit(build)
        finally:
            # Memory only: whatever ended the commit (an error, the caller's cancellation), the
            # scheduler must not stay paused.
            scheduler.paused = False
            scheduler.kick()

    # -- manual reconciliation -----------------------------------------------------------------

    def pending_reconciliations(self) -> list[Intent]:
        return [
            i for i in self.state.intents.values() if i.reconciliation and i.result_sequence is None
        ]

    async def resolve(self, call_id: str, *, output: str, is_error: bool = False) -> None:
        """An operator's decision for a call waiting on reconciliation: record ``output`` as its
        result (the run then continues). Raises ``ValueError`` if the call is not waiting."""

        def build(state: State) -> list[Event]:
            intent = state.intents.get(call_id)
            if intent is None or not intent.reconciliation or intent.result_sequence is not None:
                raise ValueError(f"call {call_id} is not waiting for reconciliation")
            return [
                ToolResult(
                    task_id=intent.task_id,
                    call_id=call_id,
                    output=output,
                    is_error=is_error,
                    source="operator",
                ),
                # The operator says what the call returned, not which content a file holds or
                # what a check saw: an edit bumps the revision with its content unknown, and a
                # validation resolved by hand records no verdict.
                *outcome_events(state, intent, ok=False, known=False),
                TaskSettled(
                    task_id=intent.task_id,
                    outcome="failed" if is_error else "completed",
                    detail="resolved by an operator",
                ),
            ]

        await self.journal.commit(build)

    async def reject(self, call_id: str, *, reason: str = "rejected by an operator") -> None:
        """An operator's rejection of a call waiting for reconciliation: the call gets an error
        result and its run is abandoned with compensation (``abandon``), the rejected call's
        own compensation first (``durable.runs.compensation_plan``). Raises ``ValueError`` if
        the call is not waiting."""
        ids, budget = self.runtime.ports.ids, self.runtime.config.budget

        def build(state: State) -> list[Event]:
            intent = state.intents.get(call_id)
            if intent is None or not intent.reconciliation or intent.result_sequence is not None:
                raise ValueError(f"call {call_id} is not waiting for reconciliation")
            return abandon_run(state, ids, budget, detail=reason)

        await self._stopping_work(build)


class SubmissionHandle:
    def __init__(self, conversation: Conversation, submission_id: str) -> None:
        self.conversation = conversation
        self.id = submission_id

    @property
    def record(self) -> Submission:
        return self.conversation.state.submissions[self.id]

    async def wait(self) -> Submission:
        """Wait until the submission is settled (``done`` or ``unanswered``). Raises ``Fenced``
        if this process lost the conversation's lease meanwhile."""
        journal = self.conversation.journal
        while self.record.status not in ("done", "unanswered"):
            if journal.fenced:
                raise Fenced(f"{self.conversation.id}: lease lost while waiting for {self.id}")
            await journal.wait_changed()
        return self.record
