"""A user's own LangGraph support agent, as a team would write it: a model node bound to two
tools and LangGraph's prebuilt ``ToolNode``. ``refund`` and ``send_email`` are the clients of the
payment provider and the mail relay (stubs here; HTTP calls in production).

``build_graph`` is the first version; ``build_keyed_graph`` is the fix the docs advise: each
tool passes an idempotency key made of the thread and the tool call id, so the provider applies
a refund re-run after a crash once. The durable-sim ``langgraph`` target sweeps both, unmodified,
through ``--app support_graph.py:build_graph``.
"""

from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


def refund(order_id: str, amount_eur: int, idempotency_key: str | None = None) -> str:
    return f"refunded {amount_eur} EUR on {order_id}"


def send_email(to: str, body: str, idempotency_key: str | None = None) -> str:
    return f"emailed {to}"


def _key(config: RunnableConfig, tool_call_id: str, keyed: bool) -> str | None:
    return f"{config['configurable']['thread_id']}:{tool_call_id}" if keyed else None


def _tools(keyed: bool) -> list[Any]:
    @tool
    def refund_order(
        order_id: str,
        amount_eur: int,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Refund an order to the customer's card."""
        key = _key(config, tool_call_id, keyed)
        return refund(order_id, amount_eur, idempotency_key=key)

    @tool
    def email_customer(
        to: str,
        body: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Email the customer."""
        return send_email(to, body, idempotency_key=_key(config, tool_call_id, keyed))

    return [refund_order, email_customer]


def _build(model: Any, keyed: bool) -> StateGraph:
    tools = _tools(keyed)
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


def build_graph(model: Any) -> StateGraph:
    return _build(model, keyed=False)


def build_keyed_graph(model: Any) -> StateGraph:
    return _build(model, keyed=True)
