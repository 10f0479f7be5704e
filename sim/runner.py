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

import shutil
import tempfile
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
from durable.runtime import Runtime
from durable.store.base import Checkpoint, StoreError
from durable.store.file import FileStore
from durable.store.sqlite import SQLiteStore
from sim.faults import Boundary, Schedule
from sim.fs import SimFS
from sim.model import FakeModel, ModelCall
from sim.process import (
    CrashRecord,
    InstrumentedStore,
    LeaseGrant,
    Machine,
    ProcessFS,
    SimBlocking,
    SimClock,
    SimIds,
    SimProcess,
    is_crash_only,
)
from sim.scenario import Scenario
from sim.services import Effect, Services
from sim.tools import build_tools
from sim.world import World, seed_trio_scheduler

StoreKind = Literal["file", "sqlite"]
STORE_ROOT = "/store"
MAX_PROCESSES = 32


@dataclass
class ClientView:
    """What the client knows: acknowledged submissions and returned answers (for I5 and I12)."""

    acked: dict[str, str] = field(default_factory=dict)
    answers: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)
    lost_acks: list[str] = field(default_factory=list)


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
    settled: bool = False
    runtime_error: str | None = None
    store_error: str | None = None
    virtual_time_s: float = 0.0
    processes: int = 0
    files: dict[str, str] = field(default_factory=dict)

    @property
    def outcome(self) -> dict[str, Any]:
        return {
            rid: {"status": s, "answer": a, "reason": r}
            for rid, (s, a, r) in self.client.answers.items()
        }


def run_scenario(
    scenario: Scenario, *, seed: int, store: StoreKind, schedule: Schedule | None = None
) -> RunResult:
    """Run ``scenario`` under ``schedule`` (none: fault-free) in a fresh, deterministic world."""
    schedule = schedule or Schedule()
    result = RunResult(scenario=scenario, seed=seed, store=store, schedule=schedule)
    tmp = tempfile.mkdtemp(prefix="durable-sim-", dir=_fast_tmp()) if store == "sqlite" else None
    try:
        seed_trio_scheduler(seed)
        world = World(seed)
        clock = trio.testing.MockClock(autojump_threshold=0)
        trio.run(_world_main, world, scenario, store, schedule, result, tmp, clock=clock)
        result.fingerprint = world.fingerprint()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


async def _world_main(
    world: World,
    scenario: Scenario,
    store_kind: StoreKind,
    schedule: Schedule,
    result: RunResult,
    tmp: str | None,
) -> None:
    fs = SimFS()
    fs.makedirs(STORE_ROOT)
    machine = Machine(world, schedule, fs=fs)
    services = Services(files=_initial_files(world, scenario))
    world.record("files", sorted(services.files.items()))
    client = ClientView()
    model_log: list[ModelCall] = []
    config = RuntimeConfig(
        model_name="fake",
        lease_ttl_s=scenario.lease_ttl_s,
        heartbeat_s=scenario.heartbeat_s,
        checkpoint_every=scenario.checkpoint_every,
        budget=scenario.budget,
        max_model_attempts=scenario.max_model_attempts,
    )
    deadline_s: float | None = None
    for _ in range(MAX_PROCESSES):
        if deadline_s is None and machine.faults_over:
            deadline_s = trio.current_time() + scenario.liveness_bound_s
        process = machine.spawn()
        store = _store(process, store_kind, scenario, fs, tmp)
        ports = Ports(
            clock=SimClock(process),
            fs=ProcessFS(process, fs, STORE_ROOT),
            blocking=SimBlocking(process),
            ids=SimIds(process, world),
        )
        model = FakeModel(scenario, process, model_log)
        tools = build_tools(scenario, services, process)
        outcome = await _run_process(
            process, scenario, client, store, ports, model, tools, config, deadline_s
        )
        if outcome == "crashed":
            continue
        if outcome == "error":
            result.runtime_error = process.error
        result.settled = outcome == "settled"
        break
    result.virtual_time_s = trio.current_time()
    result.boundaries = machine.boundaries
    result.crashes = machine.crashes
    result.model_calls = model_log
    result.ledger = services.ledger
    result.client = client
    result.commits = machine.commits
    result.grants = machine.grants
    result.processes = len(machine.processes)
    result.files = dict(services.files)
    await _collect_store(result, store_kind, scenario, fs, tmp)
    world.record("end", result.settled, [r.checksum[:12] for r in result.records])
    world.record("files", sorted(services.files.items()))


def _initial_files(world: World, scenario: Scenario) -> dict[str, str]:
    """Workspace content from faker, seeded from the world (different seeds, different content)."""
    fake = Faker()
    fake.seed_instance(world.rng("faker").getrandbits(64))
    files = {
        f"{fake.word()}-{n}.cfg": "\n".join(f"{fake.word()} = {fake.pyint()}" for _ in range(3))
        for n in range(scenario.fake_files)
    }
    files.update(scenario.files)
    return dict(sorted(files.items()))


def _store(
    process: SimProcess, kind: StoreKind, scenario: Scenario, fs: SimFS, tmp: str | None
) -> InstrumentedStore:
    if kind == "file":
        inner: Any = FileStore(
            STORE_ROOT, fs=ProcessFS(process, fs, STORE_ROOT), fsync=scenario.fsync
        )
    else:
        assert tmp is not None
        inner = SQLiteStore(str(Path(tmp) / "store.sqlite"), blocking=SimBlocking(process))
        process.sqlite_stores.append(inner)
    return InstrumentedStore(inner, process)


async def _run_process(
    process: SimProcess,
    scenario: Scenario,
    client: ClientView,
    store: InstrumentedStore,
    ports: Ports,
    model: FakeModel,
    tools: Any,
    config: RuntimeConfig,
    deadline_s: float | None,
) -> str:
    """One process's life: ``settled``, ``crashed``, ``timeout`` (liveness) or ``error``."""
    try:
        with process.scope:
            with trio.move_on_at(deadline_s if deadline_s is not None else float("inf")) as bound:
                async with Runtime.open(
                    store=store,
                    model=model,
                    tools=tools,
                    ports=ports,
                    config=config,
                    owner_id=process.owner_id,
                ) as runtime:
                    process.runtime = runtime
                    await _client_session(process, scenario, client, runtime)
            if bound.cancelled_caught:
                return "timeout"
    except BaseException as exc:  # the machine is the OS here: it must see every way a process ends
        if not process.alive and is_crash_only(exc):
            return "crashed"
        if isinstance(exc, Exception | BaseExceptionGroup):
            process.error = f"{type(exc).__name__}: {_describe(exc)}"
            return "error"
        raise
    if not process.alive:
        return "crashed"
    return "settled"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return str(exc)


async def _client_session(
    process: SimProcess, scenario: Scenario, client: ClientView, runtime: Runtime
) -> None:
    conversation = await runtime.conversation(scenario.conversation_id)
    world = process.machine.world
    for spec in scenario.inputs:
        known = client.acked.get(spec.request_id)
        if known is not None and known in conversation.state.submissions:
            continue
        if known is not None:
            client.lost_acks.append(spec.request_id)
        if trio.current_time() < spec.at_s:
            await trio.sleep_until(spec.at_s)
        handle = await conversation.submit(spec.content, request_id=spec.request_id)
        client.acked[spec.request_id] = handle.id
        world.record("ack", spec.request_id, handle.id)
    for spec in scenario.inputs:
        handle = conversation.submission(client.acked[spec.request_id])
        try:
            settled = await handle.wait()
        except Fenced:
            return
        client.answers[spec.request_id] = (settled.status, settled.answer, settled.reason)
        world.record("answer", spec.request_id, settled.status, settled.answer, settled.reason)


async def _collect_store(
    result: RunResult, kind: StoreKind, scenario: Scenario, fs: SimFS, tmp: str | None
) -> None:
    """Read what is durable now, through a fresh store that holds no lease and repairs nothing."""
    try:
        if kind == "file":
            store: Any = FileStore(STORE_ROOT, fs=fs, fsync=scenario.fsync)
        else:
            assert tmp is not None
            store = SQLiteStore(str(Path(tmp) / "store.sqlite"), blocking=InlineBlocking())
        result.records = await store.read_records(scenario.conversation_id, 0)
        result.checkpoints = await store.load_checkpoints(scenario.conversation_id)
        if kind == "sqlite":
            await store.close()
    except StoreError as exc:
        result.store_error = f"{type(exc).__name__}: {exc}"
