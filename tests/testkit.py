"""Shared helpers for the runtime, recovery-policy, reducer and inspect tests.

Everything here is deterministic: ids come from a counter, time from trio's clock (the tests run
under pytest-trio's ``autojump_clock``, a ``MockClock`` that jumps whenever every task is blocked),
and the model and tools are scripted. A "process" is one ``Runtime.open`` on a fresh store object;
a *crash* cancels the scope around it mid-flight, so nothing more reaches the store (no lease
release, no settling), which is exactly what a ``kill -9`` looks like to the store.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
import trio

from durable.config import RuntimeConfig
from durable.events import EventRecord, InputAccepted, LeaseAcquired, PlannedEdit
from durable.model import ModelError, ModelRequest, ModelResponse, ProposedCall
from durable.ports import FileSystem, InlineBlocking, OsFileSystem, Ports, TrioClock
from durable.runtime import Conversation, Runtime
from durable.state import Submission
from durable.store import FileStore, Lease, SQLiteStore, Store
from durable.tools import (
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolSpec,
    Verification,
    content_hash,
)
from sim.targets.protocol import installed
from sim.world.stores import StoreKind

CONV = "conv-1"
# Virtual seconds: a test that deadlocks fails here instead of spinning the mock clock forever.
TIMEOUT_S = 10_000.0

# The runtime's tests run on the two stores that need no server (Postgres has its own tests).
STORE_KINDS: tuple[StoreKind, ...] = (StoreKind.FILE, StoreKind.SQLITE)


class SimulatedCrash(BaseException):
    """Raised by a crashing file system: a ``BaseException`` so no ``except Exception`` in the
    runtime can mistake the death of the process for a tool or store error."""


# -- ids, ports, stores ----------------------------------------------------------------------------


class CounterIds:
    """Deterministic ids. Share one instance across the "processes" of a test: ids must stay
    unique across restarts exactly as real random ids would."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._counter = itertools.count(1)

    def new(self, kind: str) -> str:
        return f"{kind}-{self._prefix}{next(self._counter)}"


def make_ports(ids: CounterIds, fs: FileSystem | None = None) -> Ports:
    return Ports(clock=TrioClock(), fs=fs or OsFileSystem(), blocking=InlineBlocking(), ids=ids)


class Stores:
    """A factory of fresh store objects on one path: each call is what a restarted process gets.

    ``fs`` replaces the file system of a ``FileStore`` (used to crash at a chosen file operation);
    SQLite connections are abandoned by ``close`` (call it at teardown).
    """

    def __init__(self, kind: StoreKind, root: Path, *, fsync: bool = True) -> None:
        self.kind = kind
        self.root = root
        self.fsync = fsync
        self._opened: list[SQLiteStore] = []

    @property
    def path(self) -> Path:
        return self.root / ("store" if self.kind == "file" else "store.db")

    def __call__(self, fs: FileSystem | None = None) -> Store:
        if self.kind == "file":
            return FileStore(str(self.path), fs=fs or OsFileSystem(), fsync=self.fsync)
        store = SQLiteStore(str(self.path), blocking=InlineBlocking())
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            store.abandon()
        self._opened.clear()

    async def records(self, conversation_id: str = CONV) -> list[EventRecord]:
        """The committed log as a fresh reader sees it (no repair)."""
        return await self().read_records(conversation_id)


def event_types(records: Iterable[EventRecord]) -> list[str]:
    return [r.event.type for r in records]


def of_type(records: Iterable[EventRecord], kind: str) -> list[Any]:
    return [r.event for r in records if r.event.type == kind]


def assert_contiguous(records: list[EventRecord]) -> None:
    assert [r.sequence for r in records] == list(range(1, len(records) + 1))


# -- hand-built record batches -------------------------------------------------------------------


def sealed_batch(
    events: list[Any],
    *,
    start: int,
    owner_id: str,
    epoch: int,
    conversation_id: str = CONV,
    batch: str | None = None,
) -> list[EventRecord]:
    """``events`` as one sealed commit from sequence ``start``, as ``Journal.commit`` seals one:
    ``batch_index`` counts from 0 and only the last record has ``last_in_batch``. Event ids are
    ``evt-{sequence}`` and the records are stamped at ``float(sequence)``, so a log built of
    several batches has unique, deterministic ids. The one builder of hand-made batches for the
    tests of ``durable/``."""
    batch_id = batch if batch is not None else f"batch-{epoch}-{start}"
    return [
        EventRecord(
            conversation_id=conversation_id,
            sequence=start + i,
            event_id=f"evt-{start + i}",
            recorded_at_s=float(start + i),
            batch=batch_id,
            batch_index=i,
            last_in_batch=i == len(events) - 1,
            owner_id=owner_id,
            epoch=epoch,
            event=event,
        ).sealed()
        for i, event in enumerate(events)
    ]


def input_batch(
    start: int, count: int, *, lease: Lease, conversation_id: str = CONV, batch: str | None = None
) -> list[EventRecord]:
    """A sealed batch of ``count`` ``input_accepted`` records from ``start``, written under
    ``lease`` (its submission ids name the epoch, so two owners' inputs never collide; the
    content is not ASCII, so lines carry ``\\u`` escapes)."""
    events = [
        InputAccepted(
            submission_id=f"sub-{lease.epoch}-{start + i}",
            request_id=None,
            content=f"hello {start + i} \u2713",
        )
        for i in range(count)
    ]
    return sealed_batch(
        events,
        start=start,
        owner_id=lease.owner_id,
        epoch=lease.epoch,
        conversation_id=conversation_id,
        batch=batch,
    )


def lease_batch(sequence: int, lease: Lease) -> list[EventRecord]:
    """The ``lease_acquired`` commit a new owner makes first."""
    acquired = LeaseAcquired(
        owner_id=lease.owner_id, epoch=lease.epoch, expires_at_s=lease.expires_at_s
    )
    return sealed_batch(
        [acquired],
        start=sequence,
        owner_id=lease.owner_id,
        epoch=lease.epoch,
        conversation_id=lease.conversation_id,
        batch=f"lease-{lease.epoch}",
    )


def one_commit_each(
    events: list[Any], *, start: int = 1, owner_id: str = "o", epoch: int = 1
) -> list[EventRecord]:
    """Each of ``events`` as a commit of its own, from sequence ``start`` (a reducer test's log,
    where commit boundaries do not matter)."""
    return [
        record
        for i, event in enumerate(events)
        for record in sealed_batch(
            [event], start=start + i, owner_id=owner_id, epoch=epoch, batch=f"b{start + i}"
        )
    ]


# -- crashing ------------------------------------------------------------------------------------


class Crasher:
    """Kills the current "process": cancels the scope its runtime runs in. ``scope`` is set by
    ``Harness.crash_run``; ``crashed`` tells the test the crash point was really reached."""

    def __init__(self) -> None:
        self.scope: trio.CancelScope | None = None
        self.crashed = False

    def _kill(self) -> None:
        assert self.scope is not None, "crash outside Harness.crash_run"
        self.crashed = True
        self.scope.cancel()

    async def crash(self) -> None:
        """From async code (a tool): the process dies here and never returns."""
        self._kill()
        await trio.sleep_forever()

    def crash_sync(self) -> None:
        """From sync code (a file operation): die, and unwind with ``SimulatedCrash``."""
        self._kill()
        raise SimulatedCrash


Trigger = Callable[[str, tuple[Any, ...]], Literal["before", "after"] | None]


class CrashingFS:
    """The OS file system, except that ``trigger(op, args)`` may crash the process just before or
    just after one operation (``op`` is the method name). It fires once."""

    def __init__(self, crasher: Crasher, trigger: Trigger) -> None:
        self._inner = OsFileSystem()
        self._crasher = crasher
        self._trigger = trigger
        self.fired = False

    def _op(self, op: str, *args: Any) -> Any:
        when = None if self.fired else self._trigger(op, args)
        if when == "before":
            self.fired = True
            self._crasher.crash_sync()
        result = getattr(self._inner, op)(*args)
        if when == "after":
            self.fired = True
            self._crasher.crash_sync()
        return result

    def makedirs(self, path: str) -> None:
        self._op("makedirs", path)

    def exists(self, path: str) -> bool:
        return bool(self._op("exists", path))

    def read(self, path: str) -> bytes:
        return bytes(self._op("read", path))

    def size(self, path: str) -> int:
        return int(self._op("size", path))

    def write(self, path: str, data: bytes) -> None:
        self._op("write", path, data)

    def append(self, path: str, data: bytes) -> None:
        self._op("append", path, data)

    def truncate(self, path: str, size: int) -> None:
        self._op("truncate", path, size)

    def fsync(self, path: str) -> None:
        self._op("fsync", path)

    def rename(self, src: str, dst: str) -> None:
        self._op("rename", src, dst)

    def fsync_dir(self, path: str) -> None:
        self._op("fsync_dir", path)

    def listdir(self, path: str) -> list[str]:
        return list(self._op("listdir", path))

    def unlink(self, path: str) -> None:
        self._op("unlink", path)

    def exclusive(self, path: str) -> AbstractContextManager[None]:
        return self._inner.exclusive(path)  # not a crash point: it writes nothing


# -- models ----------------------------------------------------------------------------------------


def answer(text: str, tokens: int = 0) -> ModelResponse:
    return ModelResponse(text=text, tokens=tokens)


def call(tool: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(tool_calls=[ProposedCall(tool=tool, arguments=arguments)])


Step = ModelResponse | ModelError | Callable[[ModelRequest], Awaitable[ModelResponse]]


class ScriptedModel:
    """Answers requests from a script, one step per request, in order; ``default`` once the script
    is used up (an exhausted script without a default fails the test loudly). A step is a
    response, a ``ModelError`` to raise, or an async function of the request."""

    def __init__(self, steps: Iterable[Step] = (), *, default: Step | None = None) -> None:
        self.steps = list(steps)
        self.default = default
        self.requests: list[ModelRequest] = []
        self.times: list[float] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        self.times.append(trio.current_time())
        if self.steps:
            step = self.steps.pop(0)
        elif self.default is not None:
            step = self.default
        else:
            raise AssertionError(f"model script exhausted at request {len(self.requests)}")
        if isinstance(step, ModelError):
            raise step
        if isinstance(step, ModelResponse):
            return step
        return await step(request)


class ToolLoopModel:
    """Calls ``tool`` ``rounds`` times per user message, then answers with the last tool output.

    Decides from the request alone, so it behaves the same however many processes ask it."""

    def __init__(self, tool: str, *, rounds: int = 1, **arguments: Any) -> None:
        self.tool = tool
        self.rounds = rounds
        self.arguments = arguments
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        since_user = list(
            itertools.takewhile(lambda m: m["role"] != "user", reversed(request.messages))
        )
        tool_messages = [m for m in since_user if m["role"] == "tool"]
        if len(tool_messages) < self.rounds:
            return call(self.tool, **self.arguments)
        return answer(f"answer after: {tool_messages[0]['content']}")


# -- tools -----------------------------------------------------------------------------------------

CrashPoint = Literal["before_effect", "after_effect"]


class EffectTool:
    """A tool with an external effect kept in a ledger, like a payments API.

    ``contexts`` has one entry per execution attempt; ``effects`` one per applied effect. With
    ``dedupe`` the service applies each idempotency key once. ``crash_at`` kills the process (via
    ``crasher``) at that point of the first attempt only; ``hang`` makes the first attempt block
    forever after setting ``started`` (for aborts)."""

    def __init__(
        self,
        name: str = "pay",
        policy: Any = "unsafe",
        *,
        dedupe: bool = False,
        crasher: Crasher | None = None,
        crash_at: CrashPoint | None = None,
        verdict: Literal["applied", "not_applied", "unknown", "raise"] | None = None,
        hang: bool = False,
    ) -> None:
        self.name = name
        self.policy = policy
        self.dedupe = dedupe
        self.crasher = crasher
        self.crash_at = crash_at
        self.verdict = verdict
        self.hang = hang
        self.started = trio.Event()
        self.contexts: list[ToolContext] = []
        self.effects: list[str] = []
        self.verifications: list[ToolContext] = []

    async def _maybe_crash(self, point: CrashPoint) -> None:
        if self.crash_at == point and len(self.contexts) == 1:
            assert self.crasher is not None
            await self.crasher.crash()

    async def fn(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        self.contexts.append(ctx)
        self.started.set()
        if self.hang and len(self.contexts) == 1:
            await trio.sleep_forever()
        await self._maybe_crash("before_effect")
        if not (self.dedupe and ctx.idempotency_key in self.effects):
            self.effects.append(ctx.idempotency_key)
        await self._maybe_crash("after_effect")
        return f"{self.name} applied {ctx.idempotency_key}"

    async def verify(self, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
        self.verifications.append(ctx)
        if self.verdict == "raise":
            raise RuntimeError("verifier backend down")
        assert self.verdict is not None
        return Verification(status=self.verdict, output=f"{self.name} verified {ctx.call_id}")

    def spec(self) -> ToolSpec:
        verifier = self.verify if self.policy == "verify_then_continue" else None
        return ToolSpec(name=self.name, fn=self.fn, policy=self.policy, verifier=verifier)


#: The criterion ``Workspace``'s validation tool checks.
CRITERION = "tests pass"


class Workspace:
    """Files outside every process, with an edit tool (replace ``old`` by ``new``, applied only
    to the content it was planned against) and a validation tool (passes if ``expect`` is in the
    file). ``crash_after_edit`` kills the process right after the first edit's effect."""

    def __init__(self, files: dict[str, str], crasher: Crasher | None = None) -> None:
        self.files = dict(files)
        self.crasher = crasher
        self.crash_after_edit = False
        self.crash_before_edit = False
        self.edits = 0
        self.verdicts: list[str] = []

    async def plan(self, arguments: dict[str, Any]) -> PlannedEdit:
        path = str(arguments["path"])
        content = self.files.get(path)
        after = (content or "").replace(str(arguments["old"]), str(arguments["new"]), 1)
        return PlannedEdit(
            path=path, before_hash=content_hash(content), after_hash=content_hash(after)
        )

    async def edit(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        assert ctx.edit is not None
        path = str(arguments["path"])
        if self.crash_before_edit and self.crasher is not None:
            self.crash_before_edit = False
            await self.crasher.crash()
        if content_hash(self.files.get(path)) != ctx.edit.before_hash:
            raise ToolError(f"{path} changed since the edit was planned")
        self.files[path] = self.files[path].replace(str(arguments["old"]), str(arguments["new"]))
        self.edits += 1
        if self.crash_after_edit and self.crasher is not None:
            self.crash_after_edit = False
            await self.crasher.crash()
        return f"edited {path}"

    async def verify(self, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
        assert ctx.edit is not None
        current = content_hash(self.files.get(ctx.edit.path))
        status: dict[str, Literal["applied", "not_applied"]] = {
            ctx.edit.after_hash: "applied",
            ctx.edit.before_hash: "not_applied",
        }
        verdict: Literal["applied", "not_applied", "unknown"] = status.get(current, "unknown")
        self.verdicts.append(verdict)
        return Verification(status=verdict, output=f"edited {ctx.edit.path}")

    async def check(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        if str(arguments["expect"]) not in self.files.get(str(arguments["path"]), ""):
            raise ToolError("check failed")
        return "check passed"

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="edit",
                fn=self.edit,
                policy="verify_then_continue",
                verifier=self.verify,
                plan_edit=self.plan,
            ),
            ToolSpec(name="test", fn=self.check, policy="replay_safe", validates=CRITERION),
        ]


# -- processes -------------------------------------------------------------------------------------


class Harness:
    """One test's world: a store path, a model, tools, a config and one id generator shared by
    every process of the test (as the external world is)."""

    def __init__(
        self,
        stores: Stores,
        *,
        model: Any,
        tools: Iterable[ToolSpec] = (),
        config: RuntimeConfig | None = None,
    ) -> None:
        self.stores = stores
        self.model = model
        self.specs = list(tools)
        self.config = config or RuntimeConfig()
        self.ids = CounterIds()
        self.crasher = Crasher()

    @asynccontextmanager
    async def process(self, owner: str, *, fs: FileSystem | None = None) -> AsyncIterator[Runtime]:
        """A process that exits normally at the end of the block (leases released)."""
        store = self.stores(fs)
        try:
            async with Runtime.open(
                store=store,
                model=self.model,
                tools=ToolRegistry(self.specs),
                ports=make_ports(self.ids, fs),
                config=self.config,
                owner_id=owner,
            ) as runtime:
                yield runtime
        finally:
            if isinstance(store, SQLiteStore):
                store.abandon()

    async def crash_run(
        self,
        owner: str,
        body: Callable[[Runtime], Awaitable[None]],
        *,
        fs: FileSystem | None = None,
        must_crash: bool = True,
    ) -> bool:
        """Run ``body`` in a process that ``self.crasher`` kills before it ends (unless
        ``must_crash`` is false: then the process may also end normally). Returns whether it
        crashed."""
        self.crasher.crashed = False
        store = self.stores(fs)
        try:
            with trio.fail_after(TIMEOUT_S), trio.CancelScope() as scope:
                self.crasher.scope = scope
                async with Runtime.open(
                    store=store,
                    model=self.model,
                    tools=ToolRegistry(self.specs),
                    ports=make_ports(self.ids, fs),
                    config=self.config,
                    owner_id=owner,
                ) as runtime:
                    await body(runtime)
        except* SimulatedCrash:
            pass
        finally:
            self.crasher.scope = None
            if isinstance(store, SQLiteStore):
                store.abandon()
        assert self.crasher.crashed or not must_crash, "the crash point was never reached"
        return self.crasher.crashed


async def settled(conversation: Conversation, submission_id: str) -> Submission:
    with trio.fail_after(TIMEOUT_S):
        return await conversation.submission(submission_id).wait()


async def wait_until(predicate: Callable[[], bool], *, step_s: float = 0.5) -> None:
    """Poll ``predicate`` on the (virtual) clock."""
    with trio.fail_after(TIMEOUT_S):
        while not predicate():
            await trio.sleep(step_s)


#: The repository's root: tests live at different depths (tests/durable, tests/sim/explore, ...).
REPO = Path(__file__).resolve().parent.parent


def needs(module: str, *, reason: str) -> pytest.MarkDecorator:
    """Skip a test module's tests when ``module`` (an extra's package, dotted or not) is not
    installed, without importing it: ``pytest.importorskip`` at module level imports the
    framework at collection, in every xdist worker, and a worker that holds every framework is
    twice the size, which doubles what each fork of a forking sweep costs there (measured in
    docs/performance.md, "The test tiers"). A test imports the framework itself when it runs."""
    return pytest.mark.skipif(not installed(module), reason=reason)


#: ``python -c`` code that resets SIGINT to its default and then becomes ``python ARGS...``
#: (``exec`` keeps a default disposition; the new interpreter installs its KeyboardInterrupt).
_SIGINT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def python_with_sigint(*args: str) -> list[str]:
    """A command line running ``python ARGS...`` with SIGINT at its default disposition, as a
    terminal's foreground job has it. A job a non-interactive shell starts in the background
    (``make check &`` in a CI script, ``nohup``) ignores SIGINT, and so does every process it
    starts: a command rightly keeps ignoring Ctrl-C then (``sim.explore.interrupts``), and a
    test that sends it SIGINT would see the stop "lost" (exit 0)."""
    return [sys.executable, "-c", _SIGINT_DEFAULT, *args]


def terminated(
    command: list[str], tmp_path: Path, *, started: str, sigint_ignored: bool = False
) -> tuple[int, str]:
    """Start ``python -m sim COMMAND...`` with its own temporary directory, wait until a
    directory matching ``started`` appears there (the command has begun its work), send
    SIGTERM, and return its exit status and stderr once it has stopped, asserting that it left
    no temporary directory behind (what a cancelled CI job needs). ``sigint_ignored``: start it
    with SIGINT ignored, as a POSIX shell starts a script's ``&`` job."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "sim", *command],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if sigint_ignored
        else None,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(scratch.glob(started)):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"{command[0]} never started: no {started}"
            time.sleep(0.05)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert list(scratch.iterdir()) == [], "temporary directories left behind"
    return process.returncode, stderr


def run_lease_race(
    tmp_path: Path,
    worker: Callable[..., None],
    args: Callable[[str, str, Any], tuple[Any, ...]],
    *,
    workers: int,
    join_timeout_s: float,
) -> tuple[list[int], list[str]]:
    """Race ``workers`` forked processes for one lease: each runs ``worker(*args(owner, out,
    start))``, waits on the shared ``start`` event, and writes ``{"won": [epochs], "errors":
    [...]}`` to ``out``. Returns every epoch won and every error, over all workers; a worker that
    hangs past ``join_timeout_s`` or exits non-zero fails the test."""
    context = multiprocessing.get_context("fork")  # the parent holds no store to inherit
    start = context.Event()
    outs = [str(tmp_path / f"worker-{n}.json") for n in range(workers)]
    procs = [
        context.Process(target=worker, args=args(f"worker-{n}", outs[n], start))
        for n in range(workers)
    ]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(join_timeout_s)
        if proc.is_alive():
            proc.kill()
            raise AssertionError(f"a racing worker hung for {join_timeout_s} s")
        assert proc.exitcode == 0, f"a racing worker failed (exit {proc.exitcode})"
    won: list[int] = []
    errors: list[str] = []
    for out in outs:
        result = json.loads(Path(out).read_text(encoding="utf-8"))
        won += result["won"]
        errors += result["errors"]
    return won, errors
