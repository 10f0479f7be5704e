"""The pydantic-ai payment agent on Prefect durable execution (``--durability prefect``).

Imports prefect and pydantic_ai at module level: import it only in a child process, after
``sim.targets.pydantic_ai.prefect_env.configure`` (Prefect reads its settings on import), or in
a warm zygote through ``prefect_preload``, whose children have Prefect read their point's
settings again.

The agent is the one every durability runs (``sim.targets.pydantic_ai.script``), given
pydantic-ai's ``PrefectDurability`` capability (what pydantic-ai 2.x recommends over the
deprecated ``PrefectAgent``) and run inside the user's own ``@flow`` with ``persist_result=True``.
The capability makes each model request and each tool call a Prefect task whose result is
persisted (files under ``PREFECT_LOCAL_STORAGE_PATH``) under a cache key of the
``DEFAULT_PYDANTIC_AI_CACHE_POLICY``: the task's inputs with per-run fields stripped, its
source, and ``RUN_ID`` -- the flow run's id. A task whose key has a persisted result is not run
again: it returns that result. That is Prefect's durability, and ``RUN_ID`` means it holds only
for the *same* flow run.

The restart (``--resume recovery``, the default) is therefore what Prefect's CLI does for a
flow run without a deployment, ``prefect flow-run retry NAME --entrypoint FILE:FLOW``
(``prefect/cli/flow_run.py``): find the flow run by its name, set it ``Scheduled`` (forced), and
run the flow locally on that same flow run (``prefect.flow_engine.run_flow``), so the cached
tasks replay. A SIGKILLed flow run is left ``Running`` (nobody reported its crash), and ``retry``
refuses a non-terminal run: the restart first marks it ``Crashed``, which Prefect's own
zombie-flow-run detection does once a run's heartbeats stop. ``--resume rerun`` is the other
thing a user does after a crash: run the flow again, with the same name and parameters -- a new
flow run, whose ``RUN_ID`` matches no cached result.

Determinism: the flow run's name is fixed (``pay-INV-42``; its id is the server's, random per
point but the same across a retry), and the scripted model derives each tool call id from the
process (``call_p1_1``); a replayed model request gives a retry the first process's call id. The
``idempotent`` variant keys each effect by the flow run's name and that tool call id.

Crash boundaries (wrapped in the child only): the model request inside its Prefect task
(``model.request#n``), pydantic-ai's function-tool call inside its task
(``pydantic_ai.call_tool#n``), each effect (``effect:{service}.{op}#{call_id}``), and Prefect's
write of a result record to storage (``prefect.persist_result#n``), which is what makes a task's
result durable.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import uvicorn
from prefect import flow, get_client
from prefect._internal.result_records import ResultRecord
from prefect.client.orchestration import PrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
from prefect.client.schemas.objects import FlowRun, State, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.events.worker import EventsWorker
from prefect.flow_engine import run_flow_async
from prefect.results import ResultStore
from prefect.server.api.server import create_app
from prefect.states import Crashed, Scheduled
from pydantic_ai import Agent, AgentRunResult, RunContext
from pydantic_ai.durable_exec.prefect import PrefectDurability
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from sim.targets.boundaries import Boundaries, wrap_async_method, wrap_method
from sim.targets.protocol import ChildContext
from sim.targets.pydantic_ai.script import (
    AGENT_NAME,
    USER_INPUT,
    ScriptedModel,
    describe_call,
    describe_request,
)

FLOW_NAME = "pay_invoice_with_agent"
FLOW_RUN_NAME = "pay-INV-42"
SERVER_START_S = 240.0  # a loaded machine imports and starts Prefect's API slowly
#: The flow-run states a run no longer moves from by itself.
TERMINAL = (StateType.COMPLETED, StateType.FAILED, StateType.CANCELLED, StateType.CRASHED)

# The child's context and agent, set before the flow runs: the flow is a module-level function
# (what ``--entrypoint FILE:FLOW`` loads) and finds the agent, and the tools the ledger, here.
_CTX: ChildContext | None = None
_AGENT: Agent[None, str] | None = None


def _apply(run: RunContext[None], service: str, op: str, tool: str, detail: str) -> None:
    """A tool's effect on the ledger. The ``idempotent`` variant's key: the flow run's name and
    the tool call id, which a retry gets back unchanged from the replayed model request."""
    if _CTX is None:
        raise RuntimeError("the agent's tools run only inside a target child")
    call_id = str(run.tool_call_id)
    key = f"{FLOW_RUN_NAME}:{call_id}"
    _CTX.effect(service=service, op=op, tool=tool, call_id=call_id, key=key, detail=detail)


async def charge_card(run: RunContext[None], invoice: str, amount_eur: int) -> str:
    """Charge the customer's card for an invoice."""
    _apply(run, "payments", "charge", "charge_card", f"{invoice} {amount_eur} EUR")
    return f"charged {amount_eur} EUR for {invoice}"


async def send_receipt(run: RunContext[None], to: str, invoice: str) -> str:
    """Email the receipt of an invoice."""
    _apply(run, "outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


def build_agent(process: str) -> Agent[None, str]:
    """The agent as a user writes it, given pydantic-ai's Prefect capability (its defaults:
    every task's result persisted, ``DEFAULT_PYDANTIC_AI_CACHE_POLICY``, no task retries)."""
    model = FunctionModel(ScriptedModel(process), model_name="scripted")
    tools = FunctionToolset([charge_card, send_receipt], id="payment_tools")
    return Agent(model, name=AGENT_NAME, toolsets=[tools], capabilities=[PrefectDurability()])


@flow(name=FLOW_NAME, persist_result=True)
async def pay_invoice(prompt: str) -> AgentRunResult[str]:
    """The user's own flow around the agent's run; its result (the run's messages) persisted."""
    if _AGENT is None:
        raise RuntimeError("the flow runs only inside a target child")
    return await _AGENT.run(prompt)


def _describe_record(
    self: object, result_record: ResultRecord[object], *args: object, **kw: object
) -> str:
    """What a result record holds (the key is a hash of the flow run id: random per point)."""
    del self, args, kw
    return f"{type(result_record.result).__name__} result"


def wrap_boundaries(b: Boundaries) -> None:
    """The model request and the tool call inside their Prefect tasks, and Prefect's write of a
    task's (or the flow's) result record, through the sync or the async path, as one kind."""
    wrap_async_method(FunctionModel, "request", b, "model.request", describe_request)
    wrap_async_method(FunctionToolset, "call_tool", b, "pydantic_ai.call_tool", describe_call)
    kind = "prefect.persist_result"
    wrap_method(ResultStore, "_persist_result_record", b, kind, _describe_record)
    wrap_async_method(ResultStore, "_apersist_result_record", b, kind, _describe_record)


class PrefectServer:
    """Prefect's API app served by uvicorn in a daemon thread of this process, on the socket
    ``prefect_env.configure`` bound (see that module for why not a subprocess)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        config = uvicorn.Config(create_app(ephemeral=True), log_level="error", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="prefect-api"
        )

    def __enter__(self) -> PrefectServer:
        self._thread.start()
        host, port = self._sock.getsockname()
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{host}:{port}/api/health", timeout=5.0).is_success:
                    return self
            except httpx.HTTPError:
                pass
            if not self._thread.is_alive():
                break
            time.sleep(0.05)
        raise RuntimeError(f"Prefect's API did not start on {host}:{port}")

    def __exit__(self, *exc: object) -> None:
        # The events (task-run states) the client still holds, delivered while the API is up.
        EventsWorker.drain_all(timeout=10.0)
        self._server.should_exit = True
        self._thread.join(timeout=10.0)


def run_child(ctx: ChildContext, sock: socket.socket) -> str:
    """Serve the point's API, build the agent, then start the flow run, retry it, or do
    nothing if it completed."""
    global _CTX, _AGENT
    _CTX = ctx
    wrap_boundaries(ctx.boundaries)
    _AGENT = build_agent(ctx.process)
    with PrefectServer(sock):
        return asyncio.run(_start_or_retry(ctx))


async def find_runs(client: PrefectClient) -> list[FlowRun]:
    """The flow runs of the payment, oldest first (more than one only after ``rerun``)."""
    name = FlowRunFilter(name=FlowRunFilterName(any_=[FLOW_RUN_NAME]))
    return await client.read_flow_runs(flow_run_filter=name, sort=FlowRunSort.START_TIME_ASC)


async def _start_or_retry(ctx: ChildContext) -> str:
    async with get_client() as client:
        runs = await find_runs(client)
        if any(run.state_type == StateType.COMPLETED for run in runs):
            return "none"
        if runs:
            last = runs[-1]
            state = last.state_name or str(last.state_type)
            ctx.boundaries.note(what="resume_state", next=[state], tasks=[], saved=[])
        if not runs or ctx.options.resume == "rerun":
            await pay_invoice.with_options(flow_run_name=FLOW_RUN_NAME)(USER_INPUT)
            return "start" if not runs else "resume"
        retried = await _reschedule(client, runs[-1])
    final = await run_flow_async(
        pay_invoice, flow_run=retried, parameters=retried.parameters, return_type="state"
    )
    if not isinstance(final, State) or not final.is_completed():
        how = f"{final.name}: {final.message}" if isinstance(final, State) else repr(final)
        raise RuntimeError(f"the retried flow run ended {how}")
    return "resume"


async def _reschedule(client: PrefectClient, run: FlowRun) -> FlowRun:
    """What ``prefect flow-run retry`` does before it runs the flow locally, after marking a
    run a killed process left ``Running`` crashed (as Prefect's zombie detection would)."""
    if run.state_type not in TERMINAL:
        await client.set_flow_run_state(run.id, Crashed(message="process killed"), force=True)
    await client.set_flow_run_state(run.id, Scheduled(message="Retried via CLI"), force=True)
    return await client.read_flow_run(run.id)
