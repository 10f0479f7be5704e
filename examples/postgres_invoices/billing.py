"""The payment provider's client, as the team's other services use it (a stub here; in
production, an HTTPS call to the provider). ``idempotency_key``: the provider applies a repeated
charge with the same key once and answers as it did the first time."""

from __future__ import annotations


def charge(invoice_id: str, amount_cents: int, *, idempotency_key: str | None = None) -> str:
    """Charge the invoice's customer ``amount_cents``; the provider's charge id."""
    return f"ch_{invoice_id}_{amount_cents}"
