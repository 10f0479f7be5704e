"""A refund job written as a LangGraph workflow and run as a plain program: no chat messages, its
clients in a module of their own (``services``), its progress in LangGraph's SQLite checkpointer.

``main`` is the job as first written: it starts the graph, or, when a checkpoint is there, asks
``get_state`` whether anything is left and resumes or returns (see README.md for what a crash
sweep finds). Checkpoints are written in the graph's steps (``durability="sync"``), so where a
kill lands does not depend on a background thread's timing.
"""

import sqlite3
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from services import MAILER, PAYMENTS


class Refund(TypedDict, total=False):
    order: str
    amount_eur: int
    refunded: str
    emailed: str


def refund(state: Refund) -> Refund:
    return {"refunded": PAYMENTS.refund(state["order"], state["amount_eur"])}


def email(state: Refund) -> Refund:
    return {"emailed": MAILER.send("ada@example.com", state["refunded"])}


def main() -> str:
    graph = StateGraph(Refund)
    graph.add_node("refund", refund)
    graph.add_node("email", email)
    graph.add_edge(START, "refund")
    graph.add_edge("refund", "email")
    graph.add_edge("email", END)
    conn = sqlite3.connect("desk.db", check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": "order-7"}}
    state = app.get_state(config)
    if state.next:
        result = app.invoke(None, config, durability="sync")
    elif state.values:
        result = state.values
    else:
        result = app.invoke({"order": "A-7", "amount_eur": 42}, config, durability="sync")
    conn.close()
    return result["emailed"]
