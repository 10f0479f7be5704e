"""The CrewAI flow under test, its crash boundaries, and the caller's restart.

Imports crewai at module level: import this module only in a child process (or the zygote,
after ``sim.targets.crewai.offline``), under the target's own environment
(``sim.targets.crewai``).

The flow is an agent loop written the way CrewAI's docs write flows: a ``@start`` method that
puts the user's request in the state, a ``@router`` that asks the LLM for the next step (a tool
call, or the answer) and appends it to the state, a ``@listen`` method that runs the tool call
and appends its result, looping back to the router. Everything the loop knows is in the state,
so the router runs a call the state holds without a result before it asks the model again (a
model API refuses a conversation whose tool call has no result). The model is CrewAI's own LLM
interface: a ``BaseLLM`` subclass whose ``call`` answers from the payment script, as a provider's
does when it is given tools and no functions to run (OpenAI-style tool calls, else text).

Why a restart runs a method again: ``@persist`` saves the state after a method completes
(``Flow._execute_method`` -> ``_persist_method_completion`` -> ``SQLiteFlowPersistence
.save_state``), never during one, and ``kickoff(inputs={"id": ...})`` restores only the state
(``Flow.kickoff_async`` -> ``_restore_state``): no record of which methods completed, so the
flow runs from its start method again over the restored state. A method killed after its effect
and before its save left the state as it was before it, and so runs again.

The flow opts out of the memory every ``Flow`` creates by default (``_skip_auto_memory``, as
CrewAI's own internal flows do): it never remembers or recalls, and that memory is a LanceDB
store under the user's data directory, outside the point, whose import takes about 5 s a process
and starts a thread the zygote cannot fork.

Determinism: the flow id is fixed (``FLOW_ID``), and the scripted model derives each tool call
id from the process and its own call count (``call_p1_1``), as a real model mints a new id for
every response. CrewAI's own ids (events, executions) are random and never reach the judge.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from typing import Any

from crewai.flow.flow import Flow, FlowState, listen, or_, router, start
from crewai.flow.persistence import SQLiteFlowPersistence, persist
from crewai.llms.base_llm import BaseLLM
from pydantic import Field

from sim.targets.boundaries import wrap_method
from sim.targets.crewai import DB_NAME, FLOW_ID
from sim.targets.crewai.conversation import (
    Message,
    answer,
    answered,
    pending_call,
    results_since_user,
    row,
)
from sim.targets.protocol import PAYMENT_ANSWER, PAYMENT_SCRIPT, PAYMENT_USER_INPUT, ChildContext

#: The router's two routes: run the pending tool call, or finish with the answer.
RUN_TOOL = "run_tool"
DONE = "done"

# The child's context, set before the flow runs: the tools reach the point's ledger through it.
_CTX: ChildContext | None = None


class PaymentState(FlowState):
    """The flow's structured state: its id (``FlowState``'s) and the conversation."""

    messages: list[Message] = Field(default_factory=list)


class ScriptedLlm(BaseLLM):
    """A ``BaseLLM`` whose reply depends on the messages: the number of tool results since the
    user's last text picks the next call (charge, then receipt, then the answer), so a restarted
    flow gets the turn a real model would. Each call crosses ``model.call#n``."""

    process: str = "reader"
    calls: int = 0

    def call(
        self,
        messages: str | list[Message],
        tools: list[dict[str, Any]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> str | list[Message]:
        del tools, callbacks, available_functions, from_task, from_agent, response_model
        if _CTX is None:
            raise RuntimeError("the flow's model runs only inside a target child")
        said = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
        label = _CTX.boundaries.numbered("model.call")
        _CTX.boundaries.before(label, what=f"{len(said)} message(s) in")
        self.calls += 1
        done = results_since_user(said)
        reply: str | list[Message] = PAYMENT_ANSWER
        if done < len(PAYMENT_SCRIPT):
            name, args = PAYMENT_SCRIPT[done]
            function = {"name": name, "arguments": json.dumps(args)}
            reply = [
                {
                    "id": f"call_{self.process}_{self.calls}",
                    "type": "function",
                    "function": function,
                }
            ]
        _CTX.boundaries.after(label)
        return reply


def _schema(name: str, description: str, properties: dict[str, str]) -> dict[str, Any]:
    """A tool as an OpenAI-style function schema (what ``BaseLLM.call`` is given as ``tools``)."""
    props = {key: {"type": kind} for key, kind in properties.items()}
    parameters = {"type": "object", "properties": props, "required": list(properties)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOL_SCHEMAS = [
    _schema(
        "charge_card",
        "Charge the customer's card for an invoice.",
        {"invoice": "string", "amount_eur": "integer"},
    ),
    _schema(
        "send_receipt", "Email the receipt of an invoice.", {"to": "string", "invoice": "string"}
    ),
]


def _apply(flow_id: str, call_id: str, service: str, op: str, tool: str, detail: str) -> None:
    """A tool's effect on the ledger; the ``idempotent`` variant keys it by the flow id and the
    tool call id, which the persisted state keeps and a method run again reads back."""
    if _CTX is None:
        raise RuntimeError("the flow's tools run only inside a target child")
    _CTX.effect(
        service=service,
        op=op,
        tool=tool,
        call_id=call_id,
        key=f"{flow_id}:{call_id}",
        detail=detail,
    )


def charge_card(flow_id: str, call_id: str, invoice: str, amount_eur: int) -> str:
    """Charge the customer's card for an invoice."""
    _apply(flow_id, call_id, "payments", "charge", "charge_card", f"{invoice} {amount_eur} EUR")
    return f"charged {amount_eur} EUR for {invoice}"


def send_receipt(flow_id: str, call_id: str, to: str, invoice: str) -> str:
    """Email the receipt of an invoice."""
    _apply(flow_id, call_id, "outbox", "send", "send_receipt", f"receipt {invoice} to {to}")
    return f"receipt for {invoice} sent to {to}"


TOOLS: dict[str, Callable[..., str]] = {"charge_card": charge_card, "send_receipt": send_receipt}


def build_flow(persistence: SQLiteFlowPersistence, llm: ScriptedLlm) -> Any:
    """The flow class as a user writes it, persisted by ``persistence`` (a class made per process:
    ``@persist`` takes its backend when the class is defined, and the file is the point's)."""

    @persist(persistence)
    class PaymentFlow(Flow[PaymentState]):
        _skip_auto_memory: bool = True  # no memory (the module docstring says why)

        @start()
        def begin(self) -> None:
            if not self.state.messages:
                self.state.messages.append({"role": "user", "content": PAYMENT_USER_INPUT})

        @router(or_(begin, "act"))
        def think(self) -> str:
            messages = self.state.messages
            if pending_call(messages) is not None:
                return RUN_TOOL
            reply = llm.call(messages, tools=TOOL_SCHEMAS)
            if isinstance(reply, list):
                messages.append({"role": "assistant", "content": None, "tool_calls": reply})
                return RUN_TOOL
            messages.append({"role": "assistant", "content": reply})
            return DONE

        @listen(RUN_TOOL)
        def act(self) -> None:
            call = pending_call(self.state.messages)
            assert call is not None, "the router routes here only with a call pending"
            name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
            result = TOOLS[name](self.state.id, call["id"], **args)
            self.state.messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": result}
            )

        @listen(DONE)
        def finish(self) -> str | None:
            return answer(self.state.messages)

    return PaymentFlow


def _describe_init(self: Any) -> str:
    del self
    return "flow_states and pending_feedback tables, if missing"


def _describe_save(self: Any, flow_uuid: str, method_name: str, state_data: Any) -> str:
    """A save in a trace row: after which method, and how long the conversation is."""
    del self, flow_uuid
    return f"after {method_name}: {len(state_data.messages)} message(s)"


def run_child(ctx: ChildContext) -> str:
    """Kick the flow off, or off again over its saved state; ``none`` once it has answered."""
    global _CTX
    _CTX = ctx
    # CrewAI locks the database through a file in the temp directory (``crewai_core.lock_store``),
    # one per database path: the point's directory keeps it, instead of one left in /tmp a point.
    tempfile.tempdir = str(ctx.point_dir)
    wrap_method(
        SQLiteFlowPersistence, "init_db", ctx.boundaries, "persistence.init_db", _describe_init
    )
    wrap_method(
        SQLiteFlowPersistence,
        "save_state",
        ctx.boundaries,
        "persistence.save_state",
        _describe_save,
    )
    persistence = SQLiteFlowPersistence(str(ctx.point_dir / DB_NAME))
    saved = persistence.load_state(FLOW_ID)
    messages: list[Message] = list(saved["messages"]) if saved else []
    if answer(messages) is not None:
        return "none"
    if saved is not None:
        ctx.boundaries.note(
            what="resume_state",
            next=[row(messages, messages[-1])] if messages else [],
            tasks=[],
            saved=answered(messages),
        )
    flow = build_flow(persistence, ScriptedLlm(model="scripted", process=ctx.process))()
    flow.kickoff(inputs={"id": FLOW_ID})
    return "resume" if saved is not None else "start"
