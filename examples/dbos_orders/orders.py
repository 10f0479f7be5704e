"""An order workflow on DBOS, as a shop's team would write it: price the order, take the payment,
email the confirmation. ``charge`` and ``send_email`` are its clients of the payment provider and
the mail relay (stubs here; HTTP calls in production): the effects durable-sim counts.

``place_order`` is the first version. Its ``collect_payment`` step charges the card and then
emails the confirmation, one step for "the customer paid", as the docs' one-step examples
suggest. DBOS runs a step at least once: on recovery it skips a step whose output it recorded
and runs again one whose output it did not. A crash anywhere after the charge and before DBOS
records the step's output -- while the email is being sent, or after it -- re-runs the whole
step: the customer is charged twice (and, past the email, emailed twice).

``place_order_keyed`` is the fix: each call to the outside world in a step of its own, and each
passing an idempotency key made of the workflow id and the step id (DBOS keeps both across a
recovery: the same step of the same workflow has the same key), which the provider and the relay
deduplicate. The split alone narrows the window; the key closes it.

Run it yourself with ``python orders.py`` (a SQLite system database in the working directory);
durable-sim loads the module instead and runs the workflow on each point's own database.
"""

from __future__ import annotations

from dbos import DBOS

PRICES_CENTS = {"mug": 1200, "tea-100g": 850}


def charge(customer: str, amount_cents: int, *, idempotency_key: str | None = None) -> str:
    """The payment provider's client: charge the customer's card on file; the charge's id."""
    return f"ch_{customer.split('@')[0]}_{amount_cents}"


def send_email(to: str, subject: str, *, idempotency_key: str | None = None) -> None:
    """The mail relay's client."""


@DBOS.step()
def price_order(items: dict[str, int]) -> int:
    """The order's total from the catalogue (no outside effect)."""
    return sum(PRICES_CENTS[sku] * quantity for sku, quantity in items.items())


@DBOS.step()
def collect_payment(order_id: str, customer: str, total_cents: int) -> str:
    """Charge, then confirm: one step, so a crash before its output is recorded re-runs both."""
    charge_id = charge(customer, total_cents)
    send_email(customer, f"Order {order_id} confirmed: {total_cents / 100:.2f} EUR")
    return charge_id


@DBOS.workflow()
def place_order(order_id: str, customer: str, items: dict[str, int]) -> str:
    total = price_order(items)
    charge_id = collect_payment(order_id, customer, total)
    return f"order {order_id}: charged {total} cents ({charge_id}), confirmation sent to {customer}"


def _key() -> str:
    """The same for the same step of the same workflow, however often DBOS re-runs it."""
    return f"{DBOS.workflow_id}:{DBOS.step_id}"


@DBOS.step()
def charge_customer(customer: str, total_cents: int) -> str:
    return charge(customer, total_cents, idempotency_key=_key())


@DBOS.step()
def send_confirmation(order_id: str, customer: str, total_cents: int) -> None:
    subject = f"Order {order_id} confirmed: {total_cents / 100:.2f} EUR"
    send_email(customer, subject, idempotency_key=_key())


@DBOS.workflow()
def place_order_keyed(order_id: str, customer: str, items: dict[str, int]) -> str:
    total = price_order(items)
    charge_id = charge_customer(customer, total)
    send_confirmation(order_id, customer, total)
    return f"order {order_id}: charged {total} cents ({charge_id}), confirmation sent to {customer}"


if __name__ == "__main__":
    DBOS(config={"name": "dbos-orders", "system_database_url": "sqlite:///orders.sqlite"})
    DBOS.launch()
    print(place_order("order-1001", "ada@example.com", {"mug": 2, "tea-100g": 1}))
