"""A refund desk written the way production LangGraph workflows are: a ``TypedDict`` state,
one node per step, no chat model, and the services in a module of their own (``services.py``).

``load_order`` reads the order, ``approve`` asks a human (LangGraph's ``interrupt()``) before any
refund over 50 EUR, ``refund`` calls the payment provider, ``notify`` emails the customer.
``build_graph`` is the first version: it calls the provider and the relay without an
idempotency key. ``build_keyed_graph`` is the fix: each call carries a key made of the thread
and the order (``{thread_id}:{order_id}:refund``), which is the same when LangGraph runs the node
again after a crash, so the provider refunds once. The durable-sim ``langgraph`` target sweeps
both, unmodified, through ``--app graph.py:build_graph``.
"""

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from services import PAYMENTS, Mailer, find_order

#: Refunds above this many euros wait for a human's approval.
APPROVAL_OVER_EUR = 50


class RefundState(TypedDict, total=False):
    order_id: str
    amount_eur: int
    approved: bool
    refund_id: str
    notified: bool


def _key(config: RunnableConfig, state: RefundState, step: str, keyed: bool) -> str | None:
    if not keyed:
        return None
    return f"{config['configurable']['thread_id']}:{state['order_id']}:{step}"


def _build(keyed: bool) -> StateGraph:
    mailer = Mailer()

    def load_order(state: RefundState) -> dict[str, Any]:
        return {"amount_eur": find_order(state["order_id"])["amount_eur"]}

    def approve(state: RefundState) -> dict[str, Any]:
        if state["amount_eur"] <= APPROVAL_OVER_EUR:
            return {"approved": True}
        question = f"Refund {state['amount_eur']} EUR on order {state['order_id']}?"
        return {"approved": bool(interrupt({"question": question}))}

    def refund(state: RefundState, config: RunnableConfig) -> dict[str, Any]:
        key = _key(config, state, "refund", keyed)
        refund_id = PAYMENTS.refund(state["order_id"], state["amount_eur"], idempotency_key=key)
        return {"refund_id": refund_id}

    def notify(state: RefundState, config: RunnableConfig) -> dict[str, Any]:
        to = str(find_order(state["order_id"])["email"])
        if state.get("refund_id"):
            body = f"We refunded {state['amount_eur']} EUR for order {state['order_id']}."
        else:
            body = f"We could not refund order {state['order_id']}; a colleague will call you."
        mailer.send(to, body, idempotency_key=_key(config, state, "notify", keyed))
        return {"notified": True}

    graph = StateGraph(RefundState)
    graph.add_node("load_order", load_order)
    graph.add_node("approve", approve)
    graph.add_node("refund", refund)
    graph.add_node("notify", notify)
    graph.add_edge(START, "load_order")
    graph.add_edge("load_order", "approve")
    graph.add_conditional_edges(
        "approve", lambda state: "refund" if state["approved"] else "notify", ["refund", "notify"]
    )
    graph.add_edge("refund", "notify")
    graph.add_edge("notify", END)
    return graph


def build_graph() -> StateGraph:
    return _build(keyed=False)


def build_keyed_graph() -> StateGraph:
    return _build(keyed=True)
