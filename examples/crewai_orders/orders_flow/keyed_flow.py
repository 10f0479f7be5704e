"""The order flow, keyed: the charge and the confirmation carry idempotency keys derived from
the flow's state id, which ``@persist`` saves and a kickoff with the same id restores, so a
step run again after a crash sends its first attempt's key and the provider answers it with the
first charge."""

from __future__ import annotations

from crewai import LLM
from crewai.flow.flow import Flow, listen, start
from crewai.flow.persistence import persist

from .clients import MAILER, PAYMENTS
from .flow import OrderState

WRITER = LLM(model="gpt-4o-mini", temperature=0.2)


@persist()
class KeyedOrderFlow(Flow[OrderState]):
    @start()
    def create_order(self) -> None:
        if not self.state.order_id:
            self.state.order_id = f"order-{self.state.item.replace(' ', '-')}"

    @listen(create_order)
    def charge_payment(self) -> None:
        if self.state.charge_id:
            return
        key = f"{self.state.id}:charge"
        charge = PAYMENTS.charge(self.state.order_id, self.state.amount_cents, idempotency_key=key)
        self.state.charge_id = charge["id"]

    @listen(charge_payment)
    def send_confirmation(self) -> None:
        if self.state.confirmed:
            return
        body = WRITER.call(
            f"Write a one-line confirmation for {self.state.customer}: order "
            f"{self.state.order_id} ({self.state.item}), charge {self.state.charge_id}."
        )
        key = f"{self.state.id}:confirmation"
        MAILER.send(self.state.customer, f"Your order {self.state.order_id}", body, key)
        self.state.confirmed = True


def build_keyed_flow() -> type[KeyedOrderFlow]:
    return KeyedOrderFlow
