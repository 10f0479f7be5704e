"""A user's own pydantic-ai travel agent, as a team would write it: an ``Agent`` with two tools,
``book_hotel`` and ``email_confirmation``. ``reserve_room`` and ``send_email`` are the clients of
the hotel-booking API and the mail relay (stubs here; HTTP calls in production).

``build_agent`` is the first version; ``build_keyed_agent`` is the fix: each tool passes the
model's tool call id as the idempotency key. Under DBOS the model request is a step, so a
recovered workflow gets the recorded response back -- the same tool call with the same id -- and
the booking API applies a booking re-run after a crash once. ``build_durable_agent`` and
``build_keyed_durable_agent`` are the same agent with pydantic-ai's ``DBOSDurability``
capability (for ``--durability capability``). The durable-sim ``pydantic-ai`` target sweeps
them, unmodified, through ``--app travel_agent.py:build_agent``.
"""

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.models import Model

INSTRUCTIONS = "You book hotels for the user and email them the confirmation."


def reserve_room(hotel: str, check_in: str, nights: int, idempotency_key: str | None = None) -> str:
    """The booking API: reserves a room and returns the booking reference."""
    return f"BK-{hotel.split()[0].upper()}-{check_in}"


def send_email(to: str, subject: str, body: str, idempotency_key: str | None = None) -> str:
    """The mail relay."""
    return f"sent to {to}"


def _tools(keyed: bool) -> list[Any]:
    def key(ctx: RunContext[None]) -> str | None:
        return ctx.tool_call_id if keyed else None

    async def book_hotel(ctx: RunContext[None], hotel: str, check_in: str, nights: int) -> str:
        """Book a hotel room; returns the booking reference."""
        return reserve_room(hotel, check_in, nights, idempotency_key=key(ctx))

    async def email_confirmation(ctx: RunContext[None], to: str, booking: str) -> str:
        """Email the booking confirmation to the traveller."""
        body = f"Your booking {booking} is confirmed."
        return send_email(to, f"Booking {booking}", body, idempotency_key=key(ctx))

    return [book_hotel, email_confirmation]


def _build(model: Model, keyed: bool, durable: bool) -> Agent[None, str]:
    return Agent(
        model,
        name="travel_agent",
        instructions=INSTRUCTIONS,
        tools=_tools(keyed),
        capabilities=[DBOSDurability()] if durable else [],
    )


def build_agent(model: Model) -> Agent[None, str]:
    return _build(model, keyed=False, durable=False)


def build_keyed_agent(model: Model) -> Agent[None, str]:
    return _build(model, keyed=True, durable=False)


def build_durable_agent(model: Model) -> Agent[None, str]:
    return _build(model, keyed=False, durable=True)


def build_keyed_durable_agent(model: Model) -> Agent[None, str]:
    return _build(model, keyed=True, durable=True)
