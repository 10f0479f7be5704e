"""The batch job of ``orders.py`` with a graceful shutdown: on SIGTERM it finishes the order in
hand -- the charge and the commit that records it -- and returns. Killed, it charges an order
twice as ``orders.py`` does; preempted (SIGTERM, then a deadline), it sweeps clean.
"""

import signal
import sqlite3
from types import FrameType

ORDERS = [("order-1", 19), ("order-2", 42)]
stopping = False


def charge(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    """The payment provider's client (a stub here; in production, its HTTP call)."""
    return f"charged {amount} for {order_id}"


def _stop(signum: int, frame: FrameType | None) -> None:
    global stopping
    stopping = True


def main() -> list[str]:
    signal.signal(signal.SIGTERM, _stop)
    db = sqlite3.connect("progress.sqlite")
    db.execute("CREATE TABLE IF NOT EXISTS done (order_id TEXT PRIMARY KEY)")
    for order_id, amount in ORDERS:
        if stopping:
            break
        if db.execute("SELECT 1 FROM done WHERE order_id = ?", (order_id,)).fetchone():
            continue
        charge(order_id, amount)
        with db:
            db.execute("INSERT INTO done VALUES (?)", (order_id,))
    return sorted(row[0] for row in db.execute("SELECT order_id FROM done"))
