"""The mutant catalogue: known recovery-bug classes of durable runtimes, planted into the
reference runtime by monkeypatching one piece of it (the runtime carries no bug switches).

A harness is worth what it can catch. ``durable-sim mutants`` applies each mutant in turn, runs
the default sweep (every bundled scenario, both stores, process and power crashes, depth 1, I10
included) until the first failing schedule, and prints a kill matrix. The classes come from the
seeds (000: intent before effect, atomic checkpoints, leases; 001: only a crash may resume; 002:
recovery policies) and from public issue trackers of durable runtimes (LangGraph #8039: a tool
re-run after its effect landed; lost fencing; request dedupe).

Each mutant is a function of a ``Patcher`` (``setattr``/``setitem``/``undo``: the subset of
pytest's ``MonkeyPatch`` it needs, so tests can pass ``monkeypatch`` directly).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import apsw
import trio

from durable import journal as journal_mod
from durable import runs as runs_mod
from durable import runtime as runtime_mod
from durable import scheduler as scheduler_mod
from durable import state as state_mod
from durable import subagent as subagent_mod
from durable.events import (
    SCHEMA_VERSION,
    CompactionApplied,
    FileChanged,
    InputAccepted,
    InputsSteered,
    TaskCheckpoint,
    TaskSettled,
    ToolIntent,
    ToolResult,
    canonical_json,
    sha256_hex,
)
from durable.model import ModelError, ModelRequest
from durable.runs import start_run
from durable.scheduler import Scheduler
from durable.store import file as file_store_mod
from durable.store import logscan as logscan_mod
from durable.store import sqlite as sqlite_store_mod
from durable.store.base import Checkpoint, CorruptStore, Lease, LeaseHeld
from durable.store.file import FileStore
from durable.store.logscan import LogScan
from durable.tasks import compaction as compaction_task_mod
from durable.tasks import compensation as compensation_mod
from durable.tasks import generation as generation_mod
from durable.tasks import live_task
from durable.tasks import tool as tool_mod
from durable.tools import ToolContext, idempotency_key
from sim.world import sqlite_vfs as sqlite_vfs_mod


class Patcher(Protocol):
    def setattr(self, target: Any, name: str, value: Any) -> None: ...

    def setitem(self, mapping: Any, key: Any, value: Any) -> None: ...


class Patches:
    """A minimal ``Patcher`` that remembers what it replaced and restores it on ``undo``."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, target: Any, name: str, value: Any) -> None:
        old = target.__dict__[name] if isinstance(target, type) else getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        setattr(target, name, value)

    def setitem(self, mapping: Any, key: Any, value: Any) -> None:
        had, old = key in mapping, mapping.get(key)
        self._undo.append(lambda: mapping.__setitem__(key, old) if had else mapping.pop(key))
        mapping[key] = value

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


@contextmanager
def planted(mutant: Mutant) -> Iterator[None]:
    """Apply ``mutant`` for the duration of the block (restored even if the block raises:
    this is the harness's own process, not a simulated one)."""
    patches = Patches()
    mutant.apply(patches)
    try:
        yield
    finally:
        patches.undo()


# -- mutants -------------------------------------------------------------------------------------


def recover_without_progress(mp: Patcher) -> None:
    """I0: the recovery path of a tool task returns without committing anything."""

    async def _recover(env: Any, task_id: str) -> None:
        return None

    mp.setattr(tool_mod, "_recover", _recover)


def unsafe_replays_on_recovery(mp: Patcher) -> None:
    """I1: recovery ignores the policy and re-executes every interrupted tool (unsafe included)."""

    async def _recover(env: Any, task_id: str) -> None:
        state = env.journal.state
        intent = state.intents[state.tasks[task_id].call.call_id]
        spec = env.tools.get(intent.tool)
        await tool_mod.execute_and_record(env, spec, intent, attempt="recovery")

    mp.setattr(tool_mod, "_recover", _recover)


def idempotency_key_per_attempt(mp: Patcher) -> None:
    """I1: the key a tool is given varies with the attempt, so the service cannot dedupe."""
    original = tool_mod._context

    def _context(env: Any, intent: Any, attempt: str) -> ToolContext:
        ctx = original(env, intent, attempt)
        return dataclasses.replace(ctx, idempotency_key=f"{ctx.idempotency_key}:{attempt}")

    mp.setattr(tool_mod, "_context", _context)


def trust_torn_tail(mp: Patcher) -> None:
    """I2: the file store's reader trusts the complete lines of an incomplete (torn) last batch."""
    original = FileStore._scan

    def _scan(self: FileStore, conversation_id: str, path: str) -> LogScan:
        scan = original(self, conversation_id, path)
        if scan.tail_problem is None:
            return scan
        data = self._fs.read(path)
        records, offsets, pos = list(scan.records), list(scan.offsets), scan.good_end
        while (newline := data.find(b"\n", pos)) >= 0:
            record, why = logscan_mod.check_line(data[pos:newline], conversation_id)
            if record is None or why is not None or record.sequence != len(records) + 1:
                break
            records.append(record)
            offsets.append(pos)
            pos = newline + 1
        return dataclasses.replace(scan, records=records, offsets=offsets, good_end=pos)

    mp.setattr(FileStore, "_scan", _scan)


def checkpoint_claims_one_more(mp: Patcher) -> None:
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


def stale_context_window(mp: Patcher) -> None:
    """I4 (the stale-window bug): the pinned request keeps the first run's window (cutoff 1), so the
    next run's request does not contain its own input."""
    original = generation_mod.ModelRequested

    def model_requested(**fields: Any) -> Any:
        return original(**{**fields, "cutoff": min(fields["cutoff"], 1)})

    mp.setattr(generation_mod, "ModelRequested", model_requested)


def retry_after_fatal_error(mp: Patcher) -> None:
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


def _submit_without_dedupe(mp: Patcher) -> None:
    async def submit(
        self: runtime_mod.Conversation,
        content: str,
        *,
        request_id: str | None = None,
        mode: Any = "follow_up",  # the scenarios of this mutant send follow-ups only
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


def no_request_id_dedupe(mp: Patcher) -> None:
    """I5: ``submit`` drops the request-id dedupe, and the reducer (patched too, so the data
    reaches the log and the oracles' ``reduce``) lets a request id be re-mapped."""
    _submit_without_dedupe(mp)
    original = state_mod._APPLY[InputAccepted]

    def input_accepted(state: Any, event: InputAccepted, sequence: int) -> None:
        state.request_ids.pop(event.request_id, None)
        original(state, event, sequence)

    mp.setitem(state_mod._APPLY, InputAccepted, input_accepted)


def no_request_id_dedupe_strict_reducer(mp: Patcher) -> None:
    """I5 variant: only ``submit`` drops the dedupe; the unpatched reducer rejects the duplicate
    request id *after* the store wrote it, so it surfaces as I0 (runtime raised) and I2 (the log
    does not reduce) -- and, with no reducible log, I5's own check cannot run."""
    _submit_without_dedupe(mp)


def effect_before_intent(mp: Patcher) -> None:
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


def scheduler_skips_execute(mp: Patcher) -> None:
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


def acquire_ignores_live_lease(mp: Patcher) -> None:
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


def acquire_keeps_epoch(mp: Patcher) -> None:
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


def recovery_rewrites_output(mp: Patcher) -> None:
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


def process_global_counter(mp: Patcher) -> None:
    """I10: tool outputs are stamped from a module-level counter that outlives a world run."""
    original = tool_mod.execute_and_record

    async def execute_and_record(env: Any, spec: Any, intent: Any, *, attempt: str) -> None:
        fn = spec.fn

        async def stamped(arguments: dict[str, Any], ctx: ToolContext) -> str:
            return f"{await fn(arguments, ctx)} #{next(_LEAKY_COUNTER)}"

        await original(env, dataclasses.replace(spec, fn=stamped), intent, attempt=attempt)

    mp.setattr(tool_mod, "execute_and_record", execute_and_record)


def checkpoint_restore_drops_request_ids(mp: Patcher) -> None:
    """I3: recovery from a checkpoint restores every field but the request-id index (a field
    added after the checkpoint format, forgotten in ``to_state``): the rebuilt state is not the
    log's, and a re-sent request would start a second submission."""
    original = journal_mod.usable_checkpoint

    def usable_checkpoint(checkpoint: Checkpoint, conversation_id: str) -> Any:
        state = original(checkpoint, conversation_id)
        if state is not None:
            state.request_ids.clear()
        return state

    mp.setattr(journal_mod, "usable_checkpoint", usable_checkpoint)


def renew_without_fence(mp: Patcher) -> None:
    """I8: ``FileStore.renew_lease`` writes the caller's lease back without checking the stored
    one: a zombie's heartbeat after a takeover puts its older epoch back."""

    async def renew_lease(self: FileStore, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
        self._write_lease(renewed)
        return renewed

    mp.setattr(FileStore, "renew_lease", renew_lease)


def resend_differs_on_recovery(mp: Patcher) -> None:
    """I11: a generation task resumed in phase ``request`` re-sends a request rebuilt with a
    marker in its options (as runtimes that add retry hints or timestamps to a resumed prompt
    do): the model sees a different request than the one that was in flight."""
    original = generation_mod.run_generation

    class _Marking:
        def __init__(self, model: Any) -> None:
            self._model = model

        async def complete(self, request: ModelRequest) -> Any:
            options = {**request.options, "resumed": True}
            return await self._model.complete(request.model_copy(update={"options": options}))

    async def run_generation(env: Any, task_id: str) -> None:
        task = live_task(env.journal.state, task_id)
        if task is not None and task.phase == "request" and env.model is not None:
            env = dataclasses.replace(env, model=_Marking(env.model))
        await original(env, task_id)

    mp.setitem(scheduler_mod._HANDLERS, "generation", run_generation)


def resend_twice_on_recovery(mp: Patcher) -> None:
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


def append_skips_fsync(mp: Patcher) -> None:
    """I12: ``FileStore(fsync=True).append`` acknowledges a batch without fsyncing it."""
    original = FileStore.append

    async def append(self: FileStore, *args: Any, **kwargs: Any) -> None:
        saved, self._fsync = self._fsync, False
        try:
            await original(self, *args, **kwargs)
        finally:
            self._fsync = saved

    mp.setattr(FileStore, "append", append)


# -- the issue-6 classes not covered above -------------------------------------------------------


def tmp_not_fsynced_before_rename(mp: Patcher) -> None:
    """Atomic write without fsync of the temporary file: after power loss the renamed target may
    be empty or torn (checkpoints, and the lease file)."""

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        tmp = f"{directory}/{name}.tmp"
        self._fs.write(tmp, data)
        self._fs.rename(tmp, f"{directory}/{name}")
        if durable:
            self._fs.fsync_dir(directory)

    mp.setattr(FileStore, "_atomic_write", _atomic_write)


def lease_written_in_place(mp: Patcher) -> None:
    """The lease file rewritten in place (no temporary file, no rename), though fsynced: a
    process killed between the truncating open and the data leaves an empty ``lease.json`` --
    the most common crash-consistency bug in the literature (ALICE, CrashMonkey)."""

    def _write_lease(self: FileStore, lease: Lease) -> None:
        directory = self._ensure_dir(lease.conversation_id)
        path = f"{directory}/{file_store_mod.LEASE_FILE}"
        self._fs.write(path, file_store_mod.encode_lease(lease))
        self._fs.fsync(path)
        self._fs.fsync_dir(directory)

    mp.setattr(FileStore, "_write_lease", _write_lease)


def checkpoint_written_in_place(mp: Patcher) -> None:
    """Checkpoints written straight under their final name (no temporary file, no rename): a
    crash mid-write leaves a torn checkpoint where only complete ones may stand."""
    original = FileStore._atomic_write

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        if not name.startswith("checkpoint-"):
            original(self, directory, name, data, durable=durable)
            return
        self._fs.write(f"{directory}/{name}", data)
        if durable:
            self._fs.fsync(f"{directory}/{name}")
            self._fs.fsync_dir(directory)

    mp.setattr(FileStore, "_atomic_write", _atomic_write)


def no_dir_fsync_after_rename(mp: Patcher) -> None:
    """Atomic write without the directory fsync: power loss may undo the rename, so a lease can
    go back to an older epoch (and a fencing token is handed out twice)."""

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        tmp = f"{directory}/{name}.tmp"
        self._fs.write(tmp, data)
        if durable:
            self._fs.fsync(tmp)
        self._fs.rename(tmp, f"{directory}/{name}")

    mp.setattr(FileStore, "_atomic_write", _atomic_write)


def checksums_not_verified(mp: Patcher) -> None:
    """The file store's reader parses records but never checks their checksums, so a damaged
    (partially programmed) sector that still parses is trusted."""

    def check_line(line: bytes, conversation_id: str) -> tuple[Any, str | None]:
        try:
            record = logscan_mod.parse_record(line)
        except ValueError as exc:
            return None, f"does not parse ({type(exc).__name__})"
        if record.conversation_id != conversation_id:
            return None, "another conversation"
        return record, None

    mp.setattr(logscan_mod, "check_line", check_line)


def expected_sequence_ignored(mp: Patcher) -> None:
    """The stores do not check ``expected_sequence`` -- and the writer's idea of the tail is stale
    (recovery from a checkpoint does not replay the records after it). With the check, that bug
    is a loud ``SequenceConflict``; without it, sequences are silently duplicated."""

    def check_sequences(records: Any, expected_sequence: int, last_sequence: int) -> None:
        return None

    mp.setattr(file_store_mod, "check_sequences", check_sequences)
    mp.setattr(sqlite_store_mod, "check_sequences", check_sequences)
    original = journal_mod.recover_state

    async def recover_state(store: Any, conversation_id: str) -> Any:
        for checkpoint in await store.load_checkpoints(conversation_id):
            state = journal_mod.usable_checkpoint(checkpoint, conversation_id)
            if state is not None:
                await store.read_records(conversation_id, 0, repair=True)
                return state  # the records after the checkpoint are never applied
        return await original(store, conversation_id)

    mp.setattr(journal_mod, "recover_state", recover_state)


def zombie_append_accepted(mp: Patcher) -> None:
    """The store checks neither the lease nor the sequence (a plain append-only file): a stale
    owner, paused past its lease, renews and appends with its old epoch and the store accepts."""

    def check_sequences(records: Any, expected_sequence: int, last_sequence: int) -> None:
        return None

    mp.setattr(file_store_mod, "check_sequences", check_sequences)

    def _fence(self: FileStore, conversation_id: str, owner_id: str, epoch: int) -> None:
        return None

    async def renew_lease(self: FileStore, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
        self._write_lease(renewed)
        return renewed

    mp.setattr(FileStore, "_fence", _fence)
    mp.setattr(FileStore, "renew_lease", renew_lease)


def _inline_retries(mp: Patcher) -> Callable[[Any], set[str]]:
    """Patch ``_model_failed`` to remember, per process (per journal), the retries the process
    entered itself, so a mutant can tell them from the retries it resumes after a crash."""
    failed = generation_mod._model_failed

    def inline(env: Any) -> set[str]:
        return env.journal.__dict__.setdefault("_mutant_inline_retries", set())

    async def _model_failed(env: Any, task_id: str, attempt: int, error: ModelError) -> bool:
        inline(env).add(task_id)
        return await failed(env, task_id, attempt, error)

    mp.setattr(generation_mod, "_model_failed", _model_failed)
    return inline


def retry_deadline_from_now(mp: Patcher) -> None:
    """A retry resumed after a crash does not wait for its committed deadline (the backoff is
    recomputed from "now" as already elapsed): a crash loop never waits."""
    original = generation_mod._retry
    inline = _inline_retries(mp)

    async def _retry(env: Any, task_id: str) -> bool:
        if task_id in inline(env):
            return await original(env, task_id)
        task = live_task(env.journal.state, task_id)
        assert task is not None
        prepare = TaskCheckpoint(
            task_id=task_id, phase="prepare", data={"attempt": int(task.data["attempt"])}
        )
        await env.journal.commit(lambda s: [prepare] if live_task(s, task_id) else [])
        return True

    mp.setitem(generation_mod._PHASES, "retry", _retry)


def retry_waits_again(mp: Patcher) -> None:
    """I11: a retry resumed after a crash waits its whole backoff again from the restart,
    ignoring the committed deadline (harmless-looking; a crash loop never gets its retry out)."""
    original = generation_mod._retry
    inline = _inline_retries(mp)

    async def _retry(env: Any, task_id: str) -> bool:
        if task_id not in inline(env):
            task = live_task(env.journal.state, task_id)
            assert task is not None
            attempt = int(task.data["attempt"])
            backoff = min(env.config.backoff_base_s * 2 ** (attempt - 2), env.config.backoff_max_s)
            await env.ports.clock.sleep_until(env.ports.clock.now() + backoff)
        return await original(env, task_id)

    mp.setitem(generation_mod._PHASES, "retry", _retry)


def release_before_drain(mp: Patcher) -> None:
    """I8: a graceful shutdown releases the leases first and only then lets the work drain for
    a grace period before stopping it: a tool or a commit in flight races the next owner."""

    async def _shutdown(self: Any) -> None:
        conversations = list(self._conversations.values())
        for conversation in conversations:
            if not conversation.journal.fenced:
                await self.store.release_lease(conversation.journal.lease)
        await self.ports.clock.sleep_until(self.ports.clock.now() + self.config.heartbeat_s)
        for conversation in conversations:
            conversation._scope.cancel()
        for conversation in conversations:
            await conversation._stopped.wait()

    mp.setattr(runtime_mod.Runtime, "_shutdown", _shutdown)


def abort_leaves_intents_open(mp: Patcher) -> None:
    """Abort settles the run but records no result for tool calls in flight."""
    original = runtime_mod.settle_run

    def settle_run(state: Any, ids: Any, budget: Any, **kwargs: Any) -> list[Any]:
        events = original(state, ids, budget, **kwargs)
        if kwargs.get("reason") != "aborted":
            return events
        return [e for e in events if not (isinstance(e, ToolResult) and e.source == "aborted")]

    mp.setattr(runtime_mod, "settle_run", settle_run)


def ack_before_durable(mp: Patcher) -> None:
    """``submit`` returns before its commit is durable (the append is not fsynced when the input
    is acknowledged), so an acknowledged input can vanish in a power loss."""
    original = FileStore.append

    async def append(self: FileStore, conversation_id: str, records: list[Any], **kw: Any) -> None:
        if any(r.event.type == "input_accepted" for r in records):
            saved, self._fsync = self._fsync, False
            try:
                await original(self, conversation_id, records, **kw)
            finally:
                self._fsync = saved
            return
        await original(self, conversation_id, records, **kw)

    mp.setattr(FileStore, "append", append)


def verifier_ignored(mp: Patcher) -> None:
    """``verify_then_continue`` re-executes without asking the verifier (LangGraph #8039's
    shape: a tool re-run after its effect landed)."""
    original = tool_mod._recover

    async def _recover(env: Any, task_id: str) -> None:
        state = env.journal.state
        intent = state.intents[state.tasks[task_id].call.call_id]
        if intent.policy == "verify_then_continue":
            spec = env.tools.get(intent.tool)
            await tool_mod.execute_and_record(env, spec, intent, attempt="recovery")
            return
        await original(env, task_id)

    mp.setattr(tool_mod, "_recover", _recover)


def revision_bumped_on_replay(mp: Patcher) -> None:
    """I18: an edit its verifier finds applied after a crash bumps the mutation revision twice
    (once for the execution the crash hid, once for the verification), so a validation of
    the files as they are looks stale and revisions no longer count applied edits."""
    original = tool_mod.verified_events

    def verified_events(state: Any, intent: Any, output: str) -> list[Any]:
        return [
            e.model_copy(update={"revision": e.revision + 1}) if isinstance(e, FileChanged) else e
            for e in original(state, intent, output)
        ]

    mp.setattr(tool_mod, "verified_events", verified_events)


def cursor_reused_without_resume(mp: Patcher) -> None:
    """I18: a request continues from the latest provider cursor whether or not the model said
    it can resume from it (the reducer, patched alike, accepts the pin: the log is consistent
    with the bug, only the model's declaration contradicts it)."""

    def resumable_cursor(self: Any) -> str | None:
        return self.cursor.cursor if self.cursor is not None else None

    mp.setattr(state_mod.State, "resumable_cursor", resumable_cursor)


def forgets_intent_on_second_recovery(mp: Patcher) -> None:
    """Depth 2 only: a recovery that finds an intent written two epochs ago (a crash hit the
    previous recovery before it recorded the call's outcome) forgets it was ever started and runs
    the tool as a first attempt -- an ``unsafe`` effect happens twice. One crash never shows it;
    the fuzzer's planted-bug test must find and shrink it."""
    original = tool_mod._recover

    async def _recover(env: Any, task_id: str) -> None:
        state = env.journal.state
        intent = state.intents[state.tasks[task_id].call.call_id]
        if intent.epoch <= env.journal.lease.epoch - 2:
            spec = env.tools.get(intent.tool)
            await tool_mod.execute_and_record(env, spec, intent, attempt="first")
            return
        await original(env, task_id)

    mp.setattr(tool_mod, "_recover", _recover)


def damage_read_as_torn_tail(mp: Patcher) -> None:
    """I13: the file store's reader treats *any* damaged line as a torn tail, even one followed
    by valid later commits: damage to synced data is silently truncated away (with every
    acknowledged commit after it). Only the storage-fault mode produces such damage."""

    def _check_tail(self: FileStore, *args: Any, **kwargs: Any) -> None:
        return None

    mp.setattr(FileStore, "_check_tail", _check_tail)


def repair_before_refusing(mp: Patcher) -> None:
    """I13: the file store's reader cuts the log at the first damaged line *before* deciding
    whether the damage is a torn tail or corruption: it still refuses, but the evidence (the
    damaged line and every acknowledged commit after it) is gone."""
    original = FileStore._check_tail

    def _check_tail(self: FileStore, path: str, scan: LogScan) -> None:
        assert scan.anomaly is not None  # the store checks only a log with an anomaly
        self._fs.truncate(path, scan.anomaly.offset)
        original(self, path, scan)

    mp.setattr(FileStore, "_check_tail", _check_tail)


def corruption_unnamed(mp: Patcher) -> None:
    """I13: the store refuses damaged data, but its error does not say which file is damaged
    (an operator is left to search the whole store)."""
    original = FileStore._check_tail

    def _check_tail(self: FileStore, *args: Any) -> None:
        try:
            original(self, *args)
        except CorruptStore:
            raise CorruptStore("the store is corrupt") from None

    mp.setattr(FileStore, "_check_tail", _check_tail)


def store_error_as_tool_result(mp: Patcher) -> None:
    """I2/I13: a tool's every ``Exception`` becomes its error result, damaged history included:
    a sub-agent whose child conversation is damaged returns "CorruptStore: ..." as the
    delegating call's result, and the parent answers on top of damaged history instead of
    refusing (``durable.tasks.is_tool_failure`` says yes to everything)."""

    def is_tool_failure(exc: Exception) -> bool:
        return True

    mp.setattr(tool_mod, "is_tool_failure", is_tool_failure)
    mp.setattr(compensation_mod, "is_tool_failure", is_tool_failure)


# -- inbox modes ---------------------------------------------------------------------------------


def _unchecked_steering(state: Any, event: InputsSteered, sequence: int) -> None:
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


def steer_anywhere(mp: Patcher) -> None:
    """I14: a steering input is placed into the running run as soon as it is accepted (its own
    next commit), not at the next post-tools boundary: it lands between a tool call and its
    result. The reducer's guard is patched away too, so the misplacement reaches the log."""
    original = runtime_mod.Conversation.submit

    async def submit(self: Any, content: str, **kwargs: Any) -> Any:
        handle = await original(self, content, **kwargs)

        def build(state: Any) -> list[Any]:
            steering = state.steering_queue()
            turns = [
                t.id
                for t in state.tasks.values()
                if t.run_id == state.active_run and t.kind == "generation"
            ]
            if not steering or not turns:
                return []
            return [InputsSteered(run_id=state.active_run, task_id=turns[-1], inputs=steering)]

        await self.journal.commit(build)
        return handle

    mp.setattr(runtime_mod.Conversation, "submit", submit)
    mp.setitem(state_mod._APPLY, InputsSteered, _unchecked_steering)


def steer_reversed(mp: Patcher) -> None:
    """I15: the post-tools boundary places the queued steering inputs newest first."""
    original = runs_mod.place_steering

    def place_steering(state: Any, task_id: str) -> list[Any]:
        events = original(state, task_id)
        return [e.model_copy(update={"inputs": e.inputs[::-1]}) for e in events]

    mp.setattr(generation_mod, "place_steering", place_steering)


def steer_queue_in_memory(mp: Patcher) -> None:
    """I14 (after a crash only): the post-tools boundary places the steering inputs this process
    accepted, remembered in memory, instead of the durable queue: after a restart a queued
    steering input misses its boundary (and, if the run settles first, joins the next run)."""
    accepted: dict[int, tuple[Any, set[str]]] = {}  # id(state) -> (the state, its steering ids)
    original_submit = runtime_mod.Conversation.submit
    original_place = runs_mod.place_steering

    def remembered(state: Any) -> set[str]:
        entry = accepted.get(id(state))
        if entry is None or entry[0] is not state:
            entry = accepted[id(state)] = (state, set())
        return entry[1]

    async def submit(self: Any, content: str, **kwargs: Any) -> Any:
        handle = await original_submit(self, content, **kwargs)
        if kwargs.get("mode") == "steer":
            remembered(self.journal.state).add(handle.id)
        return handle

    def place_steering(state: Any, task_id: str) -> list[Any]:
        known = remembered(state)
        events = original_place(state, task_id)
        kept = [
            e.model_copy(update={"inputs": [i for i in e.inputs if i in known]}) for e in events
        ]
        return [e for e in kept if e.inputs]

    mp.setattr(runtime_mod.Conversation, "submit", submit)
    mp.setattr(generation_mod, "place_steering", place_steering)


def reject_writes(mp: Patcher) -> None:
    """I16: a reject-mode input that meets an active run is committed (queued as a follow-up)
    before ``ConversationBusy`` is raised: the caller is told nothing was written, and a later
    re-send of the request id finds the input already there."""
    original = runtime_mod.Conversation.submit

    async def submit(self: Any, content: str, **kwargs: Any) -> Any:
        request_id, mode = kwargs.get("request_id"), kwargs.get("mode", "follow_up")
        state = self.journal.state
        busy = state.active_run is not None and request_id not in state.request_ids
        if mode == "reject" and busy:
            await original(self, content, request_id=request_id, mode="follow_up")
            raise runtime_mod.ConversationBusy(self.id, state.active_run or "?", request_id)
        return await original(self, content, **kwargs)

    mp.setattr(runtime_mod.Conversation, "submit", submit)


def steer_lost_on_settle(mp: Patcher) -> None:
    """A run that settles before its post-tools boundary starts the next run with its queued
    follow-ups only: the steering inputs stay queued for ever (never placed, never settled)."""
    original = runs_mod.start_run

    def start_run(state: Any, ids: Any, budget: Any, inputs: list[str]) -> list[Any]:
        kept = [sid for sid in inputs if state.submissions[sid].mode != "steer"]
        return original(state, ids, budget, kept) if kept else []

    mp.setattr(runs_mod, "start_run", start_run)


def compensate_forward_order(mp: Patcher) -> None:
    """I17: an abandoned run undoes its calls in the order they took effect, not the reverse: a
    file edited twice ends at its pre-image of the second edit, not its original content."""
    original = runs_mod.compensation_plan

    def compensation_plan(state: Any, run_id: str) -> list[str]:
        return original(state, run_id)[::-1]

    mp.setattr(runs_mod, "compensation_plan", compensation_plan)


def compensation_key_per_attempt(mp: Patcher) -> None:
    """I17 (after a crash only): a compensation re-run after a crash carries a new key (one per
    attempt, not per call), so the service cannot dedupe it and applies it a second time."""
    original = compensation_mod.compensation_context

    def compensation_context(env: Any, intent: Any, attempt: str) -> ToolContext:
        context = original(env, intent, attempt)
        if attempt == "first":
            return context
        key = f"{context.idempotency_key}:{attempt}"
        return dataclasses.replace(context, idempotency_key=key)

    mp.setattr(compensation_mod, "compensation_context", compensation_context)


# -- sub-agents ----------------------------------------------------------------------------------


def subagent_fresh_request_id(mp: Patcher) -> None:
    """I20 (after a crash only): a delegating call re-run after a crash submits its task to the
    child under a request id of its attempt, not of its call: the child's dedupe cannot see the
    first submission, so the recovered delegation starts a second task in the child."""
    original = subagent_mod.child_ids

    def child_ids(ctx: ToolContext) -> tuple[str, str]:
        conversation_id, request_id = original(ctx)
        if ctx.attempt == "first":
            return conversation_id, request_id
        return conversation_id, f"{request_id}:{ctx.attempt}"

    mp.setattr(subagent_mod, "child_ids", child_ids)


# -- compaction ----------------------------------------------------------------------------------


def _unchecked_compaction_applied(state: Any, event: CompactionApplied, sequence: int) -> None:
    """The reducer's compaction application without its freshness and boundary guards (a
    runtime whose reducer trusts the writer): the summary stands in wherever the event says."""
    compaction = state.compactions[event.compaction_id]
    compaction.status, compaction.summary = "applied", event.summary
    state.window = event.compaction_id


def stale_summary_applied(mp: Patcher) -> None:
    """I19: a compaction task resumed after a crash does not settle its intent stale: it sends
    the summarisation request the dead process pinned again and applies the answer, without
    checking that the intent predates the crash (so a summary the dead incarnation asked for is
    applied by the next one). The reducer's guard is patched away too."""

    async def run_compaction(env: Any, task_id: str) -> None:
        task = live_task(env.journal.state, task_id)
        if task is None:
            return
        compaction_id = str(task.data["compaction_id"])
        summary = await compaction_task_mod._summarise(env, task_id)
        assert not isinstance(summary, ModelError), "the fake model always summarises"
        await env.journal.commit(lambda s: compaction_task_mod._apply(s, compaction_id, summary))

    mp.setitem(scheduler_mod._HANDLERS, "compaction", run_compaction)
    mp.setitem(state_mod._APPLY, CompactionApplied, _unchecked_compaction_applied)


# -- SQLite on the simulated disk ---------------------------------------------------------------


def sqlite_off_as_full(mp: Patcher) -> None:
    """I12: ``SQLiteStore(synchronous="FULL")`` opens its connections with ``synchronous=OFF``
    (no sync at a commit, nor around a checkpoint) while still describing itself as FULL: an
    acknowledged commit is lost on power loss."""
    original = sqlite_store_mod.SQLiteStore._connection

    def _connection(self: sqlite_store_mod.SQLiteStore) -> Any:
        conn = original(self)
        conn.execute("PRAGMA synchronous=OFF")
        return conn

    mp.setattr(sqlite_store_mod.SQLiteStore, "_connection", _connection)


def vfs_sync_noop(mp: Patcher) -> None:
    """I12: the VFS's ``xSync`` returns success without syncing: a disk or operating system that
    lies about fsync (this mutates the simulator's own VFS, not the store). SQLite believes each
    commit durable; power loss drops it."""

    def xSync(self: sqlite_vfs_mod.SimSQLiteFile, flags: int) -> None:
        return None

    mp.setattr(sqlite_vfs_mod.SimSQLiteFile, "xSync", xSync)


def checkpoint_without_wal_sync(mp: Patcher) -> None:
    """A checkpoint copies the write-ahead log into the database file without syncing the log
    first -- SQLite's ``walCheckpoint`` with its first ``sqlite3OsSync`` dropped.

    That sync is what lets a checkpoint be interrupted: the database pages are overwritten in
    place, and if power fails before the database's own sync, recovery redoes them from the log.
    Under ``synchronous=NORMAL`` (commits leave the log unsynced) it is also the first sync of
    the commits being copied; without it, a power loss mid-copy leaves a database that is part
    old, part new, with no log to repair it. Under FULL each commit already synced the log, so
    the mutant is harmless there, as the real bug would be.

    Expressed in the VFS, where SQLite's calls are seen in order: every sync of a ``-wal`` file
    is held back until the next call on any file of the same VFS. If that call is the database
    file's ``SQLITE_FCNTL_CKPT_START`` (which SQLite sends right after the log sync, before the
    first page is copied), the held sync is dropped; any other call performs it first. No byte
    is written between the sync and the next call, so a held sync that is performed leaves the
    disk exactly as an immediate one would, at the same crash boundary."""
    held: dict[int, sqlite_vfs_mod.SimSQLiteFile] = {}  # by the VFS's port
    sync = sqlite_vfs_mod.SimSQLiteFile.xSync
    file_control = sqlite_vfs_mod.SimSQLiteFile.xFileControl

    def settle(file: sqlite_vfs_mod.SimSQLiteFile, *, checkpoint: bool = False) -> None:
        pending = held.pop(id(file._files), None)
        if pending is not None and not checkpoint:
            sync(pending, 0)

    def xSync(self: sqlite_vfs_mod.SimSQLiteFile, flags: int) -> None:
        settle(self)
        if self._path.endswith("-wal"):
            held[id(self._files)] = self
        else:
            sync(self, flags)

    def xFileControl(self: sqlite_vfs_mod.SimSQLiteFile, op: int, ptr: int) -> bool:
        settle(self, checkpoint=op == apsw.SQLITE_FCNTL_CKPT_START)
        return file_control(self, op, ptr)

    mp.setattr(sqlite_vfs_mod.SimSQLiteFile, "xSync", xSync)
    mp.setattr(sqlite_vfs_mod.SimSQLiteFile, "xFileControl", xFileControl)
    for name in ("xRead", "xWrite", "xTruncate", "xFileSize", "xClose"):
        mp.setattr(sqlite_vfs_mod.SimSQLiteFile, name, _settled(settle, name))


def _settled(settle: Callable[..., None], name: str) -> Callable[..., Any]:
    """``SimSQLiteFile.NAME`` that first performs a held log sync (see
    ``checkpoint_without_wal_sync``)."""
    original = getattr(sqlite_vfs_mod.SimSQLiteFile, name)

    def method(self: sqlite_vfs_mod.SimSQLiteFile, *args: Any) -> Any:
        settle(self)
        return original(self, *args)

    return method


# -- the catalogue --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    name: str
    bug_class: str
    apply: Callable[[Patcher], None]
    scenario: str  # its smallest killing scenario (run first; used by the reduced test)
    store: str = "file"
    # The crash kinds its sweep runs: a bug in handling damaged synced data needs storage faults.
    crash_kinds: tuple[str, ...] = ("process", "power")


CATALOGUE: tuple[Mutant, ...] = (
    Mutant(
        "effect-before-intent",
        "tool effect before its intent is durable",
        effect_before_intent,
        "idempotent_payment",
    ),
    Mutant(
        "stale-window",
        "a settled exit leaves resumable state: the next message is displaced by the old window",
        stale_context_window,
        "model_error_then_message",
    ),
    Mutant(
        "tmp-not-fsynced",
        "checkpoint/lease rename without fsync of the temporary file",
        tmp_not_fsynced_before_rename,
        "idempotent_payment",
    ),
    Mutant(
        "lease-in-place",
        "lease file rewritten in place (no temporary file, no rename)",
        lease_written_in_place,
        "idempotent_payment",
    ),
    Mutant(
        "checkpoint-in-place",
        "checkpoint written in place under its final name (no temporary file, no rename)",
        checkpoint_written_in_place,
        "read_edit_answer",
    ),
    Mutant(
        "no-dir-fsync",
        "no directory fsync after the rename",
        no_dir_fsync_after_rename,
        "crash_during_recovery",
    ),
    Mutant(
        "torn-tail-trusted", "torn log tail trusted on open", trust_torn_tail, "read_edit_answer"
    ),
    Mutant(
        "checksums-unverified",
        "checksums not verified on load",
        checksums_not_verified,
        "abort_mid_tool",
    ),
    Mutant(
        "expected-sequence-ignored",
        "expected_sequence ignored (duplicate or gapped sequences)",
        expected_sequence_ignored,
        "read_edit_answer",
    ),
    Mutant(
        "zombie-append",
        "a stale-epoch append accepted (zombie writer)",
        zombie_append_accepted,
        "lease_takeover",
    ),
    Mutant(
        "unsafe-replayed",
        "an unsafe tool re-executed on recovery",
        unsafe_replays_on_recovery,
        "read_edit_answer",
    ),
    Mutant(
        "key-per-attempt",
        "a fresh idempotency key per attempt instead of one per call",
        idempotency_key_per_attempt,
        "idempotent_payment",
    ),
    Mutant(
        "no-request-dedupe",
        "request_id dedupe missing (a re-sent request runs twice)",
        no_request_id_dedupe,
        "request_id_resubmit",
    ),
    Mutant(
        "intent-ignored",
        "an in-flight intent ignored on resume (the run hangs)",
        scheduler_skips_execute,
        "idempotent_payment",
    ),
    Mutant(
        "checkpoint-ahead",
        "checkpoint written ahead of the events it claims",
        checkpoint_claims_one_more,
        "read_edit_answer",
    ),
    Mutant(
        "retry-deadline-reset",
        "retry backoff deadline recomputed from now on resume",
        retry_deadline_from_now,
        "retry_backoff",
    ),
    Mutant(
        "resend-twice",
        "the pinned request re-sent twice on recovery",
        resend_twice_on_recovery,
        "read_edit_answer",
    ),
    Mutant(
        "resend-differs",
        "the request re-sent on recovery differs from the pinned one",
        resend_differs_on_recovery,
        "read_edit_answer",
    ),
    Mutant(
        "retry-after-fatal",
        "a fatal model error settles the run, then the request is sent again",
        retry_after_fatal_error,
        "model_error_then_message",
    ),
    Mutant(
        "checkpoint-drops-field",
        "recovery from a checkpoint drops a field (the request-id index)",
        checkpoint_restore_drops_request_ids,
        "read_edit_answer",
    ),
    Mutant(
        "renew-unfenced",
        "a lease renewal that does not check the stored lease (a zombie takes it back)",
        renew_without_fence,
        "lease_takeover",
    ),
    Mutant(
        "acquire-ignores-lease",
        "a lease granted while another owner's is live",
        acquire_ignores_live_lease,
        "idempotent_payment",
    ),
    Mutant(
        "ack-before-durable",
        "an input acknowledged before it is durable",
        ack_before_durable,
        "idempotent_payment",
    ),
    Mutant(
        "retry-waits-again",
        "a resumed retry waits its whole backoff again from the restart",
        retry_waits_again,
        "retry_backoff",
    ),
    Mutant(
        "release-before-drain",
        "a graceful shutdown releases the lease before its work has stopped",
        release_before_drain,
        "graceful_shutdown_takeover",
    ),
    Mutant(
        "abort-leaves-intents",
        "abort records no result for calls in flight",
        abort_leaves_intents_open,
        "abort_mid_tool",
    ),
    Mutant(
        "verifier-ignored",
        "verify_then_continue re-executes without the verifier",
        verifier_ignored,
        "verify_then_continue_edit",
    ),
    Mutant(
        "revision-bumped-on-replay",
        "a re-verified edit bumps the mutation revision again",
        revision_bumped_on_replay,
        "plan_edit_validate",
    ),
    Mutant(
        "cursor-reused-without-resume",
        "a provider cursor sent although the model said it cannot resume from it",
        cursor_reused_without_resume,
        "plan_edit_validate",
    ),
    Mutant(
        "recovery-output-differs",
        "a re-executed tool records a different output",
        recovery_rewrites_output,
        "idempotent_payment",
    ),
    Mutant(
        "damage-as-torn-tail",
        "damage to synced data read as a torn tail (acknowledged commits truncated)",
        damage_read_as_torn_tail,
        "read_edit_answer",
        crash_kinds=("process", "power", "storage"),
    ),
    Mutant(
        "repair-before-refusing",
        "a store that refuses damaged data only after cutting it away",
        repair_before_refusing,
        "read_edit_answer",
        crash_kinds=("process", "power", "storage"),
    ),
    Mutant(
        "corruption-unnamed",
        "a corruption error that does not name the damaged file",
        corruption_unnamed,
        "read_edit_answer",
        crash_kinds=("process", "power", "storage"),
    ),
    Mutant(
        "store-error-as-tool-result",
        "a sub-agent's corrupt child store turned into the delegating call's error result",
        store_error_as_tool_result,
        "delegate_to_subagent",
        crash_kinds=("process", "power", "storage"),
    ),
    Mutant(
        "steer-anywhere",
        "a steering input placed when accepted, between a tool call and its result",
        steer_anywhere,
        "steer_mid_tools",
    ),
    Mutant(
        "steer-reversed",
        "queued steering inputs placed newest first",
        steer_reversed,
        "steer_and_follow_up_queued",
    ),
    Mutant(
        "steer-queue-in-memory",
        "the steering queue read from process memory, not the log (lost on restart)",
        steer_queue_in_memory,
        "steer_mid_tools",
    ),
    Mutant(
        "reject-writes",
        "a rejected (busy) input committed before ConversationBusy is raised",
        reject_writes,
        "reject_while_busy",
    ),
    Mutant(
        "steer-lost-on-settle",
        "queued steering inputs dropped when the run settles before a post-tools boundary",
        steer_lost_on_settle,
        "steer_misses_the_run",
    ),
    Mutant(
        "compensate-forward-order",
        "an abandoned run's compensations applied in the original order, not the reverse",
        compensate_forward_order,
        "abandon_restores_files",
    ),
    Mutant(
        "compensation-key-per-attempt",
        "a compensation re-run after a crash under a new key (the service cannot dedupe it)",
        compensation_key_per_attempt,
        "abandon_restores_files",
    ),
    Mutant(
        "stale-summary-applied",
        "a compaction whose intent predates the crash applied on recovery (not settled stale)",
        stale_summary_applied,
        "compaction_mid_conversation",
    ),
    Mutant(
        "subagent-fresh-request-id",
        "a delegation re-run after a crash submits to its child under a new request id (a "
        "second task in the child)",
        subagent_fresh_request_id,
        "delegate_to_subagent",
    ),
    Mutant(
        "sqlite-off-as-full",
        "SQLite opened with synchronous=OFF while the store presents itself as FULL",
        sqlite_off_as_full,
        "idempotent_payment",
        store="sqlite",
    ),
    Mutant(
        "vfs-sync-noop",
        "the VFS's xSync does nothing: a disk or OS that lies about fsync (mutates the "
        "simulator's VFS, not the store)",
        vfs_sync_noop,
        "idempotent_payment",
        store="sqlite",
    ),
    Mutant(
        "checkpoint-without-wal-sync",
        "a WAL checkpoint copies into the database file before the log is synced "
        "(synchronous=NORMAL)",
        checkpoint_without_wal_sync,
        "weak_durability_nofsync",
        store="sqlite",
    ),
    Mutant(
        "leaky-counter",
        "process-global state leaks into a run (nondeterminism)",
        process_global_counter,
        "idempotent_payment",
    ),
)


@dataclass
class KillResult:
    name: str
    bug_class: str
    killed: bool
    invariant: str | None
    schedule: str | None
    scenario: str | None
    store: str | None
    schedules_to_kill: int
    wall_s: float
    explanation: str = ""
    invariants: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def kill(
    mutant: Mutant,
    *,
    scenarios: list[str],
    stores: tuple[str, ...] = ("file", "sqlite"),
    seed: int = 0,
    determinism: bool = True,
    progress: Callable[[int], None] | None = None,
) -> KillResult:
    """Run the sweep with ``mutant`` planted, its own scenario first, until the first failure."""
    from sim.explore.sweep import sweep
    from sim.world.scenario import load_scenario

    ordered = [mutant.scenario] + [s for s in scenarios if s != mutant.scenario]
    if mutant.store in stores:  # a store's own mutant is swept on that store first
        stores = (mutant.store, *(s for s in stores if s != mutant.store))
    started = time.perf_counter()
    schedules = 0
    with planted(mutant):
        for name in ordered:
            for store in stores:
                result = sweep(
                    load_scenario(name),
                    store=store,  # type: ignore[arg-type]
                    seed=seed,
                    crash_kinds=mutant.crash_kinds,  # type: ignore[arg-type]
                    determinism=determinism,
                    stop_at_first_failure=True,
                    progress=progress,
                )
                schedules += result.schedules
                if result.failures:
                    first = result.failures[0]
                    return KillResult(
                        mutant.name,
                        mutant.bug_class,
                        True,
                        first.invariant,
                        first.schedule,
                        name,
                        store,
                        schedules,
                        time.perf_counter() - started,
                        first.explanation,
                        first.invariants,
                    )
    return KillResult(
        mutant.name,
        mutant.bug_class,
        False,
        None,
        None,
        None,
        None,
        schedules,
        time.perf_counter() - started,
    )
