"""A user's job that refunds charges over HTTP and keeps its progress in SQLite, in the two
versions its team wrote (each a ``--app refunds.py:FUNCTION`` of the durable-sim ``python``
target, run unmodified; the payment provider's ``POST /v1/refunds`` is the declared HTTP effect,
answered by ``stub.json`` and never sent):

- ``main``, as first written: POST the refund, record the refund id from the answer, mark the
  refund done and commit. A crash between the POST and the commit makes the next run refund the
  charge again;
- ``main_keyed``, fixed: the POST carries ``Idempotency-Key: refund-<id>``, so the provider
  applies a repeated refund once and answers it as it answered the first.
"""

import sqlite3

import httpx

API = "https://payments.example.com/v1/refunds"
PENDING = [(1, "ch_1001", 1900), (2, "ch_1002", 4200)]


def _db() -> sqlite3.Connection:
    """The job's own progress: the refunds to make, created with the two pending ones."""
    db = sqlite3.connect("refunds.sqlite")
    db.execute(
        "CREATE TABLE IF NOT EXISTS refunds (id INTEGER PRIMARY KEY, charge TEXT, amount INTEGER,"
        " refund_id TEXT, status TEXT NOT NULL DEFAULT 'pending')"
    )
    db.executemany("INSERT OR IGNORE INTO refunds (id, charge, amount) VALUES (?, ?, ?)", PENDING)
    db.commit()
    return db


def _run(*, keyed: bool) -> list[tuple[int, str, str]]:
    db = _db()
    pending = db.execute(
        "SELECT id, charge, amount FROM refunds WHERE status = 'pending' ORDER BY id"
    ).fetchall()
    with httpx.Client(timeout=10.0) as client:
        for refund, charge, amount in pending:
            headers = {"Idempotency-Key": f"refund-{refund}"} if keyed else {}
            answer = client.post(API, json={"charge": charge, "amount": amount}, headers=headers)
            answer.raise_for_status()
            refund_id = answer.json()["id"]
            db.execute("UPDATE refunds SET refund_id = ? WHERE id = ?", (refund_id, refund))
            db.execute("UPDATE refunds SET status = 'done' WHERE id = ?", (refund,))
            db.commit()
    return db.execute("SELECT id, refund_id, status FROM refunds ORDER BY id").fetchall()


def main() -> list[tuple[int, str, str]]:
    return _run(keyed=False)


def main_keyed() -> list[tuple[int, str, str]]:
    return _run(keyed=True)
