"""The agent's tools, first version: each calls its client once, with no idempotency key."""

from __future__ import annotations

from .clients import MAILER, PAYMENTS


def charge_card(invoice: str, amount_eur: int) -> dict:
    """Charge the customer's card for an invoice, in euros."""
    charge = PAYMENTS.charge(invoice, amount_eur)
    return {"charge_id": charge["id"], "status": charge["status"]}


def send_receipt(to: str, invoice: str) -> dict:
    """Email the receipt of a paid invoice."""
    outcome = MAILER.send(to, f"Receipt for {invoice}", f"Invoice {invoice} is paid. Thank you!")
    return {"outcome": outcome}
