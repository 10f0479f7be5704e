"""The order flow, first version: each step calls its client once, with no idempotency key.

Each method checks the state first, so a flow kicked off again over its saved state skips what
it already did.
"""

from __future__ import annotations

from crewai import LLM
from crewai.flow.flow import Flow, listen, start
from crewai.flow.persistence import persist
from pydantic import BaseModel

from .clients import MAILER, PAYMENTS

WRITER = LLM(model="gpt-4o-mini", temperature=0.2)


class OrderState(BaseModel):
    id: str = ""
    customer: str = ""
    item: str = ""
    amount_cents: int = 0
    order_id: str = ""
    charge_id: str = ""
    confirmed: bool = False


@persist()
class OrderFlow(Flow[OrderState]):
    @start()
    def create_order(self) -> None:
        if not self.state.order_id:
            self.state.order_id = f"order-{self.state.item.replace(' ', '-')}"

    @listen(create_order)
    def charge_payment(self) -> None:
        if self.state.charge_id:
            return
        charge = PAYMENTS.charge(self.state.order_id, self.state.amount_cents)
        self.state.charge_id = charge["id"]

    @listen(charge_payment)
    def send_confirmation(self) -> None:
        if self.state.confirmed:
            return
        body = WRITER.call(
            f"Write a one-line confirmation for {self.state.customer}: order "
            f"{self.state.order_id} ({self.state.item}), charge {self.state.charge_id}."
        )
        MAILER.send(self.state.customer, f"Your order {self.state.order_id}", body)
        self.state.confirmed = True


def build_flow() -> type[OrderFlow]:
    return OrderFlow
