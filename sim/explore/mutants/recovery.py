"""Mutants of tool calls and their recovery policies (docs/architecture.md, 1.3 and 1.4): the
intent before the effect, what recovery may do with an intent that has no result, and what a
tool's result may contain; and of what a graceful shutdown leaves to resume (1.5). Some shapes
come from public trackers of durable runtimes (LangGraph's: a tool re-run after its effect
landed)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, TypedDict, Unpack

import trio

from durable import runs as runs_mod
from durable import runtime as runtime_mod
from durable.events import Budget, Event, StopReason, TaskSettled, ToolIntent, ToolResult
from durable.ports import Ids
from durable.scheduler import Scheduler
from durable.state import State
from durable.state_model import Intent
from durable.tasks import TaskEnv, live_task
from durable.tasks import compensation as compensation_mod
from durable.tasks import tool as tool_mod
from durable.tools import ToolContext, ToolSpec, idempotency_key
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When


@mutant(
    name="effect-before-intent",
    bug_class="tool effect before its intent is durable",
    scenario="idempotent_payment",
    caught_by=("I6",),
    witness=None,  # the charge lands a boundary before its intent is committed
    first_kill="none",
)
def effect_before_intent(mp: Patcher) -> None:
    """The tool runs first; its intent is committed only afterwards (with the result)."""

    async def _call(env: TaskEnv, task_id: str) -> None:
        state = env.journal.state
        call = state.tasks[task_id].call
        assert call is not None, f"tool task {task_id} without a call"
        spec = env.tools.get(call.tool)
        assert spec is not None, "the scenario's model proposes only its own tools"
        key = idempotency_key(state.conversation_id, call.call_id)
        epoch = env.journal.lease.epoch
        ctx = ToolContext(
            conversation_id=state.conversation_id,
            call_id=call.call_id,
            idempotency_key=key,
            epoch=epoch,
            attempt="first",
        )
        try:
            output, is_error = await spec.fn(dict(call.arguments), ctx), False
        except Exception as exc:
            output, is_error = f"{type(exc).__name__}: {exc}", True
        intent = ToolIntent(
            task_id=task_id,
            call_id=call.call_id,
            tool=call.tool,
            arguments=dict(call.arguments),
            policy=spec.policy,
            idempotency_key=key,
            epoch=epoch,
        )
        result = ToolResult(
            task_id=task_id,
            call_id=call.call_id,
            output=output,
            is_error=is_error,
            source="executed",
        )
        settled = TaskSettled(task_id=task_id, outcome="failed" if is_error else "completed")
        await env.journal.commit(lambda s: [intent] if live_task(s, task_id) else [])
        await env.journal.commit(lambda s: [result, settled] if live_task(s, task_id) else [])

    mp.setattr(tool_mod, "_call", _call)


@mutant(
    name="recover-without-progress",
    bug_class="a tool task's recovery returns without committing anything",
    scenario="idempotent_payment",
    caught_by=("I0",),
    witness=LabelledCrash(label="store.commit#5", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="21:after:process",
)
def recover_without_progress(mp: Patcher) -> None:
    """The recovery path of a tool task returns without committing anything: the recovered
    task makes no progress, and the runtime says so instead of looping."""

    async def _recover(env: TaskEnv, task_id: str) -> None:
        return None

    mp.setattr(tool_mod, "_recover", _recover)


@mutant(
    name="unsafe-replayed",
    bug_class="an unsafe tool re-executed on recovery",
    scenario="read_edit_answer",
    caught_by=("I1",),
    witness=LabelledCrash(
        label="tool.effect:workspace.append_line#call-2", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="41:after:process",
)
def unsafe_replays_on_recovery(mp: Patcher) -> None:
    """Recovery ignores the policy and re-executes every interrupted tool (unsafe included)."""

    async def _recover(env: TaskEnv, task_id: str) -> None:
        state = env.journal.state
        call = state.tasks[task_id].call
        assert call is not None, f"tool task {task_id} without a call"
        intent = state.intents[call.call_id]
        spec = env.tools.get(intent.tool)
        assert spec is not None, "an intent's tool is in every process's registry"
        await tool_mod.execute_and_record(env, spec, intent, attempt="recovery")

    mp.setattr(tool_mod, "_recover", _recover)


@mutant(
    name="key-per-attempt",
    bug_class="a fresh idempotency key per attempt instead of one per call",
    scenario="idempotent_payment",
    caught_by=("I1",),
    witness=LabelledCrash(
        label="tool.effect:payments.charge#call-1", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="24:after:process",
)
def idempotency_key_per_attempt(mp: Patcher) -> None:
    """The key a tool is given varies with the attempt, so the service cannot dedupe."""
    original = tool_mod._context

    def _context(env: TaskEnv, intent: Intent, attempt: str) -> ToolContext:
        ctx = original(env, intent, attempt)
        return dataclasses.replace(ctx, idempotency_key=f"{ctx.idempotency_key}:{attempt}")

    mp.setattr(tool_mod, "_context", _context)


@mutant(
    name="key-per-epoch",
    bug_class="an idempotency key per lease epoch instead of one per call",
    scenario="idempotent_payment",
    caught_by=("I1",),
    witness=LabelledCrash(
        label="tool.effect:payments.charge#call-1", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="24:after:process",
    absolute=True,
)
def idempotency_key_per_epoch(mp: Patcher) -> None:
    """The key a tool is given carries the epoch of the lease it was sent under: a call re-sent
    by the next owner after a crash is a new call to the service. A crashed run's keys are then
    all of another epoch than the fault-free run's, which a view that ranks epochs hides."""
    original = tool_mod._context

    def _context(env: TaskEnv, intent: Intent, attempt: str) -> ToolContext:
        ctx = original(env, intent, attempt)
        epoch = env.journal.lease.epoch
        return dataclasses.replace(ctx, idempotency_key=f"{ctx.idempotency_key}@{epoch}")

    mp.setattr(tool_mod, "_context", _context)


@mutant(
    name="intent-ignored",
    bug_class="an in-flight intent ignored on resume (the run hangs)",
    scenario="idempotent_payment",
    caught_by=("I7",),
    witness=LabelledCrash(label="store.commit#5", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="21:after:process",
)
def scheduler_skips_execute(mp: Patcher) -> None:
    """The scheduler never starts a task in phase ``execute`` (the recovery entry point), so an
    interrupted tool call is never recovered and the run never settles."""

    async def run(self: Scheduler) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self.paused or self._env.journal.fenced:
                continue
            for task in self._env.journal.state.runnable_tasks():
                if task.phase != "execute" and task.id not in self._running:
                    scope = trio.CancelScope()
                    self._running[task.id] = scope
                    self._nursery.start_soon(self._invoke, task.id, task.kind, scope)

    mp.setattr(Scheduler, "run", run)


@mutant(
    name="verifier-ignored",
    bug_class="verify_then_continue re-executes without the verifier",
    scenario="verify_then_continue_edit",
    caught_by=("I1",),
    witness=LabelledCrash(
        label="tool.effect:workspace.append_line#call-1", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="24:after:process",
)
def verifier_ignored(mp: Patcher) -> None:
    """``verify_then_continue`` re-executes without asking the verifier: a tool re-run after
    its effect landed."""
    original = tool_mod._recover

    async def _recover(env: TaskEnv, task_id: str) -> None:
        state = env.journal.state
        call = state.tasks[task_id].call
        assert call is not None, f"tool task {task_id} without a call"
        intent = state.intents[call.call_id]
        if intent.policy == "verify_then_continue":
            spec = env.tools.get(intent.tool)
            assert spec is not None, "an intent's tool is in every process's registry"
            await tool_mod.execute_and_record(env, spec, intent, attempt="recovery")
            return
        await original(env, task_id)

    mp.setattr(tool_mod, "_recover", _recover)


@mutant(
    name="forgets-intent-on-second-recovery",
    bug_class="a recovery that finds an intent two epochs old runs its tool as a first attempt",
    scenario="read_edit_answer",
    caught_by=("I1",),
    # The unsafe append lands; the recovery dies right after its first commit (its lease), before
    # it records the call's outcome; the next recovery finds an intent two epochs old.
    witness=(
        LabelledCrash(
            label="tool.effect:workspace.append_line#call-2",
            when=When.AFTER,
            kind=CrashKind.PROCESS,
        ),
        LabelledCrash(label="store.commit", when=When.AFTER, kind=CrashKind.PROCESS),
    ),
    first_kill=None,  # one crash never shows it: the schedule fuzzer must find it
)
def forgets_intent_on_second_recovery(mp: Patcher) -> None:
    """A recovery that finds an intent written two epochs ago (a crash hit the previous recovery
    before it recorded the call's outcome) forgets it was ever started and runs the tool as a
    first attempt -- an ``unsafe`` effect happens twice."""
    original = tool_mod._recover

    async def _recover(env: TaskEnv, task_id: str) -> None:
        state = env.journal.state
        call = state.tasks[task_id].call
        assert call is not None, f"tool task {task_id} without a call"
        intent = state.intents[call.call_id]
        if intent.epoch <= env.journal.lease.epoch - 2:
            spec = env.tools.get(intent.tool)
            assert spec is not None, "an intent's tool is in every process's registry"
            await tool_mod.execute_and_record(env, spec, intent, attempt="first")
            return
        await original(env, task_id)

    mp.setattr(tool_mod, "_recover", _recover)


@mutant(
    name="recovery-output-differs",
    bug_class="a re-executed tool records a different output",
    scenario="idempotent_payment",
    caught_by=("I9",),
    witness=LabelledCrash(label="store.commit#5", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="21:after:process",
)
def recovery_rewrites_output(mp: Patcher) -> None:
    """A tool re-executed on recovery records a different output than a first execution."""
    original = tool_mod.execute_and_record

    async def execute_and_record(
        env: TaskEnv, spec: ToolSpec, intent: Intent, *, attempt: str
    ) -> None:
        if attempt == "recovery":
            fn = spec.fn

            async def replayed(arguments: dict[str, Any], ctx: ToolContext) -> str:
                return f"{await fn(arguments, ctx)} (replayed)"

            spec = dataclasses.replace(spec, fn=replayed)
        await original(env, spec, intent, attempt=attempt)

    mp.setattr(tool_mod, "execute_and_record", execute_and_record)


class _SettleOptions(TypedDict, total=False):
    """The keyword options of ``durable.runs.settle_run``, passed through as they came."""

    reason: StopReason
    answer: str | None
    detail: str
    start_next: bool
    settled: frozenset[str]


@mutant(
    name="abort-leaves-intents",
    bug_class="abort records no result for calls in flight",
    scenario="abort_mid_tool",
    caught_by=("I6",),
    witness=None,
    first_kill="none",
)
def abort_leaves_intents_open(mp: Patcher) -> None:
    """Abort settles the run but records no result for tool calls in flight."""
    original = runs_mod.settle_run  # the function runtime calls as its settle_run

    def settle_run(
        state: State, ids: Ids, budget: Budget, **kwargs: Unpack[_SettleOptions]
    ) -> list[Event]:
        events = original(state, ids, budget, **kwargs)
        if kwargs.get("reason") != "aborted":
            return events
        return [e for e in events if not (isinstance(e, ToolResult) and e.source == "aborted")]

    mp.setattr(runtime_mod, "settle_run", settle_run)


@mutant(
    name="store-error-as-tool-result",
    bug_class="a sub-agent's corrupt child store turned into the delegating call's error result",
    scenario="delegate_to_subagent",
    crash_kinds=(CrashKind.PROCESS, CrashKind.POWER, CrashKind.STORAGE),
    caught_by=("I20",),
    also=("I9",),
    witness=LabelledCrash(label="store.commit#6", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="31:after:storage",
)
def store_error_as_tool_result(mp: Patcher) -> None:
    """A tool's every ``Exception`` becomes its error result, damaged history included: a
    sub-agent whose child conversation is damaged returns "CorruptStore: ..." as the
    delegating call's result, and the parent answers on top of damaged history instead of
    refusing (``durable.tasks.is_tool_failure`` says yes to everything)."""

    def is_tool_failure(exc: Exception) -> bool:
        return True

    mp.setattr(tool_mod, "is_tool_failure", is_tool_failure)
    mp.setattr(compensation_mod, "is_tool_failure", is_tool_failure)


_LEAKY_COUNTER = itertools.count()


@mutant(
    name="leaky-counter",
    bug_class="process-global state leaks into a run (nondeterminism)",
    scenario="idempotent_payment",
    caught_by=("I10",),
    witness=None,  # the fault-free run, run twice, has two fingerprints
    first_kill="none",
)
def process_global_counter(mp: Patcher) -> None:
    """Tool outputs are stamped from a module-level counter that outlives a world run."""
    original = tool_mod.execute_and_record

    async def execute_and_record(
        env: TaskEnv, spec: ToolSpec, intent: Intent, *, attempt: str
    ) -> None:
        fn = spec.fn

        async def stamped(arguments: dict[str, Any], ctx: ToolContext) -> str:
            return f"{await fn(arguments, ctx)} #{next(_LEAKY_COUNTER)}"

        await original(env, dataclasses.replace(spec, fn=stamped), intent, attempt=attempt)

    mp.setattr(tool_mod, "execute_and_record", execute_and_record)


@mutant(
    name="shutdown-aborts-run",
    bug_class="a graceful shutdown aborts the run in flight instead of leaving it to resume",
    scenario="graceful_shutdown_takeover",
    caught_by=("I22",),
    witness=None,  # the shutdown at 3 s stops the run mid-charge; the standby has nothing left
    first_kill="none",
)
def shutdown_aborts_run(mp: Patcher) -> None:
    """A graceful shutdown settles each open conversation's active run as aborted (as if the
    caller had aborted it) before it releases the lease: the standby that takes over finds
    nothing to resume, and the caller's input ends unanswered."""
    original = runtime_mod.Runtime._shutdown

    async def _shutdown(self: runtime_mod.Runtime) -> None:
        for conversation in list(self._conversations.values()):
            if not conversation.journal.fenced and conversation.state.active_run is not None:
                await conversation.abort(reason="shut down")
        await original(self)

    mp.setattr(runtime_mod.Runtime, "_shutdown", _shutdown)
