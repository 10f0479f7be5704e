"""Mutation tests for the oracles (DESIGN 4.6): each oracle must catch a broken runtime.

Each case patches one piece of ``durable/`` with ``monkeypatch`` (a *mutant*: a realistic bug),
runs the smallest schedule that exposes it and asserts the oracle reports its invariant; the same
schedule on the unbroken runtime must pass. A schedule is named by a boundary *label* of the
fault-free trace (resolved to its index at run time, so an added boundary elsewhere does not break
the test); ``caught_at`` records the schedule text it resolves to today. ``also`` lists the other
invariants the same schedule reports (cascades), so a new, unexpected report fails the test.

The reference run of each case is the *mutated* runtime's fault-free run, exactly what a sweep
over the broken runtime would compare against (so I9/I11 only see what a crash changes).

Known limits found while writing these (not worked around here):

- Seed 0 never tears an append: a depth-1 power crash draws once from the world's power stream,
  and seed 0's first draw keeps only durable bytes (seed 1's tears). So the I2 case runs seed 2.
- I4's "task ran again after its run stopped" branch cannot fire on its own: such a log fails
  ``reduce`` (every task-bearing event needs a live task), so it is reported as I0/I2 instead.
- I8 reads only the log a fresh reader returns. A zombie whose appends the store accepts (fence,
  renewal and sequence checks all removed) writes sequences below the committed end; the file
  store's reader drops them as a torn tail, so I8 never sees the stale epoch (only I3/I12 fire).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from durable import journal as journal_mod
from durable import runtime as runtime_mod
from durable import scheduler as scheduler_mod
from durable import state as state_mod
from durable.events import (
    SCHEMA_VERSION,
    InputAccepted,
    TaskSettled,
    ToolIntent,
    ToolResult,
    canonical_json,
    sha256_hex,
)
from durable.model import ModelError, ModelRequest
from durable.runs import start_run
from durable.scheduler import Scheduler
from durable.store.base import Checkpoint, Lease, LeaseHeld
from durable.store.file import FileStore, _Scan
from durable.tasks import generation as generation_mod
from durable.tasks import live_task
from durable.tasks import tool as tool_mod
from durable.tools import ToolContext, idempotency_key
from sim.faults import CrashKind, CrashPoint, Schedule, When
from sim.runner import RunResult, run_scenario
from sim.scenario import Scenario, load_scenario
from sim.sweep import ScheduleOutcome, judge, sweep

Mutant = Callable[[pytest.MonkeyPatch], None]


# -- mutants -------------------------------------------------------------------------------------


def recover_without_progress(mp: pytest.MonkeyPatch) -> None:
    """I0: the recovery path of a tool task returns without committing anything."""

    async def _recover(env: Any, task_id: str) -> None:
        return None

    mp.setattr(tool_mod, "_recover", _recover)


def unsafe_replays_on_recovery(mp: pytest.MonkeyPatch) -> None:
    """I1: recovery ignores the policy and re-executes every interrupted tool (unsafe included)."""

    async def _recover(env: Any, task_id: str) -> None:
        state = env.journal.state
        intent = state.intents[state.tasks[task_id].call.call_id]
        spec = env.tools.get(intent.tool)
        await tool_mod.execute_and_record(env, spec, intent, attempt="recovery")

    mp.setattr(tool_mod, "_recover", _recover)


def idempotency_key_per_attempt(mp: pytest.MonkeyPatch) -> None:
    """I1: the key a tool is given varies with the attempt, so the service cannot dedupe."""
    original = tool_mod._context

    def _context(env: Any, intent: Any, attempt: str) -> ToolContext:
        ctx = original(env, intent, attempt)
        return dataclasses.replace(ctx, idempotency_key=f"{ctx.idempotency_key}:{attempt}")

    mp.setattr(tool_mod, "_context", _context)


def trust_torn_tail(mp: pytest.MonkeyPatch) -> None:
    """I2: the file store's reader trusts the complete lines of an incomplete (torn) last batch."""
    original = FileStore._scan

    def _scan(self: FileStore, conversation_id: str, path: str) -> _Scan:
        scan = original(self, conversation_id, path)
        if scan.tail_problem is None:
            return scan
        data = self._fs.read(path)
        records, offsets, pos = list(scan.records), list(scan.offsets), scan.good_end
        while (newline := data.find(b"\n", pos)) >= 0:
            record, why = self._check_line(data[pos:newline], conversation_id)
            if record is None or why is not None or record.sequence != len(records) + 1:
                break
            records.append(record)
            offsets.append(pos)
            pos = newline + 1
        return _Scan(records, offsets, pos, scan.size, scan.tail_problem)

    mp.setattr(FileStore, "_scan", _scan)


def checkpoint_claims_one_more(mp: pytest.MonkeyPatch) -> None:
    """I3: a checkpoint of the state through N is labelled (and checksummed) as through N+1."""

    def make_checkpoint(state: Any, saved_at_s: float) -> Checkpoint:
        body = {
            "schema_version": SCHEMA_VERSION,
            "conversation_id": state.conversation_id,
            "through_sequence": state.last_sequence + 1,
            "saved_at_s": saved_at_s,
            "state": state.model_dump(mode="json"),
        }
        return Checkpoint(**body, checksum=sha256_hex(canonical_json(body)))

    mp.setattr(journal_mod, "make_checkpoint", make_checkpoint)


def stale_context_window(mp: pytest.MonkeyPatch) -> None:
    """I4 (seed 001's bug): the pinned request keeps the first run's window (cutoff 1), so the
    next run's request does not contain its own input."""
    original = generation_mod.ModelRequested

    def model_requested(**fields: Any) -> Any:
        return original(**{**fields, "cutoff": min(fields["cutoff"], 1)})

    mp.setattr(generation_mod, "ModelRequested", model_requested)


def retry_after_fatal_error(mp: pytest.MonkeyPatch) -> None:
    """I4: after a fatal model error settled the run, the task sends the request once more."""
    original = generation_mod._model_failed

    async def _model_failed(env: Any, task_id: str, attempt: int, error: ModelError) -> bool:
        out = await original(env, task_id, attempt, error)
        if not error.retryable:
            state = env.journal.state
            request = ModelRequest(
                conversation_id=state.conversation_id,
                task_id=task_id,
                model=env.config.model_name,
                messages=state.context(len(state.messages)),
                attempt=attempt + 1,
            )
            try:
                await env.model.complete(request)
            except ModelError:
                pass
        return out

    mp.setattr(generation_mod, "_model_failed", _model_failed)


def _submit_without_dedupe(mp: pytest.MonkeyPatch) -> None:
    async def submit(
        self: runtime_mod.Conversation, content: str, *, request_id: str | None = None
    ) -> runtime_mod.SubmissionHandle:
        ids = self.runtime.ports.ids
        budget = self.runtime.config.budget
        submission_id = ids.new("sub")

        def build(state: Any) -> list[Any]:
            accepted = InputAccepted(
                submission_id=submission_id, request_id=request_id, content=content
            )
            if state.active_run is not None:
                return [accepted]
            return [accepted, *start_run(state, ids, budget, [submission_id])]

        await self.journal.commit(build)
        return runtime_mod.SubmissionHandle(self, submission_id)

    mp.setattr(runtime_mod.Conversation, "submit", submit)


def no_request_id_dedupe(mp: pytest.MonkeyPatch) -> None:
    """I5: ``submit`` drops the request-id dedupe, and the reducer (patched too, so the data
    reaches the log and the oracles' ``reduce``) lets a request id be re-mapped."""
    _submit_without_dedupe(mp)
    original = state_mod._APPLY[InputAccepted]

    def input_accepted(state: Any, event: InputAccepted, sequence: int) -> None:
        state.request_ids.pop(event.request_id, None)
        original(state, event, sequence)

    mp.setitem(state_mod._APPLY, InputAccepted, input_accepted)


def no_request_id_dedupe_strict_reducer(mp: pytest.MonkeyPatch) -> None:
    """I5 variant: only ``submit`` drops the dedupe; the unpatched reducer rejects the duplicate
    request id *after* the store wrote it, so it surfaces as I0 (runtime raised) and I2 (the log
    does not reduce) -- and, with no reducible log, I5's own check cannot run."""
    _submit_without_dedupe(mp)


def effect_before_intent(mp: pytest.MonkeyPatch) -> None:
    """I6: the tool runs first; its intent is committed only afterwards (with the result)."""

    async def _call(env: Any, task_id: str) -> None:
        state = env.journal.state
        call = state.tasks[task_id].call
        spec = env.tools.get(call.tool)
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


def scheduler_skips_execute(mp: pytest.MonkeyPatch) -> None:
    """I7: the scheduler never starts a task in phase ``execute`` (the recovery entry point), so
    an interrupted tool call is never recovered and the run never settles."""

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


def acquire_ignores_live_lease(mp: pytest.MonkeyPatch) -> None:
    """I8: ``FileStore.acquire_lease`` grants the lease even while another owner's is unexpired."""

    async def acquire_lease(
        self: FileStore, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        previous = self._read_lease(conversation_id)
        lease = Lease(
            conversation_id=conversation_id,
            owner_id=owner_id,
            epoch=(previous.epoch + 1) if previous is not None else 1,
            expires_at_s=now_s + ttl_s,
        )
        self._write_lease(lease)
        return lease

    mp.setattr(FileStore, "acquire_lease", acquire_lease)


def acquire_keeps_epoch(mp: pytest.MonkeyPatch) -> None:
    """I8 variant: a new owner gets the *same* epoch as the expired lease (no fencing token bump).
    The reducer also rejects the second ``lease_acquired`` (so I0 and I2 are reported too)."""

    async def acquire_lease(
        self: FileStore, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        previous = self._read_lease(conversation_id)
        if previous is not None and previous.owner_id != owner_id and previous.expires_at_s > now_s:
            raise LeaseHeld("held", expires_at_s=previous.expires_at_s)
        lease = Lease(
            conversation_id=conversation_id,
            owner_id=owner_id,
            epoch=previous.epoch if previous is not None else 1,
            expires_at_s=now_s + ttl_s,
        )
        self._write_lease(lease)
        return lease

    mp.setattr(FileStore, "acquire_lease", acquire_lease)


def recovery_rewrites_output(mp: pytest.MonkeyPatch) -> None:
    """I9: a tool re-executed on recovery records a different output than a first execution."""
    original = tool_mod.execute_and_record

    async def execute_and_record(env: Any, spec: Any, intent: Any, *, attempt: str) -> None:
        if attempt == "recovery":
            fn = spec.fn

            async def replayed(arguments: dict[str, Any], ctx: ToolContext) -> str:
                return f"{await fn(arguments, ctx)} (replayed)"

            spec = dataclasses.replace(spec, fn=replayed)
        await original(env, spec, intent, attempt=attempt)

    mp.setattr(tool_mod, "execute_and_record", execute_and_record)


_LEAKY_COUNTER = itertools.count()


def process_global_counter(mp: pytest.MonkeyPatch) -> None:
    """I10: tool outputs are stamped from a module-level counter that outlives a world run."""
    original = tool_mod.execute_and_record

    async def execute_and_record(env: Any, spec: Any, intent: Any, *, attempt: str) -> None:
        fn = spec.fn

        async def stamped(arguments: dict[str, Any], ctx: ToolContext) -> str:
            return f"{await fn(arguments, ctx)} #{next(_LEAKY_COUNTER)}"

        await original(env, dataclasses.replace(spec, fn=stamped), intent, attempt=attempt)

    mp.setattr(tool_mod, "execute_and_record", execute_and_record)


def resend_twice_on_recovery(mp: pytest.MonkeyPatch) -> None:
    """I11: a generation task resumed in phase ``request`` sends its pinned request twice."""
    original = generation_mod.run_generation

    async def run_generation(env: Any, task_id: str) -> None:
        state = env.journal.state
        task = live_task(state, task_id)
        if task is not None and task.phase == "request":
            pinned = state.pinned[task_id]
            request = ModelRequest(
                conversation_id=state.conversation_id,
                task_id=task_id,
                model=pinned.model,
                options=pinned.options,
                messages=state.context(pinned.cutoff),
                attempt=pinned.attempt,
            )
            try:
                await env.model.complete(request)
            except ModelError:
                pass
        await original(env, task_id)

    mp.setitem(scheduler_mod._HANDLERS, "generation", run_generation)


def append_skips_fsync(mp: pytest.MonkeyPatch) -> None:
    """I12: ``FileStore(fsync=True).append`` acknowledges a batch without fsyncing it."""
    original = FileStore.append

    async def append(self: FileStore, *args: Any, **kwargs: Any) -> None:
        saved, self._fsync = self._fsync, False
        try:
            await original(self, *args, **kwargs)
        finally:
            self._fsync = saved

    mp.setattr(FileStore, "append", append)


# -- scenarios -----------------------------------------------------------------------------------


def resubmitting_client() -> Scenario:
    """The client re-sends every request id after each crash (like ``request_id_resubmit``)."""
    return Scenario.model_validate(
        {
            "name": "mutant_resubmit",
            "description": "The client re-sends its request ids after every crash.",
            "tools": [{"name": "bump", "operation": "counter.increment", "policy": "unsafe"}],
            "client_resends": True,
            "inputs": [
                {"content": "Open a ticket", "request_id": "ticket-1"},
                {"content": "Add a note to it", "request_id": "note-2", "at_s": 5},
            ],
            "script": [
                [{"calls": [{"tool": "bump"}]}, {"answer": "Ticket opened."}],
                [{"answer": "Note added."}],
            ],
        }
    )


def bundled(name: str) -> Callable[[], Scenario]:
    return lambda: load_scenario(name)


# -- harness -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Crash:
    """One crash at the ``nth`` boundary whose label starts with ``label`` (fault-free trace)."""

    label: str
    when: When
    kind: CrashKind
    nth: int = 1


def resolve(reference: RunResult, crash: Crash | None) -> Schedule:
    if crash is None:
        return Schedule()
    hits = [b for b in reference.boundaries if b.label.startswith(crash.label)]
    assert len(hits) >= crash.nth, f"no boundary #{crash.nth} labelled {crash.label!r}"
    return Schedule.of(CrashPoint(hits[crash.nth - 1].index, crash.when, crash.kind))


def run_case(
    scenario: Scenario, crash: Crash | None, *, seed: int, determinism: bool
) -> ScheduleOutcome:
    """Judge one schedule against the fault-free run of the runtime as currently patched."""
    reference = run_scenario(scenario, seed=seed, store="file")
    schedule = resolve(reference, crash)
    result = reference
    if schedule.points:
        result = run_scenario(scenario, seed=seed, store="file", schedule=schedule)
    return judge(result, reference, determinism=determinism)


def found(outcome: ScheduleOutcome) -> set[str]:
    return {v.invariant for v in outcome.violations}


def describe(outcome: ScheduleOutcome) -> str:
    lines = [f"schedule {outcome.schedule.text()} -> {outcome.verdict}"]
    lines += [f"  {v.invariant}: {v.explanation} {v.witness[:2]}" for v in outcome.violations]
    return "\n".join(lines)


@dataclass(frozen=True)
class Case:
    oracle: str
    name: str
    mutant: Mutant
    scenario: Callable[[], Scenario]
    crash: Crash | None
    caught_at: str  # the schedule text the crash resolves to today, and the boundary it names
    seed: int = 0
    determinism: bool = False
    also: frozenset[str] = frozenset()  # other invariants the same schedule reports (cascades)
    expect: frozenset[str] | None = None  # what must be reported, if not just ``oracle``

    @property
    def expected(self) -> frozenset[str]:
        return self.expect if self.expect is not None else frozenset({self.oracle})

    @property
    def id(self) -> str:
        return f"{self.oracle}-{self.name}"


CASES = [
    Case(
        "I0",
        "recover-without-progress",
        recover_without_progress,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "23:after:process (after tool.effect:payments.charge#call-1): the recovered task 'made no "
        "progress'",
    ),
    Case(
        "I1",
        "unsafe-replays",
        unsafe_replays_on_recovery,
        bundled("read_edit_answer"),
        Crash("tool.effect:workspace.append_line", "after", "process"),
        "45:after:process (after tool.effect:workspace.append_line#call-2): 2 effects, unsafe",
    ),
    Case(
        "I1",
        "key-per-attempt",
        idempotency_key_per_attempt,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "23:after:process (after tool.effect:payments.charge#call-1): charged twice",
    ),
    Case(
        "I2",
        "trust-torn-tail",
        trust_torn_tail,
        bundled("read_edit_answer"),
        # The 4th append is commit #4 (model_completed, task_checkpoint, task_created,
        # task_waiting); seed 9's power loss at this point keeps the file's first 2560 bytes: a
        # torn batch. (Each crash point draws its own power outcome; at seed 0 this one keeps all.)
        Crash("fs.append:c1/events.jsonl", "after", "power", nth=4),
        "18:after:power, seed 9 (after the append of store.commit#4, torn:2560): CorruptStore",
        seed=9,
        also=frozenset({"I0", "I6", "I9", "I12"}),
    ),
    Case(
        "I3",
        "checkpoint-claims-next",
        checkpoint_claims_one_more,
        bundled("read_edit_answer"),
        None,  # the periodic checkpoint after commit #9 claims #20 and the log has #20
        "none (fault-free: checkpoint through #19 saved as #20)",
    ),
    Case(
        "I4",
        "stale-window",
        stale_context_window,
        bundled("model_error_then_message"),
        None,
        "none (fault-free: run-2's request lacks 'Never mind, just say hello')",
    ),
    Case(
        "I4",
        "model-after-stop",
        retry_after_fatal_error,
        bundled("model_error_then_message"),
        None,
        "none (fault-free: model call at boundary 25 for run-1, stopped at boundary 17)",
    ),
    Case(
        "I5",
        "no-request-id-dedupe",
        no_request_id_dedupe,
        resubmitting_client,
        Crash("store.commit#3", "after", "process"),
        "13:after:process (after store.commit#3, the first model_requested): the re-sent "
        "ticket-1 is accepted twice",
        also=frozenset({"I9"}),
    ),
    Case(
        "I5",
        "no-request-id-dedupe-strict-reducer",
        no_request_id_dedupe_strict_reducer,
        resubmitting_client,
        Crash("store.commit#3", "after", "process"),
        "13:after:process: I0 + I2 (the reducer rejects the duplicate request id)",
        expect=frozenset({"I0", "I2"}),
    ),
    Case(
        "I6",
        "effect-before-intent",
        effect_before_intent,
        bundled("idempotent_payment"),
        None,
        "none (fault-free: effect at boundary 20, its intent committed at boundary 21)",
    ),
    Case(
        "I7",
        "scheduler-skips-execute",
        scheduler_skips_execute,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "23:after:process (after tool.effect:payments.charge#call-1): pay-1 never settles",
    ),
    Case(
        "I8",
        "acquire-ignores-live-lease",
        acquire_ignores_live_lease,
        bundled("idempotent_payment"),
        Crash("store.lease.acquire", "after", "process"),
        "0:after:process (after store.lease.acquire#1): owner-2 granted while owner-1's is live",
    ),
    Case(
        "I8",
        "acquire-keeps-epoch",
        acquire_keeps_epoch,
        bundled("idempotent_payment"),
        Crash("store.commit#2", "after", "process"),
        "10:after:process (after store.commit#2): owner-2 gets epoch 1 again",
        also=frozenset({"I0", "I2"}),
    ),
    Case(
        "I9",
        "recovery-rewrites-output",
        recovery_rewrites_output,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "23:after:process (after tool.effect:payments.charge#call-1): answer digest differs",
    ),
    Case(
        "I10",
        "process-global-counter",
        process_global_counter,
        bundled("idempotent_payment"),
        None,
        "none (fault-free, run twice: the fingerprints differ)",
        determinism=True,
    ),
    Case(
        "I11",
        "resend-twice-on-recovery",
        resend_twice_on_recovery,
        bundled("idempotent_payment"),
        Crash("model.call#1", "after", "process"),
        "16:after:process (after model.call#1, response not committed): 4 calls, at most 3",
    ),
    Case(
        "I12",
        "append-skips-fsync",
        append_skips_fsync,
        bundled("idempotent_payment"),
        # The mutant's trace has no fsync boundaries: store.commit#3 is boundary 10 there.
        Crash("store.commit#3", "before", "power"),
        "10:before:power (before store.commit#3, after pay-1 was acknowledged): pay-1 vanished",
        # The client re-sends the lost pay-1 and gets a new submission: I5 reports the remap.
        also=frozenset({"I5"}),
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_oracle_catches_mutant(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    case.mutant(monkeypatch)
    outcome = run_case(case.scenario(), case.crash, seed=case.seed, determinism=case.determinism)
    invariants = found(outcome)
    missing = case.expected - invariants
    assert not missing, f"{case.id}: expected at {case.caught_at}\n{describe(outcome)}"
    assert invariants <= case.expected | case.also, describe(outcome)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_unbroken_runtime_passes_the_same_schedule(case: Case) -> None:
    outcome = run_case(case.scenario(), case.crash, seed=case.seed, determinism=case.determinism)
    assert outcome.violations == [], describe(outcome)
    assert outcome.verdict == "pass"


# -- sweeps: the same mutants found by a sweep, first failure first ------------------------------

SWEEPS = [
    # (case id, crash kinds, label of the first failing schedule's crash)
    ("I1-unsafe-replays", ("process",), "tool.effect:workspace.append_line#call-2"),
    ("I1-key-per-attempt", ("process",), "tool.effect:payments.charge#call-1"),
    ("I8-acquire-ignores-live-lease", ("process",), "store.lease.acquire#1"),
    ("I9-recovery-rewrites-output", ("process",), "store.commit#5"),
    ("I11-resend-twice-on-recovery", ("process",), "store.commit#3"),
    ("I12-append-skips-fsync", ("power",), "store.commit#3"),
]
BY_ID = {c.id: c for c in CASES}


@pytest.mark.parametrize(("case_id", "kinds", "first_label"), SWEEPS, ids=[s[0] for s in SWEEPS])
def test_sweep_finds_mutant(
    case_id: str, kinds: tuple[CrashKind, ...], first_label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = BY_ID[case_id]
    case.mutant(monkeypatch)
    result = sweep(
        case.scenario(),
        store="file",
        seed=case.seed,
        crash_kinds=kinds,
        determinism=False,
        stop_at_first_failure=True,
    )
    assert result.failures, f"{case_id}: the sweep found nothing"
    first = result.failures[0]
    assert first.invariant == case.oracle, (first.schedule, first.invariant, first.explanation)
    assert first.crash_labels == [first_label], first.schedule


@pytest.mark.parametrize(("case_id", "kinds", "first_label"), SWEEPS, ids=[s[0] for s in SWEEPS])
def test_unbroken_runtime_passes_the_sweep(
    case_id: str, kinds: tuple[CrashKind, ...], first_label: str
) -> None:
    case = BY_ID[case_id]
    result = sweep(
        case.scenario(), store="file", seed=case.seed, crash_kinds=kinds, determinism=False
    )
    assert result.failures == [], [(f.schedule, f.invariant) for f in result.failures[:3]]
    assert result.verdicts["pass"] == result.schedules
