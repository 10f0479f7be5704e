"""The order flow's clients of the outside world: the payment provider's REST API (over httpx)
and the mail relay (a stub here: the harness counts its calls)."""

from __future__ import annotations

import os

import httpx


class PaymentsClient:
    """The payment provider's API. A charge is a POST; given an idempotency key, it goes in the
    ``Idempotency-Key`` header, and the provider answers a repeated key with the first charge
    instead of charging again."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self._http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=10.0
        )

    def charge(self, order_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        response = self._http.post(
            "/v1/charges",
            json={"order": order_id, "amount": amount_cents, "currency": "eur"},
            headers=headers,
        )
        response.raise_for_status()
        return response.json()


class Mailer:
    """The mail relay."""

    def send(self, to: str, subject: str, body: str, idempotency_key: str | None = None) -> str:
        return f"queued {subject!r} for {to}"


PAYMENTS = PaymentsClient(
    "https://api.payments.example.com", os.environ.get("PAYMENTS_API_KEY", "sk_test")
)
MAILER = Mailer()
