"""The Agent Framework workflow under test, and its crash boundaries.

Imports agent_framework at module level: import this module only in a child process or when
reading a point's state (``sim.targets.agent_framework`` does, lazily).

The workflow is plain executors (no LLM agent: the payment needs no model decision, and a
scripted chat client would only add a step that does nothing durable), wired the way the
framework's fan-out/fan-in samples are::

    dispatcher --fan-out--> charge           --fan-in--> send_receipt --> output (the answer)
                       \\--> prepare_receipt --/

``dispatcher`` assigns each effect a call id (``call_p1_1``: the process and its count) and
sends the orders; ``charge`` charges the card (payments); ``prepare_receipt`` drafts the
receipt; the fan-in hands both results to ``send_receipt``, which emails it (outbox) and yields
the answer (the ``idempotent`` variant also keeps it in the shared state, ``ANSWER_KEY``:
outputs are not checkpointed). Each effect executor also keeps its result in the workflow's
shared state under its own id, as executors share results in the framework's samples. The call
ids travel in the messages, which the superstep-end checkpoint keeps, so a restored superstep
re-runs an effect with the *same* call id: that is what makes ``{workflow name}:{call id}`` a
sound idempotency key (the ``idempotent`` variant), and what the witness of a re-run shows (one
call id, two processes).

Durability: ``FileCheckpointStorage`` in the point directory, given the workflow's message types
in ``allowed_checkpoint_types`` as its docstring asks (the ``unregistered`` variant leaves them
out). Restart, per the framework's checkpoint docs ("Checkpoints and resuming"): take the
storage's latest checkpoint of the workflow (``get_latest(workflow_name=...)``) and, while it
holds pending messages, run ``workflow.run(checkpoint_id=..., checkpoint_storage=...)`` on a
freshly built workflow; no checkpoint at all means the run never started, so start it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Never

from agent_framework import (
    Executor,
    FileCheckpointStorage,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowContext,
    handler,
)
from agent_framework._workflows._edge_runner import FanInEdgeRunner

from sim.targets.boundaries import Boundaries
from sim.targets.protocol import ChildContext, TargetOptions

CHECKPOINT_DIR = "checkpoints"
WORKFLOW_NAME = "pay-invoice"
INVOICE, AMOUNT_EUR, TO = "INV-42", 42, "ada@example.com"
USER_INPUT = f"Please pay invoice {INVOICE} ({AMOUNT_EUR} EUR) and email the receipt to {TO}."
ANSWER = f"Paid invoice {INVOICE} ({AMOUNT_EUR} EUR) and emailed the receipt to {TO}."
#: Where the ``idempotent`` variant keeps its answer in the shared state (``_``: not a result).
ANSWER_KEY = "_answer"


@dataclass
class PaymentRequest:
    """The user's input: the workflow's first message (kept by the entry checkpoint)."""

    text: str
    invoice: str
    amount_eur: int
    to: str


@dataclass
class ChargeOrder:
    call_id: str
    invoice: str
    amount_eur: int


@dataclass
class ReceiptOrder:
    call_id: str
    invoice: str
    to: str


@dataclass
class ChargeResult:
    call_id: str
    text: str


@dataclass
class ReceiptDraft:
    call_id: str
    invoice: str
    to: str
    body: str


MESSAGE_TYPES = (PaymentRequest, ChargeOrder, ReceiptOrder, ChargeResult, ReceiptDraft)


def allowed_types(options: TargetOptions) -> list[str] | None:
    """The ``allowed_checkpoint_types`` the storage is given: the message types, as the
    storage's docstring asks (``module:qualname``); none in the ``unregistered`` variant."""
    if options.variant == "unregistered":
        return None
    return [f"{t.__module__}:{t.__qualname__}" for t in MESSAGE_TYPES]


def storage_for(point_dir: Path, options: TargetOptions) -> FileCheckpointStorage:
    return FileCheckpointStorage(
        point_dir / CHECKPOINT_DIR, allowed_checkpoint_types=allowed_types(options)
    )


class _Effects:
    """The point's ledger, as the effect executors reach it (one per child process)."""

    def __init__(self, ctx: ChildContext) -> None:
        self.ctx = ctx
        self.dispatched = 0

    def next_call_id(self) -> str:
        self.dispatched += 1
        return f"call_{self.ctx.process}_{self.dispatched}"

    def apply(self, service: str, op: str, tool: str, call_id: str, detail: str) -> None:
        """The ``idempotent`` variant's key is the workflow name and the call id the checkpointed
        message carries (``ChildContext.effect`` sends it only in that variant)."""
        key = f"{WORKFLOW_NAME}:{call_id}"
        self.ctx.effect(service=service, op=op, tool=tool, call_id=call_id, key=key, detail=detail)


class Dispatcher(Executor):
    def __init__(self, effects: _Effects) -> None:
        super().__init__(id="dispatcher")
        self._effects = effects

    @handler
    async def dispatch(
        self, request: PaymentRequest, ctx: WorkflowContext[ChargeOrder | ReceiptOrder]
    ) -> None:
        charge = ChargeOrder(self._effects.next_call_id(), request.invoice, request.amount_eur)
        receipt = ReceiptOrder(self._effects.next_call_id(), request.invoice, request.to)
        await ctx.send_message(charge, target_id="charge")
        await ctx.send_message(receipt, target_id="prepare_receipt")


class Charge(Executor):
    def __init__(self, effects: _Effects) -> None:
        super().__init__(id="charge")
        self._effects = effects

    @handler
    async def charge_card(self, order: ChargeOrder, ctx: WorkflowContext[ChargeResult]) -> None:
        detail = f"{order.invoice} {order.amount_eur} EUR"
        self._effects.apply("payments", "charge", "charge_card", order.call_id, detail)
        text = f"charged {order.amount_eur} EUR for {order.invoice}"
        ctx.set_state(self.id, {"tool": "charge_card", "call_id": order.call_id, "result": text})
        await ctx.send_message(ChargeResult(order.call_id, text))


class PrepareReceipt(Executor):
    def __init__(self) -> None:
        super().__init__(id="prepare_receipt")

    @handler
    async def draft(self, order: ReceiptOrder, ctx: WorkflowContext[ReceiptDraft]) -> None:
        body = f"Receipt for {order.invoice}: {AMOUNT_EUR} EUR paid."
        await ctx.send_message(ReceiptDraft(order.call_id, order.invoice, order.to, body))


class SendReceipt(Executor):
    """The fan-in's target: runs once both the charge and the draft have arrived."""

    def __init__(self, effects: _Effects) -> None:
        super().__init__(id="send_receipt")
        self._effects = effects

    @handler
    async def send(
        self, parts: list[ChargeResult | ReceiptDraft], ctx: WorkflowContext[Never, str]
    ) -> None:
        draft = next(p for p in parts if isinstance(p, ReceiptDraft))
        detail = f"receipt {draft.invoice} to {draft.to}"
        self._effects.apply("outbox", "send", "send_receipt", draft.call_id, detail)
        text = f"receipt for {draft.invoice} sent to {draft.to}"
        ctx.set_state(self.id, {"tool": "send_receipt", "call_id": draft.call_id, "result": text})
        if self._effects.ctx.options.variant == "idempotent":
            # Outputs are not checkpointed: the fixed workflow keeps its answer in the shared
            # state too, where a caller restarting after the last checkpoint finds it.
            ctx.set_state(ANSWER_KEY, ANSWER)
        await ctx.yield_output(ANSWER)


def build_workflow(ctx: ChildContext, storage: FileCheckpointStorage) -> Any:
    """The workflow as a user writes it, checkpointed by ``storage``."""
    effects = _Effects(ctx)
    dispatcher, charge, prepare = Dispatcher(effects), Charge(effects), PrepareReceipt()
    send = SendReceipt(effects)
    return (
        WorkflowBuilder(name=WORKFLOW_NAME, start_executor=dispatcher, checkpoint_storage=storage)
        .add_fan_out_edges(dispatcher, [charge, prepare])
        .add_fan_in_edges([charge, prepare], send)
        .build()
    )


def pending_targets(checkpoint: WorkflowCheckpoint) -> list[str]:
    """Where a checkpoint's pending messages go: their target, or ``from {source}`` for one
    its edges route (empty: the run is over)."""
    found = {
        str(m.target_id or f"from {source}")
        for source, ms in checkpoint.messages.items()
        for m in ms
    }
    return sorted(found | {f"request:{r}" for r in checkpoint.pending_request_info_events})


def _wrap_async(
    owner: type,
    name: str,
    label_of: Callable[..., str],
    describe: Callable[..., str],
    b: Boundaries,
) -> None:
    """Patch ``owner.name`` (a coroutine method) to cross a boundary labelled ``label_of(...)``.
    The ``after`` instant is crossed when the call returned *or raised*: a checkpoint save the
    storage refuses raises, and the framework carries on without it."""
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        label = b.numbered(label_of(*args, **kwargs))
        b.before(label, what=describe(*args, **kwargs))
        try:
            return await original(*args, **kwargs)
        finally:
            b.after(label)

    setattr(owner, name, wrapped)


def _describe_save(storage: Any, checkpoint: WorkflowCheckpoint) -> str:
    del storage
    pending = ", ".join(pending_targets(checkpoint)) or "nothing"
    return f"superstep {checkpoint.iteration_count}; pending for {pending}"


def wrap_boundaries(b: Boundaries) -> None:
    """Each executor's run (its effect is inside it), the fan-in's delivery of each source's
    message, and the checkpoint save at each superstep's end (and the entry one)."""
    _wrap_async(
        Executor,
        "execute",
        lambda self, *a, **k: f"executor:{self.id}",
        lambda self, message, *a, **k: type(getattr(message, "data", message)).__name__,
        b,
    )
    _wrap_async(
        FanInEdgeRunner,
        "send_message",
        lambda self, message, *a, **k: f"fan_in:{message.source_id}",
        lambda self, message, *a, **k: f"{type(message.data).__name__} from {message.source_id}",
        b,
    )
    _wrap_async(FileCheckpointStorage, "save", lambda *a, **k: "checkpoint.save", _describe_save, b)


def run_child(ctx: ChildContext) -> str:
    wrap_boundaries(ctx.boundaries)
    return asyncio.run(start_or_resume(ctx))


async def start_or_resume(ctx: ChildContext) -> str:
    """What a user's restart does: resume the latest checkpoint while it has work pending; start
    the run if there is none; otherwise the run is over. The output it got is noted."""
    storage = storage_for(ctx.point_dir, ctx.options)
    workflow = build_workflow(ctx, storage)
    latest = await storage.get_latest(workflow_name=WORKFLOW_NAME)
    if latest is None:
        result = await workflow.run(PaymentRequest(USER_INPUT, INVOICE, AMOUNT_EUR, TO))
        action = "start"
    else:
        pending = pending_targets(latest)
        ctx.boundaries.note(
            what="resume_state", next=pending, tasks=[], saved=[latest.iteration_count]
        )
        if not pending:
            return "none"
        result = await workflow.run(checkpoint_id=latest.checkpoint_id, checkpoint_storage=storage)
        action = "resume"
    ctx.boundaries.note(what="outputs", outputs=[str(o) for o in result.get_outputs()])
    return action
