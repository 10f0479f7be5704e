"""The ``python`` target's demo: a batch job as a team first writes it, charging each order and
then recording it in SQLite (``main``), and its fix, the order id as the charge's idempotency key
(``main_keyed``). The conformance test (``tests/sim/targets/test_conformance.py``) sweeps both;
``examples/orders_job`` is the same job with the versions that came after.

Run in a target child only: it writes ``progress.sqlite`` in the working directory.
"""

from __future__ import annotations

import sqlite3

ORDERS = (("order-1", 19), ("order-2", 42))


def charge(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    """The payment provider's client (the declared effect)."""
    return f"charged {amount} for {order_id}"


def _run(*, keyed: bool) -> list[str]:
    db = sqlite3.connect("progress.sqlite")
    db.execute("CREATE TABLE IF NOT EXISTS done (order_id TEXT PRIMARY KEY)")
    for order_id, amount in ORDERS:
        if db.execute("SELECT 1 FROM done WHERE order_id = ?", (order_id,)).fetchone():
            continue
        charge(order_id, amount, idempotency_key=order_id if keyed else None)
        with db:
            db.execute("INSERT INTO done VALUES (?)", (order_id,))
    return sorted(row[0] for row in db.execute("SELECT order_id FROM done"))


def main() -> list[str]:
    return _run(keyed=False)


def main_keyed() -> list[str]:
    return _run(keyed=True)
