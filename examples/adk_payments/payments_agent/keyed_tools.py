"""The agent's tools, keyed: each call carries an idempotency key made of ADK's invocation id
and the function call's id. The session keeps both, and a resumed invocation runs the same
function call with the same ids, so a repeat reaches the provider with the key it has seen."""

from __future__ import annotations

from google.adk.tools import ToolContext

from .clients import MAILER, PAYMENTS


def _key(tool_context: ToolContext) -> str:
    return f"{tool_context.invocation_id}:{tool_context.function_call_id}"


def charge_card(invoice: str, amount_eur: int, tool_context: ToolContext) -> dict:
    """Charge the customer's card for an invoice, in euros."""
    charge = PAYMENTS.charge(invoice, amount_eur, idempotency_key=_key(tool_context))
    return {"charge_id": charge["id"], "status": charge["status"]}


def send_receipt(to: str, invoice: str, tool_context: ToolContext) -> dict:
    """Email the receipt of a paid invoice."""
    outcome = MAILER.send(
        to,
        f"Receipt for {invoice}",
        f"Invoice {invoice} is paid. Thank you!",
        idempotency_key=_key(tool_context),
    )
    return {"outcome": outcome}
