"""The LlamaIndex workflow under test, its checkpoint loop, its crash boundaries, and the reader
of its durable state (the last ``Context.to_dict()`` snapshot, in ``checkpoints.sqlite``).

Imports ``workflows`` at module level: import this module only in a child process or when
reading a point's state (``sim.targets.llama_index`` does, lazily).

Determinism: the run id is fixed (``run(..., run_id=RUN_ID)``, on start and on resume), and a
step's call id is ``{run id}:{work item id}``. The runtime numbers work items per run
(``work_item_1`` for ``charge_card``, ``work_item_2`` for ``send_receipt``), keeps an
in-progress item's id in the snapshot and hands it back to the step it re-runs, so the witness
of a re-run step shows one call id applied by two processes -- and that id is a sound
idempotency key. No wall clock is judged: the snapshot's timestamps are never read.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from workflows import Context, Workflow, step
from workflows.context.context_types import SerializedContext
from workflows.context.serializers import JsonSerializer
from workflows.context.state_store import InMemoryStateStore
from workflows.events import Event, StartEvent, StepState, StepStateChanged, StopEvent
from workflows.runtime.types.results import StepWorkerStateContextVar

from sim.targets.boundaries import Boundaries
from sim.targets.protocol import ChildContext, TargetOptions, TargetState

DB_NAME = "checkpoints.sqlite"
RUN_ID = "pay-INV-42"
INVOICE, AMOUNT_EUR, TO = "INV-42", 42, "ada@example.com"
REQUEST = f"{INVOICE} {AMOUNT_EUR} {TO}"
ANSWER = f"Paid invoice {INVOICE} ({AMOUNT_EUR} EUR) and emailed the receipt to {TO}."
#: The steps in the order the workflow runs them: each is the tool of the same name.
STEPS = ("charge_card", "send_receipt")

# The child's context, set before the workflow runs: the steps find the point's ledger and
# boundaries through it (a workflow's steps are methods the library calls, not closures).
_CTX: ChildContext | None = None


def _ctx() -> ChildContext:
    if _CTX is None:
        raise RuntimeError("the workflow's steps run only inside a target child")
    return _CTX


class Charged(Event):
    """``charge_card``'s output, ``send_receipt``'s input."""

    invoice: str
    amount_eur: int
    to: str


def _call_id() -> str:
    """``{run id}:{work item id}`` of the step invocation running now: the runtime's own id of
    this unit of work, which a snapshot of an in-progress step keeps (``work_item_id``)."""
    work_item = StepWorkerStateContextVar.get().state.work_item_id
    return f"{RUN_ID}:{work_item}"


def _effect(service: str, op: str, tool: str, call_id: str, detail: str) -> None:
    ctx = _ctx()
    ctx.effect(service=service, op=op, tool=tool, call_id=call_id, key=call_id, detail=detail)


async def _charge(ctx: Context, invoice: str, amount: int, to: str) -> Charged:
    """Charge the card and keep the result in the state store (one step's work, whichever step
    of the two workflows runs it)."""
    b = _ctx().boundaries
    label = b.numbered("step.charge_card")
    b.before(label, what="StartEvent")
    call_id = _call_id()
    _effect("payments", "charge", "charge_card", call_id, f"{invoice} {amount} EUR")
    await ctx.store.set("request", f"{invoice} {amount} {to}")
    result = f"charged {amount} EUR for {invoice}"
    await ctx.store.set("charge_card", {"call": call_id, "result": result})
    b.after(label)
    return Charged(invoice=invoice, amount_eur=amount, to=to)


async def _send(ctx: Context, ev: Charged) -> StopEvent:
    b = _ctx().boundaries
    label = b.numbered("step.send_receipt")
    b.before(label, what=f"Charged {ev.invoice}")
    call_id = _call_id()
    _effect("outbox", "send", "send_receipt", call_id, f"receipt {ev.invoice} to {ev.to}")
    result = f"receipt for {ev.invoice} sent to {ev.to}"
    await ctx.store.set("send_receipt", {"call": call_id, "result": result})
    answer = f"Paid invoice {ev.invoice} ({ev.amount_eur} EUR) and emailed the receipt to {ev.to}."
    await ctx.store.set("answer", answer)
    b.after(label)
    return StopEvent(result=answer)


def _order(ev: Event) -> tuple[str, int, str]:
    return str(ev.get("invoice")), int(ev.get("amount_eur")), str(ev.get("to"))


class PayInvoice(Workflow):
    """Charge the card, then email the receipt, then answer: the payment agent's effects as a
    workflow a user writes, each step's result kept in the state store (where the durable-
    workflows page says a value that must survive a restart goes)."""

    @step
    async def charge_card(self, ctx: Context, ev: StartEvent) -> Charged:
        return await _charge(ctx, *_order(ev))

    @step
    async def send_receipt(self, ctx: Context, ev: Charged) -> StopEvent:
        return await _send(ctx, ev)


class Accepted(Event):
    """``accept``'s output: the order, now in a snapshot before anything touches the world."""

    invoice: str
    amount_eur: int
    to: str


class PayInvoiceAcceptedFirst(Workflow):
    """The fixed workflow (``idempotent`` variant): the same steps behind a first one that does
    nothing outside (``accept``), so the checkpoint loop has a snapshot -- the charge queued --
    before the first effect, and a kill during the charge resumes instead of starting over."""

    @step
    async def accept(self, ctx: Context, ev: StartEvent) -> Accepted:
        invoice, amount, to = _order(ev)
        return Accepted(invoice=invoice, amount_eur=amount, to=to)

    @step
    async def charge_card(self, ctx: Context, ev: Accepted) -> Charged:
        return await _charge(ctx, ev.invoice, ev.amount_eur, ev.to)

    @step
    async def send_receipt(self, ctx: Context, ev: Charged) -> StopEvent:
        return await _send(ctx, ev)


class CheckpointDB:
    """The page's ``db``: ``save(run id, snapshot)`` overwrites the run's row, ``load`` reads it
    (autocommit: a row is durable once ``save`` returns, so a kill after it keeps it)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(str(path), isolation_level=None)
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS checkpoints "
            "(run_id TEXT PRIMARY KEY, saves INTEGER, snapshot TEXT)"
        )

    def save(self, run_id: str, snapshot: str) -> None:
        self._conn.execute(
            "INSERT INTO checkpoints (run_id, saves, snapshot) VALUES (?, 1, ?) ON CONFLICT"
            "(run_id) DO UPDATE SET saves = saves + 1, snapshot = excluded.snapshot",
            (run_id, snapshot),
        )

    def load(self, run_id: str) -> dict[str, Any] | None:
        row = self._conn.execute(
            "SELECT snapshot FROM checkpoints WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def close(self) -> None:
        self._conn.close()


def _work(snapshot: dict[str, Any]) -> list[tuple[str, str]]:
    """The work a snapshot holds, queued or in progress (what a resume runs), in step order:
    ``(step, call id)``, read through ``SerializedContext``, the library's own model of it."""
    parsed = SerializedContext.from_dict_auto(snapshot, JsonSerializer())
    return [
        (name, f"{RUN_ID}:{item.work_item_id}")
        for name, worker in parsed.workers.items()
        for item in [*worker.in_progress, *worker.queue]
    ]


def _describe(snapshot: dict[str, Any]) -> str:
    """What a save writes, for timelines and witnesses: running or not, and the work it holds."""
    work = [f"{name} {call}" for name, call in _work(snapshot)]
    return f"is_running={snapshot.get('is_running')} work={work}"


def _save(db: CheckpointDB, b: Boundaries, snapshot: dict[str, Any]) -> None:
    """The route's durable write, a crash boundary."""
    b.crossing(
        b.numbered("checkpoint.save"),
        lambda: db.save(RUN_ID, json.dumps(snapshot)),
        what=_describe(snapshot),
    )


async def _drive(ctx: ChildContext, db: CheckpointDB) -> str:
    """The page's checkpoint loop: start the run, or resume it from the last snapshot while it
    says the run is still running; save ``ctx.to_dict()`` at each step's end."""
    fixed = ctx.options.variant == "idempotent"
    wf = PayInvoiceAcceptedFirst(timeout=None) if fixed else PayInvoice(timeout=None)
    snapshot = db.load(RUN_ID)
    if snapshot is None:
        handler = wf.run(invoice=INVOICE, amount_eur=AMOUNT_EUR, to=TO, run_id=RUN_ID)
        action = "start"
    elif not snapshot.get("is_running"):
        return "none"
    else:
        work = _work(snapshot)
        ctx.boundaries.note(
            what="resume_state", next=[name for name, _ in work], tasks=work, saved=[]
        )
        handler = wf.run(ctx=Context.from_dict(wf, snapshot), run_id=RUN_ID)
        action = "resume"
    async for ev in handler.stream_events(expose_internal=True):
        if isinstance(ev, StepStateChanged) and ev.step_state == StepState.NOT_RUNNING:
            _save(db, ctx.boundaries, handler.ctx.to_dict())
    await handler
    return action


def run_child(ctx: ChildContext) -> str:
    global _CTX
    _CTX = ctx
    db = CheckpointDB(ctx.point_dir / DB_NAME)
    try:
        return asyncio.run(_drive(ctx, db))
    finally:
        db.close()


def _store_values(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's state store, decoded by the library's own store."""
    store: InMemoryStateStore[Any] = InMemoryStateStore.from_dict(
        snapshot["state"], JsonSerializer()
    )

    async def values() -> dict[str, Any]:
        return {key: await store.get(key, None) for key in ("request", *STEPS, "answer")}

    return asyncio.run(values())


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The last snapshot, as a fresh reader (``SerializedContext``, the library's own model of a
    ``to_dict()`` payload) sees it: whether the run is still running, the work it holds (queued
    or in progress: what a resume runs), and the results the steps kept in the state store."""
    del options
    path = point_dir / DB_NAME
    if not path.exists():
        return TargetState()
    db = CheckpointDB(path)
    try:
        snapshot = db.load(RUN_ID)
    finally:
        db.close()
    if snapshot is None:
        return TargetState()
    state = TargetState(exists=True)
    for name, call in _work(snapshot):
        state.pending.append(name)
        state.calls.setdefault(name, []).append(call)
    state.finished = not snapshot.get("is_running") and not state.pending
    values = _store_values(snapshot)
    if values["request"] is not None:
        state.inputs = [str(values["request"])]
    for name in STEPS:
        kept = values[name]
        if isinstance(kept, dict):
            state.calls.setdefault(name, []).insert(0, str(kept["call"]))
            state.results.setdefault(name, []).append(str(kept["call"]))
            state.history.append(f"step {name}: {kept['result']}")
    if state.finished and values["answer"] is not None:
        state.answer = str(values["answer"])
        state.history.append(f"workflow result: {state.answer}")
    return state
