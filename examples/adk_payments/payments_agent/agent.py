"""The billing agent: one ``LlmAgent`` with two tools, in an ``App`` that ADK can resume after a
crash (``ResumabilityConfig``)."""

from __future__ import annotations

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig

from . import keyed_tools, tools

INSTRUCTION = (
    "You are the billing assistant. Charge the invoice the customer names with charge_card, "
    "then email its receipt with send_receipt, then tell the customer it is done."
)


def _billing_app(charge_card: object, send_receipt: object) -> App:
    agent = LlmAgent(
        name="billing_agent",
        model="gemini-2.5-flash",
        instruction=INSTRUCTION,
        tools=[charge_card, send_receipt],
    )
    return App(
        name="billing",
        root_agent=agent,
        resumability_config=ResumabilityConfig(is_resumable=True),
    )


def build_app() -> App:
    return _billing_app(tools.charge_card, tools.send_receipt)


def build_keyed_app() -> App:
    return _billing_app(keyed_tools.charge_card, keyed_tools.send_receipt)
