"""The desk's clients of the payment provider and the mail relay (stubs: the harness counts)."""


class Payments:
    def refund(self, order: str, amount_eur: int) -> str:
        return f"refunded {amount_eur} EUR on {order}"


class Mailer:
    def send(self, to: str, body: str) -> str:
        return f"sent to {to}"


PAYMENTS = Payments()
MAILER = Mailer()
