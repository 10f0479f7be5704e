"""What one worker runs: the payment agent (a scripted model and two ledgered tools) on a real
store, every store operation and tool effect a crash boundary of the worker's own. The store is a
``FileStore`` directory, a SQLite database or a schema on a PostgreSQL server.

The agent is ``idempotent_payment``'s, for every conversation: the model asks to charge the
conversation's invoice, then to send its receipt, then answers. ``charge_card`` is declared
``idempotent`` (the payment service deduplicates by the runtime's idempotency key, so it is
charged exactly once whatever crashes); ``send_receipt`` is ``unsafe`` (never re-run after a
crash, so at most one receipt). The judge (``sim.targets.workers.judge``) holds the ledger to
exactly these promises.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from durable.events import EventRecord
from durable.model import ModelRequest, ModelResponse, ProposedCall
from durable.ports import OsFileSystem, ThreadBlocking
from durable.store import FileStore, SQLiteStore
from durable.store.base import Lease, Store
from durable.tools import ToolContext, ToolRegistry, ToolSpec
from sim.targets.boundaries import Boundaries
from sim.targets.ledger import Ledger
from sim.targets.workers.takeover import WorkerPauses
from sim.world.stores import StoreKind

T = TypeVar("T")

#: How long the scripted model takes to answer: long enough that a pause or a kill often lands
#: while a call is in flight, short enough that a fleet finishes in seconds.
MODEL_LATENCY_S = 0.05


def open_store(
    kind: StoreKind | str, store_path: Path, *, conninfo: str = "", namespace: str = ""
) -> Store:
    """The worker's store, as a production worker opens it: a ``FileStore`` directory (fsync
    on), a ``SQLiteStore`` database (WAL, synchronous=FULL) at ``store_path``, or the schema
    ``namespace`` of the PostgreSQL server at ``conninfo``."""
    if kind == "file":
        return FileStore(str(store_path), fs=OsFileSystem(), fsync=True)
    if kind == "sqlite":
        return SQLiteStore(str(store_path), blocking=ThreadBlocking())
    from durable.store.postgres import PostgresStore  # the optional driver, only when asked

    return PostgresStore(conninfo, blocking=ThreadBlocking(), namespace=namespace)


class ScriptedModel:
    """charge, then receipt, then the answer: decided by which tool results the context holds."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await trio.sleep(MODEL_LATENCY_S)
        done = {m.get("call_id") for m in request.messages if m["role"] == "tool"}
        calls = [c for m in request.messages if m["role"] == "assistant" for c in m["tool_calls"]]
        invoice = f"INV-{request.conversation_id}"
        if not calls:
            call = ProposedCall(tool="charge_card", arguments={"invoice": invoice, "eur": 42})
            return ModelResponse(tool_calls=[call], tokens=10)
        if len(calls) == 1 and calls[0]["call_id"] in done:
            call = ProposedCall(tool="send_receipt", arguments={"invoice": invoice})
            return ModelResponse(tool_calls=[call], tokens=10)
        return ModelResponse(text=f"{invoice} paid; receipt handled", tokens=10)


def payment_tools(boundaries: Boundaries, ledger: Ledger, process: str) -> ToolRegistry:
    """The two tools, each effect one ledger transaction inside ``tool.{name}#n``."""

    def tool(name: str, service: str, op: str, keyed: bool) -> Callable[..., Awaitable[str]]:
        async def fn(arguments: dict[str, Any], ctx: ToolContext) -> str:
            detail = f"{arguments['invoice']} epoch {ctx.epoch} ({ctx.attempt})"

            def apply() -> bool:
                return ledger.effect(
                    boundaries,
                    service=service,
                    op=op,
                    tool=name,
                    call_id=f"{ctx.conversation_id}/{ctx.call_id}",
                    key=ctx.idempotency_key if keyed else None,
                    process=process,
                    detail=detail,
                )

            boundaries.crossing(boundaries.numbered(f"tool.{name}"), apply)
            return f"{name} done for {arguments['invoice']}"

        return fn

    return ToolRegistry(
        [
            ToolSpec(
                name="charge_card",
                fn=tool("charge_card", "payments", "charge", True),
                policy="idempotent",
            ),
            ToolSpec(
                name="send_receipt",
                fn=tool("send_receipt", "outbox", "send", False),
                policy="unsafe",
            ),
        ]
    )


class BoundaryStore:
    """A store whose every mutation crosses ``store.{operation}#n`` (the worker's crash points),
    and whose every lease it is granted is noted in the worker's trace (for I8's "no epoch held
    twice": the store's log shows only the acquisitions that committed an event), with how far
    the first read of the log after the grant saw (for I8's "no append accepted after a newer
    grant"). ``pauses`` places the planned stop between an append's fence check and its write,
    and holds a new owner before its first append while such a zombie waits
    (``sim.targets.workers.takeover``)."""

    def __init__(
        self, store: Store, boundaries: Boundaries, pauses: WorkerPauses | None = None
    ) -> None:
        self._store = store
        self._boundaries = boundaries
        self._pauses = pauses
        self._unread: dict[str, int] = {}  # conversation -> epoch granted, log not read since
        self._unwritten: dict[str, int] = {}  # conversation -> epoch granted, nothing appended

    async def _crossing(self, op: str, call: Callable[[], Awaitable[T]]) -> T:
        label = self._boundaries.numbered(f"store.{op}")
        self._boundaries.before(label)
        value = await call()
        self._boundaries.after(label)
        return value

    async def acquire_lease(self, conversation_id: str, owner_id: str, **kw: Any) -> Lease:
        lease = await self._crossing(
            "acquire_lease", lambda: self._store.acquire_lease(conversation_id, owner_id, **kw)
        )
        self._boundaries.note(
            kind="grant",
            conversation=conversation_id,
            owner=owner_id,
            epoch=lease.epoch,
            done_s=time.monotonic(),
        )
        self._unread[conversation_id] = self._unwritten[conversation_id] = lease.epoch
        return lease

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, **kw: Any
    ) -> list[EventRecord]:
        """The first read after a grant notes where the log ended then: every record of an older
        epoch was accepted before that grant, so none can lie beyond (the read returns the whole
        log after ``after_sequence``; an empty one ended at or before it)."""
        records = await self._store.read_records(conversation_id, after_sequence, **kw)
        epoch = self._unread.pop(conversation_id, None)
        if epoch is not None:
            self._boundaries.note(
                kind="recovered",
                conversation=conversation_id,
                epoch=epoch,
                through=records[-1].sequence if records else after_sequence,
            )
        return records

    async def renew_lease(self, lease: Lease, **kw: Any) -> Lease:
        """Notes when the renewal *started*: one that started after a newer epoch was granted
        and still succeeded means two live leases (the kernel's monotonic clock is one clock for
        every process on the machine)."""
        started_s = time.monotonic()
        renewed = await self._crossing("renew_lease", lambda: self._store.renew_lease(lease, **kw))
        self._boundaries.note(
            kind="renew",
            conversation=lease.conversation_id,
            owner=lease.owner_id,
            epoch=renewed.epoch,
            started_s=started_s,
        )
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        await self._crossing("release_lease", lambda: self._store.release_lease(lease))

    async def append(self, conversation_id: str, records: list[EventRecord], **kw: Any) -> None:
        epoch = int(kw["epoch"])
        if self._pauses is None:
            await self._crossing(
                "append", lambda: self._store.append(conversation_id, records, **kw)
            )
            return
        if self._unwritten.pop(conversation_id, None) is not None:
            self._pauses.hold_if_posted(conversation_id, epoch)
        label = self._boundaries.numbered("store.append")
        pause = self._pauses.pause_for(records, conversation_id, epoch)
        self._boundaries.before(label)
        token = self._pauses.armed(pause)
        try:
            await self._store.append(conversation_id, records, **kw)
        except Exception as exc:
            self._after_pause(pause, conversation_id, type(exc).__name__)
            raise
        finally:
            self._pauses.disarm(token)
        self._after_pause(pause, conversation_id, "accepted")
        self._boundaries.after(label)

    def _after_pause(self, pause: object, conversation_id: str, outcome: str) -> None:
        """The zombie's append is over: the parent may let the new owner go on."""
        if pause is not None and self._pauses is not None and self._pauses.paused:
            self._boundaries.note(
                kind="fenced-append-done", conversation=conversation_id, outcome=outcome
            )

    async def save_checkpoint(self, *args: Any, **kw: Any) -> Any:
        return await self._crossing(
            "save_checkpoint", lambda: self._store.save_checkpoint(*args, **kw)
        )

    def __getattr__(self, name: str) -> Any:
        """Reads (``read_records``, ``load_checkpoints``, ``current_lease``...) cross nothing."""
        return getattr(self._store, name)
