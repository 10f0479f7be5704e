"""The child process of ``durable-sim realcrash``: the reference runtime on real files or a real
SQLite database, killed for real (SIGKILL) at one boundary of its trace.

    python -m sim.outputs.realcrash_child POINT_DIR PROCESS_NUMBER

The wiring is the simulator's (``sim/run/runner.py``) with real implementations underneath, and the
simulator's own boundary wrappers on top, so the boundary labels are the same by construction:

- files: ``OsFileSystem`` under ``POINT_DIR/store`` wrapped in ``sim.world.process.ProcessFS``;
- SQLite: ``SQLiteStore(POINT_DIR/store.sqlite)`` with a blocking port that runs each call on
  trio's worker threads (as in production; ``inline`` on request) and passes a boundary for every
  non-read label, like ``sim.world.process.SimBlocking``;
- every store operation is wrapped in ``sim.world.process.InstrumentedStore`` (``store.commit#n``,
...);
- time: ``ScaledClock``, the wall clock sped up by ``speedup`` (see its docstring);
- ids: ``{kind}-{n}`` counters, like the simulator's world ids, continued across children;
- the fake model answers with ``sim.world.model.script_answer`` after ``MODEL_LATENCY_S`` scenario
  seconds; the fake tools act on ``ExternalServices``, a SQLite file outside every child.

What outlives a child lives in ``POINT_DIR``, outside it: the store, the external services and
their effect ledger, and ``world.jsonl``, the harness's append-only record of the point (boundary
trace, commits, lease grants, ids issued, model calls, the client's acknowledgements and answers,
the crash). A restarted child reads that record to continue the boundary numbering, the label
counters, the ids, the client's view and the scenario clock where the killed child stopped.

The crash: when the boundary counter reaches a target ``(index, before|after)``, the child appends
the crash record and sends itself SIGKILL. Nothing runs after that instant: no ``finally``, no
``__aexit__``, no SQLite rollback but the one SQLite itself performs when the next child opens
the database. Writes already made survive (the page cache), as in the simulator's process crash.
Power loss is not attempted: a real process cannot lose the page cache.

Exit status of a child that is not killed: 0 its client session ended, 3 the runtime raised
(logged as an ``error`` entry, the oracles' I0), 4 the liveness bound passed.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import trio

from durable.config import RuntimeConfig
from durable.journal import Fenced
from durable.model import ModelError, ModelRequest, ModelResponse
from durable.ports import OsFileSystem, Ports
from durable.runtime import Conversation, Runtime
from durable.store.base import LeaseHeld
from durable.store.file import FileStore
from durable.store.sqlite import SQLiteStore
from durable.tools import ToolContext, ToolError, ToolRegistry, ToolSpec, Verification, VerifierFn
from sim.world.model import MODEL_LATENCY_S, script_answer
from sim.world.process import (
    InstrumentedStore,
    ProcessFS,
    cross,
    describe_exception,
    is_cancel_only,
)
from sim.world.scenario import ACTION_STEP_BASE, ActionDef, Scenario, ToolDef
from sim.world.seeded import seed_trio_scheduler
from sim.world.tools import marked_line

T = TypeVar("T")

CONFIG_NAME = "config.json"
LOG_NAME = "world.jsonl"
SERVICES_NAME = "services.sqlite"
STORE_DIR = "store"
SQLITE_NAME = "store.sqlite"

EXIT_ENDED = 0
EXIT_ERROR = 3
EXIT_LIVENESS = 4

_NUMBERED = re.compile(r"^([a-z_.]+)#(\d+)$")


# -- time ------------------------------------------------------------------------------------------


class ScaledClock:
    """Scenario seconds on the wall clock, sped up ``speedup`` times.

    ``now()`` is ``(time.time() - origin) * speedup``: one scenario second lasts ``1/speedup``
    real seconds, uniformly for everything the runtime and the fakes time (the model's latency,
    tool latencies, lease TTL and heartbeat, backoffs, the liveness bound). With the default
    speedup of 50 the fake model's 1 s latency takes 20 ms and the 30 s lease TTL 0.6 s. Every
    child of a point uses one time scale (lease expiries are compared across processes; trio's
    clock has a per-run origin): the origin is the first child's start, moved forward by the dead
    time between each kill and the next child's start (see ``main``). Real work takes scenario
    time too: 1 ms of I/O is 50 ms of scenario time. Sleeping is trio's real sleep, re-checked
    until the deadline has really passed.
    """

    def __init__(self, origin_wall_s: float, speedup: float) -> None:
        self.origin_wall_s = origin_wall_s
        self.speedup = speedup

    def now(self) -> float:
        return (time.time() - self.origin_wall_s) * self.speedup

    async def sleep_until(self, deadline_s: float) -> None:
        # Always one checkpoint, even for a deadline already past (as ``trio.sleep_until``, the
        # simulator's sleep, does): other runnable tasks go first in both worlds.
        await trio.sleep(max(deadline_s - self.now(), 0.0) / self.speedup)
        while (remaining := deadline_s - self.now()) > 0:  # woke a hair early (float rounding)
            await trio.sleep(remaining / self.speedup)


# -- the harness's record of a point -----------------------------------------------------------


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every complete entry of a ``world.jsonl`` (a line cut short by a kill is not one)."""
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_bytes().split(b"\n"):
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


class WorldLog:
    """Append-only JSON lines, one ``os.write`` each (a kill never leaves half of one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries = read_entries(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, entry: dict[str, Any], *, sync: bool = False) -> None:
        line = json.dumps(entry, separators=(",", ":"), ensure_ascii=True) + "\n"
        os.write(self._fd, line.encode("ascii"))
        if sync:
            os.fsync(self._fd)


@dataclass
class History:
    """What earlier children of this point left in ``world.jsonl``."""

    origin_wall_s: float | None = None
    crash_wall_s: float | None = None
    next_index: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    crash_times: list[float] = field(default_factory=list)
    acked: dict[str, str] = field(default_factory=dict)
    answers: dict[str, list[Any]] = field(default_factory=dict)
    actions_done: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, entries: list[dict[str, Any]]) -> History:
        h = cls()
        for e in entries:
            t = e["t"]
            if t == "origin":
                h.origin_wall_s = float(e["wall"])
            elif t == "b":
                h.next_index = max(h.next_index, int(e["i"]) + 1)
                m = _NUMBERED.match(e["label"])
                if m is not None:
                    h.counters[m[1]] = max(h.counters.get(m[1], 0), int(m[2]))
            elif t == "id":
                h.ids[e["k"]] = h.ids.get(e["k"], 0) + 1
            elif t == "crash":
                h.crash_times.append(float(e["time"]))
                h.crash_wall_s = float(e["wall"])
            elif t == "ack":
                h.acked[e["rid"]] = e["sid"]
            elif t == "answer":
                h.answers[e["rid"]] = [e["status"], e["answer"], e["reason"]]
            elif t == "action":
                h.actions_done.add(int(e["n"]))
        return h


# -- the machine: boundaries and the kill -------------------------------------------------------


class _NullWorld:
    """``InstrumentedStore`` records into the simulator's world trace; nothing to do here."""

    def record(self, kind: str, *fields: Any) -> None:
        del kind, fields


# The simulator's ``Machine`` keeps these records of what its processes did (the oracles read
# them from the ``RunResult`` fields of the same names); here each append is also written to the
# point's record, pickled (parent and children run the same code), so no field is lost.
MACHINE_RECORDS = ("commits", "grants", "accepted")


class _LoggedList(list):  # type: ignore[type-arg]
    """A list whose appends are also written to the point's record."""

    def __init__(self, log: WorldLog, name: str) -> None:
        super().__init__()
        self._log = log
        self._name = name

    def append(self, item: Any) -> None:
        super().append(item)
        data = base64.b64encode(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
        self._log.write({"t": "record", "name": self._name, "pickle": data.decode("ascii")})


def decode_record(entry: dict[str, Any]) -> Any:
    """The object a ``record`` entry holds (written by a child of this same code)."""
    return pickle.loads(base64.b64decode(entry["pickle"]))


class RealMachine:
    """The simulator's ``Machine`` interface (as ``ProcessFS`` and ``InstrumentedStore`` use it)
    over real boundaries: numbered across the children of a point, killed for real."""

    def __init__(
        self, log: WorldLog, history: History, clock: ScaledClock, targets: set[tuple[int, str]]
    ) -> None:
        self.log = log
        self.clock = clock
        self.targets = targets
        self.world = _NullWorld()
        self._next_index = history.next_index
        self._counters = dict(history.counters)
        # Read by InstrumentedStore on a lease release; the real mode has no graceful shutdown.
        self.handovers_with_pinned_request = 0
        for name in MACHINE_RECORDS:
            setattr(self, name, _LoggedList(log, name))

    def numbered(self, kind: str) -> int:
        n = self._counters.get(kind, 0) + 1
        self._counters[kind] = n
        return n

    def before(self, process: RealProcess, label: str) -> int:
        index = self._next_index
        self._next_index += 1
        self.log.write(
            {"t": "b", "i": index, "label": label, "p": process.id, "time": self.clock.now()}
        )
        if (index, "before") in self.targets:
            self.kill(process, index, "before", label)
        return index

    def after(self, process: RealProcess, index: int, label: str) -> None:
        if (index, "after") in self.targets:
            self.kill(process, index, "after", label)

    def crossing(self, process: RealProcess, label: str, fn: Callable[[], T]) -> T:
        return cross(self, process, label, fn)

    def kill(self, process: RealProcess, index: int, when: str, label: str) -> None:
        self.log.write(
            {
                "t": "crash",
                "i": index,
                "when": when,
                "label": label,
                "p": process.id,
                "time": self.clock.now(),
                "wall": time.time(),
                "pinned": process.pinned_request(),
            },
            sync=True,
        )
        os.kill(os.getpid(), signal.SIGKILL)
        while True:  # pragma: no cover - a signal to oneself is delivered before kill returns
            time.sleep(1.0)


class RealProcess:
    """The simulator's ``SimProcess`` interface for this OS process (always alive while it runs:
    a dead one runs no code at all)."""

    def __init__(self, machine: RealMachine, number: int) -> None:
        self.machine = machine
        self.id = f"p{number}"
        self.owner_id = f"owner-{number}"
        self.alive = True
        self.runtime: Runtime | None = None
        self.sqlite_stores: list[Any] = []
        self.released_lease = False  # set by InstrumentedStore (audited by the simulator only)

    def check_alive(self, what: str) -> None:
        del what

    def pinned_request(self) -> bool:
        runtime = self.runtime
        if runtime is None:
            return False
        return any(c.journal.state.pinned for c in runtime.open_conversations())


class CountingIds:
    """``{kind}-{n}`` with one counter per kind, continued across the children of a point."""

    def __init__(self, log: WorldLog, counts: dict[str, int]) -> None:
        self._log = log
        self._counts = dict(counts)

    def new(self, kind: str) -> str:
        n = self._counts.get(kind, 0) + 1
        self._counts[kind] = n
        self._log.write({"t": "id", "k": kind})
        return f"{kind}-{n}"


class BoundaryBlocking:
    """The blocking port for SQLite: reads are not boundaries, every other call is one (as in
    ``SimBlocking``). ``threads``: run the call on trio's worker threads, as production does."""

    def __init__(self, process: RealProcess, *, threads: bool) -> None:
        self._p = process
        self._threads = threads

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._threads:
            return await trio.to_thread.run_sync(fn)
        return fn()

    async def run(self, label: str, fn: Callable[[], T]) -> T:
        if label.endswith(".read"):
            return await self._call(fn)
        machine = self._p.machine
        index = machine.before(self._p, label)
        try:
            result = await self._call(fn)
        except Exception:  # as ``SimBlocking`` (``Machine.crossing``): a failed call has an after
            machine.after(self._p, index, label)
            raise
        machine.after(self._p, index, label)
        return result


# -- external services: one SQLite file outside every child ------------------------------------

_SERVICES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, content TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY, amount INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS fence (conversation_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS outbox (n INTEGER PRIMARY KEY AUTOINCREMENT, line TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER)",
    """CREATE TABLE IF NOT EXISTS ledger (
        n INTEGER PRIMARY KEY AUTOINCREMENT,
        service TEXT NOT NULL, op TEXT NOT NULL, call_id TEXT NOT NULL, key TEXT NOT NULL,
        epoch INTEGER NOT NULL, time_s REAL NOT NULL, boundary INTEGER NOT NULL,
        applied INTEGER NOT NULL, note TEXT NOT NULL
    )""",
)

Apply = Callable[[sqlite3.Connection], tuple[bool, str, object]]


class ExternalServices:
    """``sim.world.services.Services`` on a SQLite file: the same operations and semantics (payments
    dedupe by idempotency key and refuse a fencing epoch lower than the highest seen), and each
    effect is committed in one transaction *with* its ledger row, inside the boundary
    ``tool.effect:{service}.{op}#{call_id}``: a kill before it leaves neither, a kill after it
    leaves both."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=10000")

    @classmethod
    def create(cls, path: Path, files: dict[str, str]) -> ExternalServices:
        services = cls(path)
        conn = services._conn
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SERVICES_SCHEMA:
            conn.execute(statement)
        conn.executemany("INSERT INTO files (path, content) VALUES (?, ?)", sorted(files.items()))
        conn.execute("INSERT INTO counter (id, n) VALUES (0, 0)")
        conn.execute("COMMIT")
        return services

    def close(self) -> None:
        self._conn.close()

    # -- what the parent reads -----------------------------------------------------------------

    def ledger_rows(self) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT service, op, call_id, key, epoch, time_s, boundary, applied, note "
            "FROM ledger ORDER BY n"
        ).fetchall()
        keys = ("service", "op", "call_id", "key", "epoch", "time_s", "boundary", "applied", "note")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def files(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT path, content FROM files ORDER BY path").fetchall())

    def effects_of(self, call_id: str) -> int:
        (n,) = self._conn.execute(
            "SELECT COUNT(*) FROM ledger WHERE call_id = ? AND applied = 1", (call_id,)
        ).fetchone()
        return int(n)

    def has_line(self, path: str, line: str) -> bool:
        row = self._conn.execute("SELECT content FROM files WHERE path = ?", (path,)).fetchone()
        return row is not None and line in str(row[0]).splitlines()

    def charge_of(self, key: str) -> int | None:
        row = self._conn.execute("SELECT amount FROM charges WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    # -- effects -------------------------------------------------------------------------------

    def _effect(
        self,
        process: RealProcess,
        clock: ScaledClock,
        service: str,
        op: str,
        ctx: ToolContext,
        apply: Apply,
    ) -> str:
        machine = process.machine
        label = f"tool.effect:{service}.{op}#{ctx.call_id}"
        index = machine.before(process, label)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied, note, output = apply(conn)
            conn.execute(
                "INSERT INTO ledger (service, op, call_id, key, epoch, time_s, boundary, applied, "
                "note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    service,
                    op,
                    ctx.call_id,
                    ctx.idempotency_key,
                    ctx.epoch,
                    clock.now(),
                    index,
                    int(applied),
                    note,
                ),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        machine.after(process, index, label)
        if isinstance(output, ToolError):
            raise output
        return str(output)

    def read(self, process: RealProcess, clock: ScaledClock, ctx: ToolContext, path: str) -> str:
        def apply(conn: sqlite3.Connection) -> tuple[bool, str, object]:
            row = conn.execute("SELECT content FROM files WHERE path = ?", (path,)).fetchone()
            if row is None:
                return True, "missing", ToolError(f"no such file: {path}")
            return True, "", str(row[0])

        return self._effect(process, clock, "workspace", "read", ctx, apply)

    def append_line(
        self, process: RealProcess, clock: ScaledClock, ctx: ToolContext, path: str, line: str
    ) -> str:
        def apply(conn: sqlite3.Connection) -> tuple[bool, str, object]:
            row = conn.execute("SELECT content FROM files WHERE path = ?", (path,)).fetchone()
            current = str(row[0]) if row is not None else ""
            if current and not current.endswith("\n"):
                current += "\n"
            conn.execute(
                "INSERT INTO files (path, content) VALUES (?, ?) "
                "ON CONFLICT (path) DO UPDATE SET content = excluded.content",
                (path, current + line + "\n"),
            )
            return True, "", f"appended 1 line to {path}"

        return self._effect(process, clock, "workspace", "append_line", ctx, apply)

    def charge(
        self, process: RealProcess, clock: ScaledClock, ctx: ToolContext, amount: int
    ) -> str:
        conversation = ctx.conversation_id

        def apply(conn: sqlite3.Connection) -> tuple[bool, str, object]:
            row = conn.execute(
                "SELECT epoch FROM fence WHERE conversation_id = ?", (conversation,)
            ).fetchone()
            highest = int(row[0]) if row is not None else 0
            if ctx.epoch < highest:
                return False, "fenced", ToolError(f"stale fencing token {ctx.epoch} < {highest}")
            conn.execute(
                "INSERT INTO fence (conversation_id, epoch) VALUES (?, ?) "
                "ON CONFLICT (conversation_id) DO UPDATE SET epoch = excluded.epoch",
                (conversation, ctx.epoch),
            )
            known = conn.execute(
                "SELECT amount FROM charges WHERE key = ?", (ctx.idempotency_key,)
            ).fetchone()
            if known is not None:
                return False, "deduplicated", f"charged {known[0]}"
            conn.execute(
                "INSERT INTO charges (key, amount) VALUES (?, ?)", (ctx.idempotency_key, amount)
            )
            return True, "", f"charged {amount}"

        return self._effect(process, clock, "payments", "charge", ctx, apply)

    def send(
        self, process: RealProcess, clock: ScaledClock, ctx: ToolContext, to: str, subject: str
    ) -> str:
        def apply(conn: sqlite3.Connection) -> tuple[bool, str, object]:
            conn.execute("INSERT INTO outbox (line) VALUES (?)", (f"{to}: {subject}",))
            return True, "", f"sent to {to}"

        return self._effect(process, clock, "outbox", "send", ctx, apply)

    def increment(self, process: RealProcess, clock: ScaledClock, ctx: ToolContext) -> str:
        def apply(conn: sqlite3.Connection) -> tuple[bool, str, object]:
            conn.execute("UPDATE counter SET n = n + 1 WHERE id = 0")
            (n,) = conn.execute("SELECT n FROM counter WHERE id = 0").fetchone()
            return True, "", f"counter={n}"

        return self._effect(process, clock, "counter", "increment", ctx, apply)


# -- fake model and fake tools ------------------------------------------------------------------


class RealFakeModel:
    """``sim.world.model.FakeModel`` on the scaled wall clock: the same script, latency and
    boundary."""

    def __init__(
        self, scenario: Scenario, process: RealProcess, clock: ScaledClock, log: WorldLog
    ) -> None:
        self._scenario = scenario
        self._p = process
        self._clock = clock
        self._log = log

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self._clock.sleep_until(self._clock.now() + MODEL_LATENCY_S)
        machine = self._p.machine
        label = f"model.call#{machine.numbered('model.call')}"
        index = machine.before(self._p, label)
        try:
            response: ModelResponse | ModelError = script_answer(self._scenario, request)
        except ModelError as error:
            response = error
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        outcome = "error" if isinstance(response, ModelError) else "ok"
        self._log.write(
            {
                "t": "model",
                "i": index,
                "p": self._p.id,
                "task": request.task_id,
                "attempt": request.attempt,
                "users": users,
                "time": self._clock.now(),
                "outcome": outcome,
            }
        )
        machine.after(self._p, index, label)
        if isinstance(response, ModelError):
            raise response
        return response


def build_tools(
    scenario: Scenario, services: ExternalServices, process: RealProcess, clock: ScaledClock
) -> ToolRegistry:
    return ToolRegistry([_spec(t, services, process, clock) for t in scenario.tools])


def _spec(
    tool: ToolDef, services: ExternalServices, process: RealProcess, clock: ScaledClock
) -> ToolSpec:
    op = tool.operation

    async def fn(arguments: dict[str, Any], ctx: ToolContext) -> str:
        if tool.latency_s:
            await clock.sleep_until(clock.now() + tool.latency_s)
        if op == "workspace.read":
            return services.read(process, clock, ctx, str(arguments.get("path", "")))
        if op == "workspace.append_line":
            path = str(arguments.get("path", ""))
            return services.append_line(process, clock, ctx, path, marked_line(arguments, ctx))
        if op == "payments.charge":
            return services.charge(process, clock, ctx, int(arguments.get("amount", 0)))
        if op == "outbox.send":
            to, subject = str(arguments.get("to", "")), str(arguments.get("subject", ""))
            return services.send(process, clock, ctx, to, subject)
        assert op == "counter.increment", op
        return services.increment(process, clock, ctx)

    verifier: VerifierFn | None = None
    if tool.policy == "verify_then_continue":
        verifier = _verifier(op, services)
    return ToolSpec(name=tool.name, fn=fn, policy=tool.policy, verifier=verifier)


def _verifier(op: str, services: ExternalServices) -> VerifierFn:
    async def verify(arguments: dict[str, Any], ctx: ToolContext) -> Verification:
        if op == "workspace.append_line":
            path = str(arguments.get("path", ""))
            if services.has_line(path, marked_line(arguments, ctx)):
                return Verification(status="applied", output=f"appended 1 line to {path}")
            return Verification(status="not_applied")
        if op == "payments.charge":
            amount = services.charge_of(ctx.idempotency_key)
            if amount is not None:
                return Verification(status="applied", output=f"charged {amount}")
            return Verification(status="not_applied")
        return Verification(status="unknown", output=f"{op} cannot be verified")

    return verify


# -- the client session (as sim.run.runner's, with the client's view kept outside the child) -------


@dataclass
class Child:
    scenario: Scenario
    config: RuntimeConfig
    store_kind: str
    point_dir: Path
    log: WorldLog
    history: History
    clock: ScaledClock
    machine: RealMachine
    process: RealProcess
    services: ExternalServices
    threads: bool


def _ack(child: Child, rid: str, sid: str) -> None:
    child.history.acked[rid] = sid
    child.log.write({"t": "ack", "rid": rid, "sid": sid, "time": child.clock.now()}, sync=True)


async def _client_session(child: Child, runtime: Runtime) -> None:
    scenario, log = child.scenario, child.log
    try:
        conversation = await runtime.conversation(scenario.conversation_id)
    except LeaseHeld:
        log.write({"t": "standby", "p": child.process.id})
        return
    async with trio.open_nursery() as nursery:
        if scenario.operator is not None:
            nursery.start_soon(_operator, child, conversation)
        try:
            await _client_steps(child, conversation)
            for spec in scenario.inputs:
                handle = conversation.submission(child.history.acked[spec.request_id])
                settled = await handle.wait()
                child.history.answers[spec.request_id] = [
                    settled.status,
                    settled.answer,
                    settled.reason,
                ]
                log.write(
                    {
                        "t": "answer",
                        "rid": spec.request_id,
                        "status": settled.status,
                        "answer": settled.answer,
                        "reason": settled.reason,
                    },
                    sync=True,
                )
        except Fenced:
            log.write({"t": "fenced", "p": child.process.id})
        nursery.cancel_scope.cancel()


async def _client_steps(child: Child, conversation: Conversation) -> None:
    scenario, history, log, clock = child.scenario, child.history, child.log, child.clock
    steps: list[tuple[float, int, Any]] = [(i.at_s, n, i) for n, i in enumerate(scenario.inputs)]
    steps += [(a.at_s, ACTION_STEP_BASE + n, a) for n, a in enumerate(scenario.actions)]
    for at_s, number, step in sorted(steps, key=lambda t: (t[0], t[1])):
        if isinstance(step, ActionDef):
            if number in history.actions_done:
                continue
            await clock.sleep_until(at_s)
            await conversation.abort(reason="client abort")
            history.actions_done.add(number)
            log.write({"t": "action", "n": number, "kind": step.kind}, sync=True)
            continue
        known = history.acked.get(step.request_id)
        if known is not None and known in conversation.state.submissions:
            if not scenario.client_resends:
                continue
        elif known is not None:
            log.write({"t": "lost_ack", "rid": step.request_id}, sync=True)
        await clock.sleep_until(at_s)
        handle = await conversation.submit(step.content, request_id=step.request_id)
        if known is not None and handle.id != known:
            log.write(
                {"t": "remapped", "rid": step.request_id, "first": known, "then": handle.id},
                sync=True,
            )
        _ack(child, step.request_id, handle.id)


async def _operator(child: Child, conversation: Conversation) -> None:
    operator = child.scenario.operator
    assert operator is not None
    clock = child.clock
    while True:
        for intent in conversation.pending_reconciliations():
            await clock.sleep_until(clock.now() + operator.delay_s)
            if intent.result_sequence is not None:
                continue
            applied = child.services.effects_of(intent.call_id) > 0
            if operator.decision == "check_ledger" and applied:
                output, is_error = f"operator confirmed: {intent.tool} was applied", False
            else:
                output, is_error = f"operator: {intent.tool} not applied, skipped", True
            await conversation.resolve(intent.call_id, output=output, is_error=is_error)
        await conversation.journal.wait_changed()


# -- one child's life ---------------------------------------------------------------------------


def _store(child: Child) -> InstrumentedStore:
    process = child.process
    if child.store_kind == "file":
        root = str(child.point_dir / STORE_DIR)
        inner: Any = FileStore(
            root, fs=ProcessFS(process, OsFileSystem(), root), fsync=child.scenario.fsync
        )  # type: ignore[arg-type]
    else:
        inner = SQLiteStore(
            str(child.point_dir / SQLITE_NAME),
            blocking=BoundaryBlocking(process, threads=child.threads),
        )
    return InstrumentedStore(inner, process)  # type: ignore[arg-type]


async def _run_process(child: Child) -> int:
    process = child.process
    ports = Ports(
        clock=child.clock,
        fs=ProcessFS(process, OsFileSystem(), str(child.point_dir / STORE_DIR)),  # type: ignore[arg-type]
        blocking=BoundaryBlocking(process, threads=child.threads),
        ids=CountingIds(child.log, child.history.ids),
    )
    model = RealFakeModel(child.scenario, process, child.clock, child.log)
    tools = build_tools(child.scenario, child.services, process, child.clock)
    try:
        async with Runtime.open(
            store=_store(child),  # type: ignore[arg-type]
            model=model,
            tools=tools,
            ports=ports,
            config=child.config,
            owner_id=process.owner_id,
        ) as runtime:
            process.runtime = runtime
            await _client_session(child, runtime)
    except BaseException as exc:
        if is_cancel_only(exc):
            raise  # the liveness bound: not the process's doing
        if isinstance(exc, Exception | BaseExceptionGroup):
            message = f"{process.id}: {type(exc).__name__}: {describe_exception(exc)}"
            child.log.write({"t": "error", "msg": message}, sync=True)
            return EXIT_ERROR
        raise
    child.log.write({"t": "ended", "p": process.id, "time": child.clock.now()})
    return EXIT_ENDED


async def _child_main(child: Child) -> int:
    # The liveness bound, as in the simulator: scenario time after the start or the latest crash.
    bound = child.scenario.liveness_bound_s
    deadline_s = max([bound] + [t + bound for t in child.history.crash_times])
    real_left = (deadline_s - child.clock.now()) / child.clock.speedup
    with trio.move_on_after(max(real_left, 0.0)) as scope:
        code = await _run_process(child)
    if scope.cancelled_caught:
        child.log.write({"t": "liveness", "time": child.clock.now()}, sync=True)
        return EXIT_LIVENESS
    return code


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(
            "usage: python -m sim.outputs.realcrash_child POINT_DIR PROCESS_NUMBER", file=sys.stderr
        )
        return 2
    point_dir, number = Path(args[0]), int(args[1])
    cfg = json.loads((point_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    scenario = Scenario.model_validate(cfg["scenario"])
    log = WorldLog(point_dir / LOG_NAME)
    history = History.of(log.entries)
    # Scenario time starts at the first child's start and stands still between a kill and the
    # next child's start: the simulator restarts a process at the crash instant, and a child's
    # interpreter start-up (hundreds of scenario seconds when sped up) must not shift the client's
    # timed steps or the lease wait relative to it.
    origin = history.origin_wall_s
    if origin is None:
        origin = time.time()
        log.write({"t": "origin", "wall": origin})
    elif history.crash_wall_s is not None:
        origin += time.time() - history.crash_wall_s
        log.write({"t": "origin", "wall": origin})
    clock = ScaledClock(origin, float(cfg["speedup"]))
    targets = {(int(i), str(w)) for i, w in cfg["targets"]}
    machine = RealMachine(log, history, clock, targets)
    process = RealProcess(machine, number)
    log.write({"t": "spawn", "p": process.id, "time": clock.now()})
    config = RuntimeConfig(
        model_name="fake",
        lease_ttl_s=scenario.lease_ttl_s,
        heartbeat_s=scenario.heartbeat_s,
        checkpoint_every=scenario.checkpoint_every,
        budget=scenario.budget,
        max_model_attempts=scenario.max_model_attempts,
    )
    child = Child(
        scenario=scenario,
        config=config,
        store_kind=str(cfg["store"]),
        point_dir=point_dir,
        log=log,
        history=history,
        clock=clock,
        machine=machine,
        process=process,
        services=ExternalServices(point_dir / SERVICES_NAME),
        threads=cfg.get("blocking", "thread") == "thread",
    )
    seed_trio_scheduler(int(cfg["seed"]))
    return trio.run(_child_main, child)


if __name__ == "__main__":
    sys.exit(main())
