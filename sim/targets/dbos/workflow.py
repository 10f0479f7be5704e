"""The DBOS workflow under test, its crash boundaries, and the reader of its durable state.

Imports dbos at module level: import this module only in a child process or when reading a
point's state (``sim.targets.dbos`` does, lazily). The workflow id is fixed; a step's call id is
``{workflow id}:{step id}``, which DBOS keeps across a recovery (the same step of the same
workflow), so it is also the idempotency key of the fixed variant.
"""

from __future__ import annotations

from pathlib import Path

from dbos import DBOS, SetWorkflowID

from sim.targets.dbos.system_db import (
    FINAL,
    RESULT_POLL_S,
    poll_quickly,
    read_workflow,
    sqlite_url,
    wrap_system_database,
)
from sim.targets.protocol import ChildContext, TargetOptions, TargetState

DB_NAME = "dbos.sqlite"
WORKFLOW_ID = "pay-INV-42"
INVOICE, AMOUNT_EUR, TO = "INV-42", 42, "ada@example.com"
ANSWER = f"Paid invoice {INVOICE} ({AMOUNT_EUR} EUR) and emailed the receipt to {TO}."

# The child's context, set before DBOS launches: DBOS registers steps and workflows by their
# names at import, so they live at module level and find the point through this.
_CTX: ChildContext | None = None


def _ctx() -> ChildContext:
    if _CTX is None:
        raise RuntimeError("the workflow's steps run only inside a target child")
    return _CTX


def _effect(service: str, op: str, tool: str, detail: str) -> None:
    ctx = _ctx()
    call_id = f"{DBOS.workflow_id}:{DBOS.step_id}"
    ctx.effect(service=service, op=op, tool=tool, call_id=call_id, key=call_id, detail=detail)


@DBOS.step()
def charge_card(invoice: str, amount_eur: int) -> str:
    _effect("payments", "charge", "charge_card", f"{invoice} {amount_eur} EUR")
    return f"charged {amount_eur} EUR for {invoice}"


@DBOS.step()
def send_receipt(to: str, invoice: str) -> str:
    _effect("outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


@DBOS.workflow()
def pay_invoice(invoice: str, amount_eur: int, to: str) -> str:
    charge_card(invoice, amount_eur)
    send_receipt(to, invoice)
    return ANSWER


def _url(point_dir: Path) -> str:
    return sqlite_url(point_dir / DB_NAME)


def run_child(ctx: ChildContext) -> str:
    """Launch DBOS (which recovers a pending workflow by itself), then start the workflow if
    the system database has no record of it, or wait for the recovered one."""
    global _CTX
    _CTX = ctx
    wrap_system_database(ctx.boundaries)
    DBOS(config={"name": "durable-sim-target", "system_database_url": _url(ctx.point_dir)})
    poll_quickly()
    DBOS.launch()
    # No DBOS.destroy: the child leaves with os._exit (sim.targets.child.leave), as a killed
    # one would, and destroy only waits for DBOS's threads to stop.
    status = DBOS.get_workflow_status(WORKFLOW_ID)
    if status is None:
        with SetWorkflowID(WORKFLOW_ID):
            handle = DBOS.start_workflow(pay_invoice, INVOICE, AMOUNT_EUR, TO)
        action = "start"
    elif status.status in FINAL:
        return "none"
    else:
        ctx.boundaries.note(what="resume_state", next=[status.status], tasks=[], saved=[])
        handle = DBOS.retrieve_workflow(WORKFLOW_ID)
        action = "resume"
    handle.get_result(polling_interval_sec=RESULT_POLL_S)
    return action


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The workflow's status and steps as a DBOS client (which recovers nothing) reads them."""
    del options
    found = read_workflow(point_dir / DB_NAME, WORKFLOW_ID)
    if found is None:
        return TargetState()
    state, status, steps = found
    state.inputs = [f"{INVOICE} {AMOUNT_EUR} {TO}"]  # the workflow's input, recorded at start
    for step in steps:
        name, call_id = str(step["function_name"]), f"{WORKFLOW_ID}:{step['function_id']}"
        state.calls.setdefault(name, []).append(call_id)
        if step["error"] is None:
            state.results.setdefault(name, []).append(call_id)
        state.history.append(f"step {name}: {step['output']}")
    if state.finished:
        state.answer = str(status.output)
        state.history.append(f"workflow output: {status.output}")
    return state
