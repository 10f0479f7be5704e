"""Run one scenario under one crash schedule in a fresh world, and collect what the oracles read.

The world outlives its processes: SimFS (or a real temporary directory for SQLite), the external
services and their ledgers, the client, the fake model's call log. A process opens the runtime,
the conversation (recovering whatever the last process left), and acts as the client's endpoint:
it submits every input the client has not had acknowledged (same request ids), then waits for every
submission to settle. When a crash kills it, the machine spawns the next process (new owner id; the
runtime itself waits out the dead owner's lease). After the last crash point, faults stop and the
world must settle within the scenario's liveness bound of virtual time.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import trio
import trio.testing
from faker import Faker

from durable.config import RuntimeConfig
from durable.events import EventRecord
from durable.journal import Fenced
from durable.ports import InlineBlocking, Ports
from durable.runtime import Conversation
from durable.state import InvariantViolation, new_state, reduce
from durable.store.base import Checkpoint, CorruptStore, LeaseHeld, StoreError
from durable.store.sqlite import SQLiteStore
from sim.world import tempdirs
from sim.world.faults import Boundary, Schedule
from sim.world.fs import SimFS
from sim.world.model import FakeModel, ModelCall
from sim.world.process import (
    AcceptedAppend,
    CrashRecord,
    ForkHook,
    InstrumentedStore,
    LeaseGrant,
    Machine,
    ProcessDead,
    ProcessFS,
    SimBlocking,
    SimClock,
    SimIds,
    SimProcess,
    SimulatedCrash,
    describe_exception,
    is_cancel_only,
    is_crash_only,
    only,
)
from sim.world.scenario import ACTION_STEP_BASE, RESEND_STEP_BASE, ActionDef, ResendDef, Scenario
from sim.world.seams import (
    Seams as Seams,  # re-exported: `from sim.run.runner import seams` keeps working
)
from sim.world.seams import current as current_seams
from sim.world.seams import seams as seams
from sim.world.seeded import World, fake_workspace, seed_trio_scheduler
from sim.world.services import Effect, Services
from sim.world.tools import build_tools

StoreKind = Literal["file", "sqlite"]
STORE_ROOT = "/store"
MAX_PROCESSES = 32


@dataclass
class ClientView:
    """What the client knows: acknowledged submissions and returned answers (for I5 and I12)."""

    acked: dict[str, str] = field(default_factory=dict)
    answers: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)
    lost_acks: list[str] = field(default_factory=list)
    remapped: list[tuple[str, str, str]] = field(default_factory=list)
    actions_done: set[int] = field(default_factory=set)

    def complete(self, scenario: Scenario) -> bool:
        return all(i.request_id in self.answers for i in scenario.inputs)


@dataclass
class RunResult:
    scenario: Scenario
    seed: int
    store: StoreKind
    schedule: Schedule
    fingerprint: str = ""
    boundaries: list[Boundary] = field(default_factory=list)
    crashes: list[CrashRecord] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)
    ledger: list[Effect] = field(default_factory=list)
    client: ClientView = field(default_factory=ClientView)
    records: list[EventRecord] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    commits: list[tuple[int, list[EventRecord]]] = field(default_factory=list)
    grants: list[LeaseGrant] = field(default_factory=list)
    renewals: list[LeaseGrant] = field(default_factory=list)
    recovery_mismatches: list[str] = field(default_factory=list)
    accepted: list[AcceptedAppend] = field(default_factory=list)
    handovers_with_pinned_request: int = 0
    settled: bool = False
    runtime_error: str | None = None
    store_error: str | None = None
    virtual_time_s: float = 0.0
    processes: int = 0
    files: dict[str, str] = field(default_factory=dict)
    # Storage faults (I13): what the disk damaged, the corruption error a process stopped with
    # (None: recovery went on), and what changed in the damaged files since the damage.
    damage: dict[str, str] = field(default_factory=dict)
    refusal: str | None = None
    evidence_changes: list[str] = field(default_factory=list)
    tear_counts: dict[tuple[int, str], int] = field(default_factory=dict)  # see count_tears
    recovered_at_s: dict[str, float] = field(default_factory=dict)  # per process (I11)
    paused: list[str] = field(default_factory=list)  # processes a takeover paused (I11)
    after_release: list[str] = field(default_factory=list)  # work begun after a lease release

    @property
    def outcome(self) -> dict[str, Any]:
        return {
            rid: {"status": s, "answer": a, "reason": r}
            for rid, (s, a, r) in self.client.answers.items()
        }


def run_scenario(
    scenario: Scenario,
    *,
    seed: int,
    store: StoreKind,
    schedule: Schedule | None = None,
    fork: ForkHook | None = None,
    count_tears: bool = False,
) -> RunResult:
    """Run ``scenario`` under ``schedule`` (none: fault-free) in a fresh, deterministic world.

    ``count_tears`` records, per boundary, how many enumerated tears a power crash there would
    have (``RunResult.tear_counts``): a sweep's traced run, so it can list its tear schedules.

    With ``fork`` (the fast sweep), every boundary after the schedule's points forks children that
    crash there; a child ends inside this call (``ForkHook.finish_child`` exits the process).
    """
    schedule = schedule or Schedule()
    result = RunResult(scenario=scenario, seed=seed, store=store, schedule=schedule)
    tmp = tempdirs.make("sqlite", parent=tempdirs.fast_parent()) if store == "sqlite" else None
    try:
        seed_trio_scheduler(seed)
        world = World(seed)
        clock = trio.testing.MockClock(autojump_threshold=0)
        try:
            trio.run(
                _world_main,
                world,
                scenario,
                store,
                schedule,
                result,
                tmp,
                fork,
                count_tears,
                clock=clock,
            )
        except BaseException as exc:
            if fork is not None and fork.in_child:
                fork.abort_child(exc)  # never unwind into the forking parent's frames
            raise
        result.fingerprint = world.fingerprint()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


@dataclass
class WorldEnv:
    """Everything that outlives a process in one world run."""

    world: World
    machine: Machine
    scenario: Scenario
    services: Services
    client: ClientView
    model_log: list[ModelCall]
    config: RuntimeConfig
    store_kind: StoreKind
    fs: SimFS
    tmp: str | None
    liveness: trio.CancelScope
    errors: list[str] = field(default_factory=list)
    recovery_mismatches: list[str] = field(default_factory=list)
    refusal: str | None = None  # a process stopped on corrupt storage: the world ends there
    # When each process had its conversation open (recovered), and which ones were paused: a
    # resumed retry is due at max(its committed deadline, the recovery) unless paused (I11).
    recovered_at_s: dict[str, float] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)


async def _world_main(
    world: World,
    scenario: Scenario,
    store_kind: StoreKind,
    schedule: Schedule,
    result: RunResult,
    tmp: str | None,
    fork: ForkHook | None = None,
    count_tears: bool = False,
) -> None:
    fs = SimFS()
    fs.makedirs(STORE_ROOT)
    timed = tuple((c.at_s, c.kind) for c in scenario.timed_crashes)
    machine = Machine(world, schedule, fs=fs, timed_crashes=timed)
    machine.store_root = STORE_ROOT
    if count_tears:
        machine.tear_counts = {}
    services = Services(files=_initial_files(world, scenario))
    world.record("files", sorted(services.files.items()))
    config = RuntimeConfig(
        model_name="fake",
        lease_ttl_s=scenario.lease_ttl_s,
        heartbeat_s=scenario.heartbeat_s,
        checkpoint_every=scenario.checkpoint_every,
        budget=scenario.budget,
        max_model_attempts=scenario.max_model_attempts,
    )
    # The liveness bound: virtual time after the latest crash (or the start) within which the
    # world must settle. It also bounds a run that hangs before its faults are reached.
    liveness = trio.CancelScope(deadline=scenario.liveness_bound_s)

    def extend_bound() -> None:
        liveness.deadline = max(liveness.deadline, trio.current_time() + scenario.liveness_bound_s)

    machine.on_crash = extend_bound
    env = WorldEnv(
        world, machine, scenario, services, ClientView(), [], config, store_kind, fs, tmp, liveness
    )
    if fork is not None:
        machine.fork_plan = fork
        machine.state_parts = lambda: _world_parts(env)
        if store_kind == "sqlite":
            fork.snapshot = lambda: _snapshot_sqlite(env)
            fork.relocate = lambda copy: _relocate_sqlite(env, fork, copy)
    with liveness:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_worker, env, 0.0, nursery, 0)
            takeover, shutdown = scenario.takeover, scenario.shutdown
            if takeover is not None:
                nursery.start_soon(_worker, env, takeover.second_worker_at_s, nursery, 1)
                nursery.start_soon(_pause_first, env, takeover.pause_at_s, takeover.pause_for_s)
            if shutdown is not None:
                nursery.start_soon(_worker, env, shutdown.second_worker_at_s, nursery, 1)
    client = env.client
    result.settled = not liveness.cancelled_caught and not env.errors and client.complete(scenario)
    result.runtime_error = "; ".join(env.errors) or None
    result.virtual_time_s = trio.current_time()
    result.boundaries = machine.boundaries
    result.crashes = machine.crashes
    result.model_calls = env.model_log
    result.ledger = services.ledger
    result.client = client
    result.commits = machine.commits
    result.grants = machine.grants
    result.renewals = machine.renewals
    result.recovery_mismatches = env.recovery_mismatches
    result.accepted = machine.accepted
    result.handovers_with_pinned_request = machine.handovers_with_pinned_request
    result.processes = len(machine.processes)
    result.refusal = env.refusal
    result.tear_counts = dict(machine.tear_counts or {})
    result.after_release = machine.after_release
    result.recovered_at_s = env.recovered_at_s
    result.paused = sorted(env.paused)
    if machine.damaged is not None:
        result.damage, files, inodes = machine.damaged
        result.evidence_changes = _evidence_changes(result.damage, files, inodes, fs)
    result.files = dict(services.files)
    await _collect_store(result, store_kind, scenario, fs, env.tmp)
    world.record("end", result.settled, [r.checksum[:12] for r in result.records])
    world.record("files", sorted(services.files.items()))
    if fork is not None and fork.in_child:
        # A forked child reports from inside the run and exits: trio's own teardown would use
        # I/O primitives (the wakeup socket, epoll) it shares with the forking parent.
        result.schedule = fork.child_schedule
        result.fingerprint = world.fingerprint()
        fork.finish_child(result)  # never returns


def _evidence_changes(
    damage: dict[str, str],
    files: dict[str, bytes],
    inodes: dict[str, int],
    fs: SimFS,
) -> list[str]:
    """What happened, after a storage fault, to the files the disk then held: a file removed, or
    bytes it held changed or cut off in place (appending is no change; a file replaced whole by
    a rename, such as a lease taken over, supersedes rather than destroys -- except the damaged
    file itself, which must stay exactly as the fault left it). A recovery that stops on corrupt
    storage must leave all of it as it found it (I13)."""
    now, now_inodes = fs.snapshot(), fs.inode_numbers()
    out: list[str] = []
    for path, before in files.items():
        after = now.get(path)
        damaged = path in damage
        if after is None:
            out.append(f"{path} removed")
        elif damaged and after != before:
            out.append(f"{path} (the damaged file) changed: {len(before)} -> {len(after)} bytes")
        elif now_inodes.get(path) == inodes.get(path) and not after.startswith(before):
            same = next(
                (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
                min(len(before), len(after)),
            )
            out.append(f"{path} changed in place at byte {same}")
    for path, what in damage.items():
        if what.startswith("deleted:") and path in now:
            out.append(f"{path} (deleted by the fault) was created again")
    return out


def _world_parts(env: WorldEnv) -> list[Any]:
    """What, outside the processes, determines the future (see ``Machine.state_digest``)."""
    services, client = env.services, env.client
    parts: list[Any] = [
        sorted(services.files.items()),
        sorted(services.charges.items()),
        sorted(services.fence_epoch.items()),
        services.outbox,
        services.counter,
        len(services.ledger),
        sorted(client.acked.items()),
        sorted(client.answers.items()),
        client.lost_acks,
        client.remapped,
        sorted(client.actions_done),
        len(env.model_log),
        env.errors,
        env.liveness.deadline,
    ]
    if env.tmp is not None:
        for name in sorted(os.listdir(env.tmp)):
            if not name.endswith("-shm"):
                parts.append((name, Path(env.tmp, name).read_bytes()))
    return parts


def _snapshot_sqlite(env: WorldEnv) -> str:
    assert env.tmp is not None
    return tempdirs.copy_sqlite_dir(env.tmp)


def _relocate_sqlite(env: WorldEnv, fork: ForkHook, copy: str) -> None:
    """In a forked child: point the world, and every store of every process, at the copy. An
    inherited connection is kept referenced but never used or closed (closing it could checkpoint
    the parent's WAL); the store opens a fresh connection to the copy on its next call."""
    env.tmp = copy
    fork.child_tmp = copy
    for process in env.machine.processes:
        for store in process.sqlite_stores:
            env.machine.keep_inherited(store.move_to(str(Path(copy) / "store.sqlite")))


async def _pause_first(env: WorldEnv, at_s: float, for_s: float) -> None:
    """The first worker's host is paused (a GC pause, a stopped VM) from ``at_s``: whichever
    process runs in worker slot 0 then -- the first one, or the one restarted after a crash --
    stops until the pause ends (a process started during the pause waits too: see
    ``_pause_if_due``). So a crash never takes the pause out of the workload."""
    await trio.sleep_until(at_s)
    for process in env.machine.processes:
        if process.alive and process.slot == 0:
            _pause(env, process, at_s + for_s)


def _pause_if_due(env: WorldEnv, process: SimProcess) -> None:
    takeover = env.scenario.takeover
    if takeover is None or process.slot != 0:
        return
    until_s = takeover.pause_at_s + takeover.pause_for_s
    if takeover.pause_at_s <= trio.current_time() < until_s:
        _pause(env, process, until_s)


def _pause(env: WorldEnv, process: SimProcess, until_s: float) -> None:
    process.paused_until_s = until_s
    env.paused.add(process.id)
    env.machine.handovers_with_pinned_request += int(process.pinned_request())
    env.world.record("pause", process.id, until_s)


async def _worker(env: WorldEnv, start_at_s: float, nursery: trio.Nursery, slot: int) -> None:
    """One worker slot: runs a process; after a crash, always starts the next one (a supervisor
    restarts a crashed service even when the client has all its answers: recovery must still
    run, and settle whatever the crash left) -- unless the slot was shut down for good."""
    if start_at_s:
        await trio.sleep_until(start_at_s)
    crashed = False
    for _ in range(MAX_PROCESSES):
        if env.client.complete(env.scenario) and not crashed:
            return
        if trio.current_time() >= _shutdown_at_s(env, slot):
            return  # shut down for good
        process = env.machine.spawn()
        process.slot = slot
        _pause_if_due(env, process)
        outcome = await _run_process(env, process)
        crashed = outcome == "crashed"
        if crashed:
            continue
        if outcome == "refused":
            # A runtime that stops on corrupt storage waits for an operator: restarting it
            # would only refuse again. The world ends here (I13 judges the refusal).
            env.refusal = f"{process.id}: {process.error}"
            nursery.cancel_scope.cancel()
            return
        if outcome == "error":
            env.errors.append(f"{process.id}: {process.error}")
            nursery.cancel_scope.cancel()
        return
    env.errors.append(f"more than {MAX_PROCESSES} processes")


def _shutdown_at_s(env: WorldEnv, slot: int) -> float:
    """When the scenario's graceful shutdown takes this worker slot down (never: ``inf``)."""
    shutdown = env.scenario.shutdown
    return shutdown.at_s if shutdown is not None and slot == 0 else math.inf


def _initial_files(world: World, scenario: Scenario) -> dict[str, str]:
    """Workspace content from faker, seeded from the world (different seeds, different content);
    generated once per seed and process (``fake_workspace``: building Faker costs a small run)."""
    files = fake_workspace(world.rng("faker").getrandbits(64), scenario.fake_files, Faker)
    files.update(scenario.files)
    return dict(sorted(files.items()))


def _store(
    process: SimProcess, kind: StoreKind, scenario: Scenario, fs: SimFS, tmp: str | None
) -> InstrumentedStore:
    if kind == "file":
        inner: Any = current_seams().file_store(
            STORE_ROOT, ProcessFS(process, fs, STORE_ROOT), scenario.fsync
        )
        return InstrumentedStore(inner, process)
    assert tmp is not None
    sqlite = SQLiteStore(str(Path(tmp) / "store.sqlite"), blocking=SimBlocking(process))
    process.sqlite_stores.append(sqlite)
    return InstrumentedStore(sqlite, process)


async def _run_process(env: WorldEnv, process: SimProcess) -> str:
    """One process's life: ``ended`` (its client session ended), ``crashed`` or ``error``."""
    store = _store(process, env.store_kind, env.scenario, env.fs, env.tmp)
    ports = Ports(
        clock=SimClock(process),
        fs=ProcessFS(process, env.fs, STORE_ROOT),
        blocking=SimBlocking(process),
        ids=SimIds(process, env.world),
    )
    model = FakeModel(env.scenario, process, env.model_log)
    tools = build_tools(env.scenario, env.services, process)
    try:
        with process.scope:
            async with current_seams().open_runtime(
                store=store,
                model=model,
                tools=tools,
                ports=ports,
                config=env.config,
                owner_id=process.owner_id,
            ) as runtime:
                process.runtime = runtime
                await _client_session(env, process, runtime, store)
    except BaseException as exc:  # the machine is the OS here: it must see every way a process ends
        if not process.alive and is_crash_only(exc):
            return "crashed"
        if is_cancel_only(exc):
            raise  # the world's liveness bound (or the world ending): not the process's doing
        if only(exc, (Exception, SimulatedCrash, ProcessDead, trio.Cancelled)):
            process.error = f"{type(exc).__name__}: {describe_exception(exc)}"
            if env.machine.damaged is not None and only(exc, (CorruptStore, trio.Cancelled)):
                return "refused"
            return "error"
        raise  # KeyboardInterrupt, a test timeout, SystemExit: the harness's, never the process's
    return "crashed" if not process.alive else "ended"


async def _client_session(
    env: WorldEnv, process: SimProcess, runtime: Any, store: InstrumentedStore
) -> None:
    """The client talking to this process: open the conversation (this recovers it), perform the
    client's steps that were not acknowledged yet (inputs with their request ids, actions) at their
    times, then wait for every submission to settle. A standby worker that cannot get the lease,
    or a worker that loses it, ends its session."""
    scenario, client, world = env.scenario, env.client, env.world
    try:
        conversation = await runtime.conversation(scenario.conversation_id)
    except LeaseHeld:
        world.record("standby", process.id)
        return
    env.recovered_at_s[process.id] = trio.current_time()
    await _audit_recovery(env, process, conversation, store)
    shutdown_at_s = _shutdown_at_s(env, process.slot)
    async with trio.open_nursery() as nursery:
        if scenario.operator is not None:
            nursery.start_soon(_operator, env, process, conversation)
        # A graceful shutdown ends the session at its time: the runtime then exits normally.
        with trio.move_on_at(shutdown_at_s):
            try:
                await _client_steps(env, process, conversation)
                for spec in scenario.inputs:
                    handle = conversation.submission(client.acked[spec.request_id])
                    settled = await handle.wait()
                    client.answers[spec.request_id] = (
                        settled.status,
                        settled.answer,
                        settled.reason,
                    )
                    world.record("answer", spec.request_id, settled.status, settled.answer)
            except Fenced:
                world.record("fenced", process.id)
        if trio.current_time() >= shutdown_at_s:
            world.record("shutdown", process.id)
        nursery.cancel_scope.cancel()


async def _audit_recovery(
    env: WorldEnv, process: SimProcess, conversation: Any, store: InstrumentedStore
) -> None:
    """For I3: the state a recovery rebuilt must be ``reduce`` of the log it stands on. Read at
    the same instant (neither the read nor the comparison yields to other tasks), in every
    process but the first (which opens an empty conversation)."""
    if process is env.machine.processes[0] or not hasattr(conversation, "state"):
        return
    records = await store.read_records(env.scenario.conversation_id, 0)
    try:
        expected = reduce(new_state(env.scenario.conversation_id), records)
    except InvariantViolation:
        return  # I2 reports a log that does not reduce
    rebuilt = conversation.state.model_dump(mode="json")
    if rebuilt != expected.model_dump(mode="json"):
        differing = sorted(
            k for k, v in expected.model_dump(mode="json").items() if rebuilt.get(k) != v
        )
        env.recovery_mismatches.append(
            f"{process.id}: state through #{conversation.state.last_sequence}, the store returns "
            f"{len(records)} records; they differ in: {', '.join(differing) or '?'}"
        )


async def _client_steps(env: WorldEnv, process: SimProcess, conversation: Conversation) -> None:
    scenario, client, world = env.scenario, env.client, env.world
    steps: list[tuple[float, int, Any]] = [(i.at_s, n, i) for n, i in enumerate(scenario.inputs)]
    steps += [(a.at_s, ACTION_STEP_BASE + n, a) for n, a in enumerate(scenario.actions)]
    steps += [(r.at_s, RESEND_STEP_BASE + n, r) for n, r in enumerate(scenario.resends)]
    by_request = {i.request_id: i for i in scenario.inputs}
    for at_s, number, step in sorted(steps, key=lambda t: (t[0], t[1])):
        if isinstance(step, ResendDef):
            known = client.acked.get(step.request_id)
            if number in client.actions_done or known is None:
                continue  # never acknowledged: the input step itself sends it again
            await process.sleep_until(at_s)
            original = by_request[step.request_id]
            handle = await conversation.submit(original.content, request_id=step.request_id)
            if handle.id != known:
                client.remapped.append((step.request_id, known, handle.id))
            client.actions_done.add(number)
            world.record("resend", step.request_id, handle.id)
            continue
        if isinstance(step, ActionDef):
            if number in client.actions_done:
                continue
            await process.sleep_until(at_s)
            await conversation.abort(reason="client abort")
            client.actions_done.add(number)
            world.record("action", step.kind, at_s)
            continue
        known = client.acked.get(step.request_id)
        if known is not None and known in conversation.state.submissions:
            if not scenario.client_resends:
                continue
        elif known is not None:
            client.lost_acks.append(step.request_id)
        await process.sleep_until(at_s)
        handle = await conversation.submit(step.content, request_id=step.request_id)
        if known is not None and handle.id != known:
            client.remapped.append((step.request_id, known, handle.id))
        client.acked[step.request_id] = handle.id
        world.record("ack", step.request_id, handle.id)


async def _operator(env: WorldEnv, process: SimProcess, conversation: Conversation) -> None:
    """The human operator: resolves calls waiting for reconciliation, after a delay."""
    operator = env.scenario.operator
    assert operator is not None
    while True:
        # Re-scan after every resolution: a call may ask for reconciliation while the operator
        # sleeps on another, and waiting for the next commit then would miss it for ever.
        pending = conversation.pending_reconciliations()
        if not pending:
            await conversation.journal.wait_changed()
            continue
        intent = pending[0]
        await process.sleep_until(process.now() + operator.delay_s)
        if intent.result_sequence is not None:
            continue
        applied = env.services.effects_of(intent.call_id)
        if operator.decision == "check_ledger" and applied:
            output, is_error = f"operator confirmed: {intent.tool} was applied", False
        else:
            output, is_error = f"operator: {intent.tool} not applied, skipped", True
        await conversation.resolve(intent.call_id, output=output, is_error=is_error)
        env.world.record("resolved", intent.call_id, is_error)


async def _collect_store(
    result: RunResult, kind: StoreKind, scenario: Scenario, fs: SimFS, tmp: str | None
) -> None:
    if kind == "file":
        reader: Any = current_seams().file_store(STORE_ROOT, fs, scenario.fsync)
    else:
        assert tmp is not None
        reader = SQLiteStore(str(Path(tmp) / "store.sqlite"), blocking=InlineBlocking())
    await read_durable(result, reader, scenario.conversation_id)


async def read_durable(result: RunResult, reader: Any, conversation_id: str) -> None:
    """Read what is durable now, through ``reader``: a fresh store that holds no lease and
    repairs nothing. A store that refuses (``StoreError``) is recorded for I2, not raised."""
    try:
        result.records = await reader.read_records(conversation_id, 0)
        result.checkpoints = await reader.load_checkpoints(conversation_id)
        if isinstance(reader, SQLiteStore):
            await reader.close()
    except StoreError as exc:
        result.store_error = f"{type(exc).__name__}: {exc}"
