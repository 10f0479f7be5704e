"""A user's batch job, as first written: charge each order, then record it as done in SQLite.

The durable-sim ``python`` target runs ``main`` unmodified (``--app orders.py:main --effect
charge=exactly_once``) and finds the duplicate: a crash after the charge and before the commit
that records it makes the next run charge the order again.
"""

import sqlite3

ORDERS = [("order-1", 19), ("order-2", 42)]


def charge(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    """The payment provider's client (a stub here; in production, its HTTP call)."""
    return f"charged {amount} for {order_id}"


def main() -> list[str]:
    db = sqlite3.connect("progress.sqlite")
    db.execute("CREATE TABLE IF NOT EXISTS done (order_id TEXT PRIMARY KEY)")
    for order_id, amount in ORDERS:
        if db.execute("SELECT 1 FROM done WHERE order_id = ?", (order_id,)).fetchone():
            continue
        charge(order_id, amount)
        with db:
            db.execute("INSERT INTO done VALUES (?)", (order_id,))
    return sorted(row[0] for row in db.execute("SELECT order_id FROM done"))
