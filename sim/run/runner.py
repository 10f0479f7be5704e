"""Run one scenario under one crash schedule in a fresh world, and collect what the oracles read.

The world outlives its processes: SimFS (or a real temporary directory for SQLite), the external
services and their ledgers, the client, the fake model's call log. A process opens the runtime,
the conversation (recovering whatever the last process left), and acts as the client's endpoint:
it submits every input the client has not had acknowledged (same request ids), then waits for every
submission to settle. When a crash kills it, the machine spawns the next process (new owner id; the
runtime itself waits out the dead owner's lease). After the last crash point, faults stop and the
world must settle within the scenario's liveness bound of virtual time.

This module is the simulator's host of the world (``WorldEnv``, a ``sim.world.host.Host``): the
virtual clock, ``SimFS``, the in-memory services, the supervisor of the worker slots, a
takeover's pause, forking for the fast sweep. A process's life itself -- the runtime's wiring,
the client session, the operator -- is ``sim.world.session``, shared with the real-process
host of ``sim.run.realrun``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing
from faker import Faker

from durable.config import RuntimeConfig
from durable.events import ToolResult
from durable.ports import Blocking
from durable.store.base import CorruptStore, StoreError
from durable.store.postgres import PostgresStore
from durable.store.sqlite import SQLiteStore
from sim.run import collector
from sim.run.result import Outside
from sim.run.result import RunResult as RunResult  # re-exported: its readers import it from here
from sim.world.evidence import Evidence
from sim.world.faults import Schedule, ScheduleError
from sim.world.fs import SimFS
from sim.world.host import ClientView, runtime_config, shutdown_at_s
from sim.world.injector import ForkHook
from sim.world.model import ModelCall
from sim.world.pgserver import RunDatabase, content_digest, run_database
from sim.world.process import Machine, PausePlan, SimBlocking, SimProcess
from sim.world.scenario import ACTION_STEP_BASE, RESEND_STEP_BASE, Scenario
from sim.world.seams import (
    Seams as Seams,  # re-exported: `from sim.run.runner import seams` keeps working
)
from sim.world.seams import seams as seams
from sim.world.seeded import World, fake_workspace, seed_trio_scheduler
from sim.world.services import Services
from sim.world.session import run_process
from sim.world.sqlite_vfs import end_worlds, seed_sqlite_randomness
from sim.world.storage_faults import Role, role_of
from sim.world.stores import StoreKind, StorePlace

STORE_ROOT = "/store"
MAX_PROCESSES = 32


def run_scenario(
    scenario: Scenario,
    *,
    seed: int,
    store: StoreKind | str,
    schedule: Schedule | None = None,
    fork: ForkHook | None = None,
    count_tears: bool = False,
) -> RunResult:
    """Run ``scenario`` under ``schedule`` (none: fault-free) in a fresh, deterministic world.

    ``count_tears`` records, per boundary, how many enumerated tears a power crash there would
    have (``Trace.tear_counts``): a sweep's traced run, so it can list its tear schedules.

    With ``fork`` (the fast sweep), every boundary after the schedule's points forks children that
    crash there; a child ends inside this call (``ForkHook.finish_child`` exits the process).
    """
    kind = StoreKind(store)
    if fork is not None and not kind.forks:
        raise ValueError(f"a {kind} world cannot be forked (StoreKind.forks): sweep it naively")
    schedule = schedule or Schedule()
    _check_server_faults(kind, scenario, schedule)
    collector.collect_if_due()  # between runs, never inside one (sim.run.collector)
    result = RunResult(scenario=scenario, seed=seed, store=kind, schedule=schedule)
    try:
        with _run_database(kind) as database:
            seed_trio_scheduler(seed)
            seed_sqlite_randomness(seed)  # SQLite's salts and temporary names, like trio's order
            world = World(seed)
            clock = trio.testing.MockClock(autojump_threshold=0)
            try:
                trio.run(
                    _world_main,
                    world,
                    scenario,
                    kind,
                    schedule,
                    result,
                    fork,
                    count_tears,
                    database,
                    clock=clock,
                )
            except BaseException as exc:
                if fork is not None and fork.in_child:
                    fork.abort_child(exc)  # never unwind into the forking parent's frames
                raise
            result.trace.fingerprint = world.fingerprint()
    finally:
        end_worlds()  # the world's SQLite connections and VFSes (``sim.world.sqlite_vfs``)
    return result


def _check_server_faults(kind: StoreKind, scenario: Scenario, schedule: Schedule) -> None:
    """Refuse a postgres world any crash but a process kill (in the schedule, or timed by the
    scenario): a power loss would roll ``SimFS`` back and leave the server's store as it was,
    a machine no real failure produces (the server is the durable service, never crashed)."""
    if kind is not StoreKind.POSTGRES:
        return  # the other stores' refusals are the sweep's and replay's (unchanged)
    kinds = {p.kind for p in schedule.points} | {c.kind for c in scenario.timed_crashes}
    refused = sorted(k for k in kinds if not kind.can_inject(k))
    if refused:
        raise ScheduleError(
            f"{'/'.join(refused)} faults are not simulated for the postgres store: only worker "
            "processes are killed (the server is the durable service)"
        )


@contextmanager
def _run_database(kind: StoreKind) -> Iterator[RunDatabase | None]:
    """The run's own empty schema on the server for a ``postgres`` world, dropped when the run
    ends (``sim.world.pgserver``); nothing for the stores that live on ``SimFS``."""
    if kind is not StoreKind.POSTGRES:
        yield None
        return
    with run_database() as database:
        yield database


@dataclass
class WorldEnv:
    """Everything that outlives a process in one world run: the simulator's host of the world
    (``sim.world.host.Host``)."""

    world: World
    machine: Machine
    scenario: Scenario
    services: Services
    client: ClientView
    model_log: list[ModelCall]
    config: RuntimeConfig
    store_kind: StoreKind
    fs: SimFS
    liveness: trio.CancelScope
    database: RunDatabase | None = None  # a postgres world's schema on the server
    errors: list[str] = field(default_factory=list)
    recovery_mismatches: list[str] = field(default_factory=list)
    refusal: str | None = None  # a process stopped on corrupt storage: the world ends there
    # When each process had its conversation open (recovered), and which ones were paused: a
    # resumed retry is due at max(its committed deadline, the recovery) unless paused (I11).
    recovered_at_s: dict[str, float] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    # A fork hook ended the world early (``Injector.stop_world``: a pruned run, which has
    # rejoined the fault-free run): no worker starts another process after it.
    halt: trio.CancelScope = field(default_factory=trio.CancelScope)
    halted_at: int | None = None

    def place(self) -> StorePlace:
        return StorePlace(self.fs, STORE_ROOT, self.scenario.fsync, self.database)

    def blocking(self, process: SimProcess) -> Blocking:
        return SimBlocking(process)


async def _world_main(
    world: World,
    scenario: Scenario,
    store_kind: StoreKind,
    schedule: Schedule,
    result: RunResult,
    fork: ForkHook | None = None,
    count_tears: bool = False,
    database: RunDatabase | None = None,
) -> None:
    """One world: build it, run its worker slots until it settles (or the liveness bound
    passes), then collect what the oracles read. A postgres world's store content is on the
    server, not in ``SimFS``, so its digest goes into the trace (the fingerprint) as well."""
    env = _new_world(world, scenario, store_kind, schedule, count_tears)
    env.database = database
    if fork is not None:
        _plan_forks(env, fork)
    guard = fork.interrupt_guard() if fork is not None else nullcontext()
    with guard, env.liveness, env.halt:
        async with trio.open_nursery() as nursery:
            _start_workers(env, nursery)
    _fill_result(env, result)
    reader = store_kind.reader(env.place())
    await read_durable(result, reader, scenario.conversation_id, _latent_damage(env, store_kind))
    durable = result.durable
    world.record("end", result.trace.settled, [r.checksum[:12] for r in durable.records])
    for child, records in sorted(durable.child_records.items()):
        world.record("child", child, [r.checksum[:12] for r in records])
    for child, error in sorted(durable.latent_damage.items()):
        world.record("latent-damage", child, error)
    if store_kind is StoreKind.POSTGRES:
        world.record("database", await _database_digest(store_kind.reader(env.place())))
    world.record("files", sorted(env.services.files.items()))
    if fork is not None and fork.in_child:
        # A forked child reports from inside the run and exits: trio's own teardown would use
        # I/O primitives (the wakeup socket, epoll) it shares with the forking parent.
        result.schedule = fork.child_schedule
        result.trace.fingerprint = world.fingerprint()
        fork.finish_child(result)  # never returns


def _latent_damage(env: WorldEnv, store_kind: StoreKind) -> LatentDamage | None:
    """What the judge's read needs to tell latent damage (``LatentDamage``) from a refusal the
    runtime owed: only after a storage fault (file store on SimFS), and only if it damaged."""
    injector = env.machine.injector
    if injector.damaged is None or injector.before_damage is None or not injector.damaged[0]:
        return None
    if sum(1 for crash in env.machine.evidence.crashes if crash.point.kind == "storage") > 1:
        return None  # the disk before the *first* fault is not kept: judge as before
    place = env.place()
    before = StorePlace(injector.before_damage, place.root, place.fsync, place.database)
    damage, files_after, _ = injector.damaged
    return LatentDamage(damage, files_after, env.fs, place.root, store_kind.reader(before))


def _new_world(
    world: World,
    scenario: Scenario,
    store_kind: StoreKind,
    schedule: Schedule,
    count_tears: bool,
) -> WorldEnv:
    """The machine (with its disk and the scenario's timed crashes), the services with their
    initial files, and the liveness bound: virtual time after the latest crash (or the start)
    within which the world must settle. It also bounds a run that hangs before its faults are
    reached."""
    fs = SimFS()
    fs.makedirs(STORE_ROOT)
    liveness = trio.CancelScope(deadline=scenario.liveness_bound_s)

    def extend_bound() -> None:
        liveness.deadline = max(liveness.deadline, trio.current_time() + scenario.liveness_bound_s)

    built: list[WorldEnv] = []  # the world, once built: a pause's bookkeeping is the world's
    machine = Machine(
        world,
        schedule,
        fs=fs,
        timed_crashes=tuple((c.at_s, c.kind) for c in scenario.timed_crashes),
        evidence=Evidence(main_conversation=scenario.conversation_id),
        store_root=STORE_ROOT,
        count_tears=count_tears,
        on_crash=extend_bound,
        pause_plan=_pause_plan(scenario, schedule, lambda p, until: _pause(built[0], p, until)),
    )
    services = Services(files=_initial_files(world, scenario))
    services.workspace_history.append((-1, dict(services.files)))
    world.record("files", sorted(services.files.items()))
    config = runtime_config(scenario)
    built.append(
        WorldEnv(
            world, machine, scenario, services, ClientView(), [], config, store_kind, fs, liveness
        )
    )
    return built[0]


def _pause_plan(
    scenario: Scenario, schedule: Schedule, on_pause: Callable[[SimProcess, float], None]
) -> PausePlan | None:
    """How long a ``pause`` crash point stops a process: until a standby has taken its lease
    over (``sim.world.process.Pauses``), at most until two lease TTLs after the standby has
    started (it waits out the lease, then takes it). None, and a schedule with a pause point
    refused, where the scenario has no standby."""
    standby_at_s = scenario.standby_at_s()
    if standby_at_s is None:
        paused = [p.text() for p in schedule.points if p.kind == "pause"]
        if paused:
            raise ScheduleError(
                f"{paused[0]}: {scenario.name} has no standby to take a paused worker's lease "
                "over (a takeover or a shutdown)"
            )
        return None
    ttl_s = scenario.lease_ttl_s
    return PausePlan(until_s=lambda now: max(now, standby_at_s) + 2 * ttl_s, on_pause=on_pause)


def _plan_forks(env: WorldEnv, fork: ForkHook) -> None:
    """Let the fast sweep fork children at the boundaries of this run."""
    env.machine.injector.fork_with(fork, lambda: _world_parts(env), stop=lambda: _halt(env))


def _halt(env: WorldEnv) -> None:
    """The runner's part of ``Injector.stop_world`` (which has ended the processes): no worker
    starts another process, and the world's tasks are cancelled; what the world holds is then
    collected as at a normal end."""
    env.halted_at = env.machine.injector.next_index
    env.halt.cancel()


def _start_workers(env: WorldEnv, nursery: trio.Nursery) -> None:
    """The first worker slot from the start; a takeover's or a shutdown's second worker (and a
    takeover's pause of the first) at their times."""
    nursery.start_soon(_worker, env, 0.0, nursery, 0)
    takeover, shutdown = env.scenario.takeover, env.scenario.shutdown
    if takeover is not None:
        nursery.start_soon(_worker, env, takeover.second_worker_at_s, nursery, 1)
        nursery.start_soon(_pause_first, env, takeover.pause_at_s, takeover.pause_for_s)
    if shutdown is not None:
        nursery.start_soon(_worker, env, shutdown.second_worker_at_s, nursery, 1)


def _fill_result(env: WorldEnv, result: RunResult) -> None:
    """Copy what the world recorded into ``result`` (all but the store, read afterwards)."""
    machine, client, services = env.machine, env.client, env.services
    result.take_evidence(machine.evidence)
    trace = result.trace
    trace.halted_at = env.halted_at
    trace.settled = (
        env.halted_at is None
        and not env.liveness.cancelled_caught
        and not env.errors
        and client.complete(env.scenario)
    )
    trace.virtual_time_s = trio.current_time()
    trace.processes = len(machine.processes)
    trace.tear_counts = dict(machine.injector.tear_counts or {})
    trace.recovered_at_s = env.recovered_at_s
    result.leases.paused = sorted(env.paused)
    result.errors.runtime_error = "; ".join(env.errors) or None
    result.errors.recovery_mismatches = env.recovery_mismatches
    result.outside = Outside(
        ledger=services.ledger,
        client=client,
        model_calls=env.model_log,
        files=dict(services.files),
        workspace_history=list(services.workspace_history),
        charges=dict(services.charges),
        refunds=dict(services.refunds),
    )
    result.storage.refusal = env.refusal
    if machine.injector.damaged is not None:
        damage, files, inodes = machine.injector.damaged
        result.storage.damage = damage
        result.storage.evidence_changes = _evidence_changes(damage, files, inodes, env.fs)


def _evidence_changes(
    damage: dict[str, str],
    files: dict[str, bytes],
    inodes: dict[str, int],
    fs: SimFS,
) -> list[str]:
    """What happened, after a storage fault, to the files the disk then held beside the damage:
    a file removed, or bytes it held changed or cut off in place (appending is no change; a file
    replaced whole by a rename, such as a lease taken over, supersedes rather than destroys --
    except the damaged file itself, which must stay exactly as the fault left it). A recovery
    that stops on corrupt storage must leave all of it as it found it (I13). "Beside": in a
    directory that holds damage -- a refusal is about the conversation it refuses, and another
    conversation whose recovery went on in the same process (its own unacknowledged torn tail
    cut) is judged by every other invariant, not by this one. A temporary of the atomic-write
    protocol is no evidence unless damaged: it was never acknowledged, and the damage table's
    row for stray temporaries says the next write of the same file replaces it."""
    now, now_inodes = fs.snapshot(), fs.inode_numbers()
    beside = {path.rsplit("/", 1)[0] for path in damage}
    out: list[str] = []
    for path, before in files.items():
        after = now.get(path)
        damaged = path in damage
        if not damaged and path.rsplit("/", 1)[0] not in beside:
            continue  # another conversation's files: their own recovery is judged elsewhere
        if not damaged and role_of(path) is Role.TEMPORARY:
            continue  # unacknowledged by definition: the damage table lets a write replace it
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


def _world_parts(env: WorldEnv) -> list[tuple[str, Any]]:
    """What, outside the processes, determines the future (see ``Injector.state_digests``), by
    name: a canonical view renames some of them (``sim.explore.rejoin``)."""
    services, client = env.services, env.client
    parts: list[tuple[str, Any]] = [
        ("files", sorted(services.files.items())),
        ("charges", sorted(services.charges.items())),
        ("fence_epoch", sorted(services.fence_epoch.items())),
        ("outbox", services.outbox),
        ("counter", services.counter),
        ("ledger", len(services.ledger)),
        ("acked", sorted(client.acked.items())),
        ("answers", sorted(client.answers.items())),
        ("lost_acks", client.lost_acks),
        ("remapped", client.remapped),
        ("actions_done", sorted(client.actions_done)),
        # stamped with a boundary index: I16 compares them
        ("rejected", sorted(client.rejected.items())),
        ("workspace_history", len(services.workspace_history)),  # I17 reads each change
        ("model_log", len(env.model_log)),
        ("errors", env.errors),
        ("liveness_deadline", env.liveness.deadline),
        ("client_due_s", _client_due_s(env)),
    ]
    if services.compensated_keys:  # only with compensation: other scenarios' digests unchanged
        parts += [
            ("compensated_keys", services.compensated_keys),
            ("refunds", sorted(services.refunds.items())),
        ]
    return parts


def _client_due_s(env: WorldEnv) -> list[float]:
    """When the client's steps still to come are due (absolute virtual times): a restarted
    client acts on the ones already past at once, so they decide the future as much as the
    timers of the steps it is waiting for (``sim.world.session.client_steps``)."""
    scenario, client = env.scenario, env.client
    due = [
        i.at_s
        for i in scenario.inputs
        if i.request_id not in client.acked and i.request_id not in client.rejected
    ]
    due += [
        a.at_s
        for n, a in enumerate(scenario.actions)
        if ACTION_STEP_BASE + n not in client.actions_done
    ]
    due += [
        r.at_s
        for n, r in enumerate(scenario.resends)
        if RESEND_STEP_BASE + n not in client.actions_done
    ]
    return sorted(due)


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
    process.takeover_pending = True  # counted when a standby takes the lease over (I11)
    env.paused.add(process.id)
    env.world.record("pause", process.id, until_s)


async def _worker(env: WorldEnv, start_at_s: float, nursery: trio.Nursery, slot: int) -> None:
    """One worker slot: runs a process; after a crash, always starts the next one (a supervisor
    restarts a crashed service even when the client has all its answers: recovery must still
    run, and settle whatever the crash left) -- unless the slot was shut down for good."""
    if start_at_s:
        await trio.sleep_until(start_at_s)
    crashed = False
    for _ in range(MAX_PROCESSES):
        if env.halted_at is not None:
            return
        if env.client.complete(env.scenario) and not crashed:
            return
        if trio.current_time() >= shutdown_at_s(env.scenario, slot):
            return  # shut down for good
        process = env.machine.spawn()
        process.slot = slot
        _pause_if_due(env, process)
        outcome = await run_process(env, process)
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


def initial_files(seed: int, scenario: Scenario) -> dict[str, str]:
    """The workspace a world of ``seed`` starts with (its own RNG stream: the same files a run
    of that seed starts with), for a host that builds its services itself (realcrash)."""
    return _initial_files(World(seed), scenario)


def _initial_files(world: World, scenario: Scenario) -> dict[str, str]:
    """Workspace content from faker, seeded from the world (different seeds, different content);
    generated once per seed and process (``fake_workspace``: building Faker costs a small run)."""
    files = fake_workspace(world.rng("faker").getrandbits(64), scenario.fake_files, Faker)
    files.update(scenario.files)
    return dict(sorted(files.items()))


@dataclass(frozen=True)
class LatentDamage:
    """A storage fault in a conversation no process opened again: damage that only a read can
    find (a disk's latent sector error), found by the judge's own read at the end.

    A sub-agent's child conversation is read again only if its delegating call is re-run; once
    the call's result is recorded, nothing opens the child. Damage to it after that is neither
    recovered nor refused by the runtime -- it never reads it -- and the store's promise holds if
    the judge's read refuses, naming the damaged file, the delegating call's result was durable
    in the parent's log before the fault (nothing had a reason to open the child again), and
    every file of the child is still exactly as the fault left it (opening a conversation
    writes its lease and appends ``lease_acquired``: an untouched child was not opened). The
    child is then judged from the disk as it was before the fault: the history the runtime
    acknowledged."""

    damage: dict[str, str]  # path -> what the fault did
    files_after: dict[str, bytes]  # every file right after the fault
    fs: SimFS  # the file system as it was now, to compare with ``files_after``
    root: str  # the store's root
    before: Any  # a fresh reader over the disk as it was just before the fault

    async def applies(self, conversation_id: str, child: str, error: str) -> bool:
        """Whether the judge's refusal ``error`` of ``child`` is latent damage: the child's
        delegating call had its result durable before the fault (so a correct runtime never
        had a reason to open the child again), and the child is ``untouched``."""
        call_id = child.removeprefix(f"{conversation_id}.sub.")
        if call_id == child or not self.untouched(child, error):
            return False
        records = await self.before.read_records(conversation_id, 0)
        return any(isinstance(r.event, ToolResult) and r.event.call_id == call_id for r in records)

    def untouched(self, child: str, error: str) -> bool:
        prefix = f"/{self.root.strip('/')}/{child}/"
        damaged = [path for path in self.damage if path.startswith(prefix)]
        if not damaged or not any(path in error for path in damaged):
            return False
        now = {p: b for p, b in self.fs.snapshot().items() if p.startswith(prefix)}
        return now == {p: b for p, b in self.files_after.items() if p.startswith(prefix)}


async def read_durable(
    result: RunResult, reader: Any, conversation_id: str, latent: LatentDamage | None = None
) -> None:
    """Read what is durable now, through ``reader``: a fresh store that holds no lease and
    repairs nothing. A store that refuses (``StoreError``) is recorded for I2, not raised --
    except a child conversation's refusal that is ``latent`` damage (see ``LatentDamage``)."""
    durable = result.durable
    try:
        durable.records = await reader.read_records(conversation_id, 0)
        durable.checkpoints = await reader.load_checkpoints(conversation_id)
        if result.scenario.delegates():
            for child in await reader.list_conversations():
                if child == conversation_id:
                    continue
                try:
                    durable.child_records[child] = await reader.read_records(child, 0)
                except CorruptStore as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    if latent is None or not await latent.applies(conversation_id, child, error):
                        raise
                    durable.latent_damage[child] = error
                    durable.child_records[child] = await latent.before.read_records(child, 0)
        if isinstance(reader, (SQLiteStore, PostgresStore)):
            await reader.close()
    except StoreError as exc:
        result.errors.store_error = f"{type(exc).__name__}: {exc}"


async def _database_digest(reader: PostgresStore) -> str:
    """The digest of a postgres world's schema (``content_digest``); a store that refuses to
    be read is digested as its error (I2 reports it from ``read_durable``)."""
    try:
        return await content_digest(reader)
    except StoreError as exc:
        return type(exc).__name__  # its message names the run's schema: not deterministic
    finally:
        await reader.close()
