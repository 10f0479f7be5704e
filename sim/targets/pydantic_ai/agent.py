"""The pydantic-ai agent under test, its crash boundaries, and the reader of its durable state.

Imports pydantic_ai and dbos at module level: import this module only in a child process or when
reading a point's state (``sim.targets.pydantic_ai`` does, lazily).

Determinism: the workflow id is fixed, and the scripted model derives each tool call id from the
process and its own call count (``call_p1_1``). A model request is a DBOS step, so a recovered
workflow gets the recorded response back, with the *first* process's call id: the same tool
call, not a new one -- which is what makes ``{workflow id}:{tool call id}`` a sound idempotency
key, and what the witness of a re-run tool shows (one call id, applied by two processes).
"""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent, AgentRunResult, RunContext
from pydantic_ai.durable_exec.dbos import DBOSAgent, DBOSDurability
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from sim.targets.boundaries import Boundaries, wrap_async_method
from sim.targets.dbos.system_db import (
    FINAL,
    RESULT_POLL_S,
    poll_quickly,
    read_workflow,
    sqlite_url,
    wrap_system_database,
)
from sim.targets.protocol import ChildContext, TargetOptions, TargetState
from sim.targets.pydantic_ai.script import (
    AGENT_NAME,
    USER_INPUT,
    ScriptedModel,
    describe_call,
    describe_request,
    history,
    record_calls,
)

DB_NAME = "dbos.sqlite"
WORKFLOW_ID = "pay-INV-42"

# The child's context and agent, set before DBOS launches: DBOS registers workflows by name, so
# the capability's workflow lives at module level and finds the agent (and the tools the
# point's ledger) through these.
_CTX: ChildContext | None = None
_AGENT: Agent[None, str] | None = None


def _apply(service: str, op: str, tool: str, call_id: str, detail: str) -> None:
    """A tool's effect on the ledger; the ``idempotent`` variant's key is the workflow and the
    tool call (``ChildContext.effect`` sends it only in that variant)."""
    if _CTX is None:
        raise RuntimeError("the agent's tools run only inside a target child")
    key = f"{DBOS.workflow_id}:{call_id}"
    _CTX.effect(service=service, op=op, tool=tool, call_id=call_id, key=key, detail=detail)


@DBOS.step(name=f"{AGENT_NAME}__tool_effect")
async def effect_step(service: str, op: str, tool: str, call_id: str, detail: str) -> None:
    """The ``step`` variant: the effect in a DBOS step of its own, so a recovered workflow gets
    its recorded output instead of running it again -- once the output is recorded."""
    _apply(service, op, tool, call_id, detail)


async def _effect(run: RunContext[None], service: str, op: str, tool: str, detail: str) -> None:
    if _CTX is not None and _CTX.options.variant == "step":
        await effect_step(service, op, tool, str(run.tool_call_id), detail)
    else:
        _apply(service, op, tool, str(run.tool_call_id), detail)


async def charge_card(run: RunContext[None], invoice: str, amount_eur: int) -> str:
    """Charge the customer's card for an invoice."""
    await _effect(run, "payments", "charge", "charge_card", f"{invoice} {amount_eur} EUR")
    return f"charged {amount_eur} EUR for {invoice}"


async def send_receipt(run: RunContext[None], to: str, invoice: str) -> str:
    """Email the receipt of an invoice."""
    await _effect(run, "outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


def build_agent(options: TargetOptions, process: str) -> Agent[None, str]:
    """The agent as a user writes it, made durable the way ``options.durability`` names:
    wrapped in ``DBOSAgent`` (``agent``), or given the ``DBOSDurability`` capability
    (``capability``), whose tool metadata ``{"dbos": {"child_workflow": {}}}`` runs each tool as
    a DBOS child workflow (the ``child_workflow`` variant: pydantic-ai's own opt-in)."""
    model = FunctionModel(ScriptedModel(process), model_name="scripted")
    child = options.variant == "child_workflow"
    if child and options.durability != "capability":
        raise RuntimeError("the child_workflow variant needs --durability capability")
    metadata: dict[str, object] | None = {"dbos": {"child_workflow": {}}} if child else None
    tools = FunctionToolset([charge_card, send_receipt], id="payment_tools", metadata=metadata)
    if options.durability == "capability":
        return Agent(model, name=AGENT_NAME, toolsets=[tools], capabilities=[DBOSDurability()])
    with warnings.catch_warnings():
        # Deprecated in 2.x in favour of the capability, still shipped: what deployments run.
        warnings.filterwarnings("ignore", message="`DBOSAgent` is deprecated")
        # A DBOSAgent wraps the Agent and is run as one, but does not derive from Agent.
        return DBOSAgent(Agent(model, name=AGENT_NAME, toolsets=[tools]))  # type: ignore[return-value]  # see above


@DBOS.workflow(name="pay_invoice_with_agent")
async def pay_invoice(prompt: str) -> AgentRunResult[str]:
    """The user's own workflow around the agent's run (the ``capability`` way)."""
    if _AGENT is None:
        raise RuntimeError("the workflow runs only inside a target child")
    return await _AGENT.run(prompt)


def wrap_boundaries(b: Boundaries) -> None:
    """The model request inside its DBOS step, pydantic-ai's call of a function tool (in the
    workflow's own code: no step), and DBOS's system database."""
    wrap_system_database(b)
    wrap_async_method(FunctionModel, "request", b, "model.request", describe_request)
    wrap_async_method(FunctionToolset, "call_tool", b, "pydantic_ai.call_tool", describe_call)


def _url(point_dir: Path) -> str:
    return sqlite_url(point_dir / DB_NAME)


def run_child(ctx: ChildContext) -> str:
    """Build the agent, launch DBOS (which recovers a pending workflow by itself), then start
    the workflow if the system database has no record of it, or wait for the recovered one."""
    global _CTX, _AGENT
    _CTX = ctx
    wrap_boundaries(ctx.boundaries)
    _AGENT = build_agent(ctx.options, ctx.process)
    DBOS(config={"name": "durable-sim-pydantic-ai", "system_database_url": _url(ctx.point_dir)})
    poll_quickly()
    DBOS.launch()
    # No DBOS.destroy after: the child leaves with os._exit (sim.targets.child.leave).
    return asyncio.run(_start_or_wait(ctx, _AGENT))


async def _start_or_wait(ctx: ChildContext, agent: Agent[None, str]) -> str:
    status = await DBOS.get_workflow_status_async(WORKFLOW_ID)
    if status is None:
        with SetWorkflowID(WORKFLOW_ID):
            if ctx.options.durability == "capability":
                handle = await DBOS.start_workflow_async(pay_invoice, USER_INPUT)
            else:
                workflow = agent.dbos_wrapped_run_workflow  # type: ignore[attr-defined]  # a DBOSAgent
                handle = await DBOS.start_workflow_async(workflow, USER_INPUT, deps=None)
        action = "start"
    elif status.status in FINAL:
        return "none"
    else:
        ctx.boundaries.note(what="resume_state", next=[status.status], tasks=[], saved=[])
        handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
        action = "resume"
    await handle.get_result(polling_interval_sec=RESULT_POLL_S)
    return action


_history = history  # the name sim.targets.pydantic_ai.app imports


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The workflow's status, its recorded steps and, once it is over, the messages of the run
    it returned, as a DBOS client (which recovers nothing) reads them."""
    del options
    found = read_workflow(point_dir / DB_NAME, WORKFLOW_ID)
    if found is None:
        return TargetState()
    state, status, steps = found
    if status.input is not None:
        state.inputs = [str(arg) for arg in status.input["args"][:1]]
    for step in steps:  # the model's requests: the only record of the calls it asked for
        record_calls(step["output"], state)
    if state.finished:
        result = status.output  # DBOS unpickles the workflow's return: the agent's run result
        if not isinstance(result, AgentRunResult):
            raise TypeError(f"the workflow returned a {type(result).__name__}, not a run result")
        _history(result.all_messages(), state)
        state.answer = str(result.output)
    return state
