"""A user's batch job that charges each order once and keeps its progress in SQLite, in the
versions its team wrote one after the other (each a ``--app orders.py:FUNCTION`` of the
durable-sim ``python`` target, run unmodified; ``charge`` is the declared effect):

- ``main``, as first written: charge, then record the order as done. A crash between the two
  makes the next run charge the order again;
- ``main_keyed``, fixed: the charge carries the order id as its idempotency key, so the provider
  applies a repeated charge once;
- ``main_strict``, with a startup check that refuses a half-done batch: after a crash between
  two orders its next run raises instead of finishing;
- ``main_graceful``: on SIGTERM it finishes the order in hand, charge and record, and returns.
  Killed, it charges twice as ``main`` does; preempted (SIGTERM, then a deadline), it does not;
- ``main_stubborn``: ignores SIGTERM and takes a second per order, so a preemption ends it with
  the SIGKILL after the grace (keyed, so that costs nothing);
- ``main_script``: ``main_keyed`` ending as a script does, with ``sys.exit``: 0 when the batch is
  done, 1 when it finds it half done (as ``main_strict`` refuses it).
"""

import signal
import sqlite3
import sys
import time
from types import FrameType

ORDERS = [("order-1", 19), ("order-2", 42)]
stopping = False


def charge(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    """The payment provider's client (a stub here; in production, its HTTP call)."""
    return f"charged {amount} for {order_id}"


def _progress() -> sqlite3.Connection:
    db = sqlite3.connect("progress.sqlite")
    db.execute("CREATE TABLE IF NOT EXISTS done (order_id TEXT PRIMARY KEY)")
    return db


def _done(db: sqlite3.Connection) -> list[str]:
    return sorted(row[0] for row in db.execute("SELECT order_id FROM done"))


def _record(db: sqlite3.Connection, order_id: str) -> None:
    with db:
        db.execute("INSERT OR IGNORE INTO done VALUES (?)", (order_id,))


def _run(*, keyed: bool, pause_s: float = 0.0) -> list[str]:
    db = _progress()
    for order_id, amount in ORDERS:
        if stopping:
            break
        if order_id in _done(db):
            continue
        time.sleep(pause_s)
        charge(order_id, amount, idempotency_key=order_id if keyed else None)
        _record(db, order_id)
    return _done(db)


def main() -> list[str]:
    return _run(keyed=False)


def main_keyed() -> list[str]:
    return _run(keyed=True)


def main_strict() -> list[str]:
    done = _done(_progress())
    if 0 < len(done) < len(ORDERS):
        raise RuntimeError(f"a half-done batch: {done}")
    return _run(keyed=True)


def _stop(signum: int, frame: FrameType | None) -> None:
    global stopping
    stopping = True


def main_graceful() -> list[str]:
    signal.signal(signal.SIGTERM, _stop)
    return _run(keyed=False)


def main_stubborn() -> list[str]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return _run(keyed=True, pause_s=1.0)


def main_script() -> None:
    done = _done(_progress())
    if 0 < len(done) < len(ORDERS):
        sys.exit(1)
    _run(keyed=True)
    sys.exit(0)
