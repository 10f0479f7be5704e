"""The batch job keeping its progress in a JSON file (written to a temporary, then renamed over
the old one): a crash between a charge and the rename that records it charges it again.
"""

import json
import os
from pathlib import Path

ORDERS = [("order-1", 19), ("order-2", 42)]
PROGRESS = Path("done.json")


def charge(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    return f"charged {amount} for {order_id}"


def main() -> list[str]:
    done: list[str] = json.loads(PROGRESS.read_text()) if PROGRESS.exists() else []
    for order_id, amount in ORDERS:
        if order_id in done:
            continue
        charge(order_id, amount)
        done.append(order_id)
        with open("done.json.tmp", "w") as tmp:
            json.dump(done, tmp)
        os.replace("done.json.tmp", PROGRESS)
    return sorted(done)
