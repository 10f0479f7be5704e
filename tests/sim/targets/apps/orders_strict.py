"""The batch job with a startup check that refuses a half-done batch: after a crash between two
orders its next run raises instead of finishing (a liveness finding, I7, not a harness error).
"""

import sqlite3

ORDERS = [("order-1", 19), ("order-2", 42)]


def charge(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    return f"charged {amount} for {order_id}"


def main() -> list[str]:
    db = sqlite3.connect("progress.sqlite")
    db.execute("CREATE TABLE IF NOT EXISTS done (order_id TEXT PRIMARY KEY)")
    done = [row[0] for row in db.execute("SELECT order_id FROM done")]
    if 0 < len(done) < len(ORDERS):
        raise RuntimeError(f"a half-done batch: {done}")
    for order_id, amount in ORDERS:
        charge(order_id, amount, idempotency_key=order_id)
        with db:
            db.execute("INSERT OR IGNORE INTO done VALUES (?)", (order_id,))
    return sorted(row[0] for row in db.execute("SELECT order_id FROM done"))
