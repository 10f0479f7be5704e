"""The reader of the workflow's durable state: its checkpoint files, as a fresh reader sees them.

Imports agent_framework (through ``sim.targets.agent_framework.workflow``): import it only when
a point's state is read, in the parent.

What the framework records of a run is the lineage of its checkpoints: from the latest (the one
a restart resumes) back through ``previous_checkpoint_id`` to the entry checkpoint, which holds
the user's input. Each checkpoint holds the messages sent in its superstep (pending for the
next) and the committed shared state, where each effect executor keeps its result under its own
id. A checkpoint a restored superstep replaced is not in the lineage: the framework's record of
a re-run superstep is one superstep. Outputs are not checkpointed at all: the answer is what the
last process's ``workflow.run`` returned, which the child notes in the trace.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_framework import WorkflowCheckpoint

from sim.targets.agent_framework.workflow import (
    ANSWER_KEY,
    CHECKPOINT_DIR,
    WORKFLOW_NAME,
    ChargeOrder,
    ChargeResult,
    PaymentRequest,
    ReceiptDraft,
    ReceiptOrder,
    pending_targets,
    storage_for,
)
from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.protocol import TargetOptions, TargetState
from sim.targets.shapes import as_texts

#: What requests a tool call (its order), and what records its result, per tool.
ORDERS: dict[type, str] = {ChargeOrder: "charge_card", ReceiptOrder: "send_receipt"}


def lineage(checkpoints: list[WorkflowCheckpoint]) -> list[WorkflowCheckpoint]:
    """The latest checkpoint (by timestamp, as ``get_latest`` picks it) and its ancestors,
    oldest first."""
    if not checkpoints:
        return []
    by_id = {cp.checkpoint_id: cp for cp in checkpoints}
    current: WorkflowCheckpoint | None = max(checkpoints, key=lambda cp: cp.timestamp)
    chain: list[WorkflowCheckpoint] = []
    while current is not None and current not in chain:
        chain.append(current)
        parent = current.previous_checkpoint_id
        current = by_id.get(parent) if parent is not None else None
    return chain[::-1]


def describe(data: Any) -> str:
    """A message as one comparable row: no call id (a re-dispatched order gets a new one, and
    a history should not differ for that alone)."""
    if isinstance(data, PaymentRequest):
        return f"user: {data.text}"
    if isinstance(data, ChargeOrder):
        return f"order charge_card {data.invoice} {data.amount_eur} EUR"
    if isinstance(data, ReceiptOrder):
        return f"order send_receipt {data.invoice} to {data.to}"
    if isinstance(data, ChargeResult):
        return f"result charge_card: {data.text}"
    if isinstance(data, ReceiptDraft):
        return f"draft receipt {data.invoice} to {data.to}"
    return f"{type(data).__name__}: {data!r}"


def _rows(chain: list[WorkflowCheckpoint], state: TargetState) -> None:
    for cp in chain:
        for source, messages in sorted(cp.messages.items()):
            for message in messages:
                data = message.data
                state.history.append(
                    f"superstep {cp.iteration_count}: {source} -> {message.target_id or '*'}: "
                    f"{describe(data)}"
                )
                if isinstance(data, PaymentRequest):
                    state.inputs.append(data.text)
                elif type(data) in ORDERS:
                    state.calls.setdefault(ORDERS[type(data)], []).append(data.call_id)
    shared = chain[-1].state
    for key in sorted(k for k in shared if not k.startswith("_")):
        value = shared[key]
        if isinstance(value, dict) and "tool" in value:
            state.history.append(f"state {key}: {value['tool']} {value['result']}")
            state.results.setdefault(str(value["tool"]), []).append(str(value["call_id"]))


def last_outputs(point_dir: Path) -> list[str] | None:
    """The outputs the last process's ``workflow.run`` returned (None: no run returned)."""
    notes = notes_of(read_trace(point_dir / TRACE_NAME), "outputs")
    return as_texts(notes[-1]["outputs"]) if notes else None


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    storage = storage_for(point_dir, options)
    if not (point_dir / CHECKPOINT_DIR).exists():
        return TargetState()
    checkpoints = asyncio.run(storage.list_checkpoints(workflow_name=WORKFLOW_NAME))
    chain = lineage(checkpoints)
    if not chain:
        return TargetState()
    state = TargetState(exists=True)
    state.pending = pending_targets(chain[-1])
    state.finished = not state.pending
    _rows(chain, state)
    outputs = last_outputs(point_dir)
    # What the last run returned; else what a caller finds in the last checkpoint (the
    # ``idempotent`` variant keeps its answer there: outputs are not checkpointed).
    kept = chain[-1].state.get(ANSWER_KEY)
    state.answer = outputs[-1] if outputs else (str(kept) if kept is not None else None)
    return state
