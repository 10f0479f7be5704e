"""The refund desk's clients of outside services: the order book (read only), the payment
provider and the mail relay. Stubs here, returning what the real ones would, with no network;
in production each is an HTTP client of a provider that deduplicates a call by the
``idempotency_key`` it is given.

``PAYMENTS`` is the client object the app shares (crash-tested as ``services:PAYMENTS.refund``),
``Mailer`` a class the app instantiates where it needs one (``services:Mailer.send``).
"""

from dataclasses import dataclass

#: The order book: what a customer paid and where to write to them.
ORDERS = {
    "A-17": {"amount_eur": 80, "email": "ada@example.com"},
    "B-05": {"amount_eur": 20, "email": "bob@example.com"},
}


def find_order(order_id: str) -> dict[str, object]:
    """An order as the shop's database holds it (a read: no effect on anyone)."""
    return dict(ORDERS[order_id])


class PaymentsClient:
    """The payment provider's API client."""

    def refund(self, order_id: str, amount_eur: int, idempotency_key: str | None = None) -> str:
        """Refund ``amount_eur`` on the order's card; the provider's refund id. A call with
        an ``idempotency_key`` it has seen returns the first call's refund instead."""
        return f"re_{order_id}_{amount_eur}"


@dataclass
class Mailer:
    """The mail relay's client."""

    sender: str = "refunds@shop.example"

    def send(self, to: str, body: str, *, idempotency_key: str | None = None) -> str:
        """Send one email; the relay's message id."""
        return f"msg_{to}"


PAYMENTS = PaymentsClient()
