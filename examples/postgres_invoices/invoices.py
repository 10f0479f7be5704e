"""A nightly job that charges every unpaid invoice, as a team writes it: the invoices live in
PostgreSQL (SQLAlchemy's ORM on psycopg 3, the database named by ``DATABASE_URL``), each is
charged through the payments client of another module (``billing.charge``), then marked paid and
committed. The tables are created if missing, and two invoices seeded once, so the job runs on
an empty database.

Entry points (``--app invoices.py:FUNCTION`` of the durable-sim ``python`` target, with
``--postgres`` for a database per point):

- ``main``, as first written: charge, then mark paid and commit. A crash between the two makes
  the next run charge the invoice again;
- ``main_keyed``, fixed: the charge carries the invoice id as its idempotency key, so the
  provider applies a repeated charge once.
"""

from __future__ import annotations

import os

from billing import charge
from sqlalchemy import Engine, create_engine, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

SEED = (("inv-1", "ada@example.com", 1900), ("inv-2", "grace@example.com", 4200))


class Base(DeclarativeBase):
    pass


class Invoice(Base):
    __tablename__ = "invoices"

    id: Mapped[str] = mapped_column(primary_key=True)
    customer: Mapped[str]
    amount_cents: Mapped[int]
    paid: Mapped[bool] = mapped_column(default=False)


def _engine() -> Engine:
    # DATABASE_URL is a libpq URI (postgresql://...); SQLAlchemy reads that scheme as psycopg2's.
    url = os.environ["DATABASE_URL"].replace("postgresql://", "postgresql+psycopg://", 1)
    return create_engine(url)


def _setup(engine: Engine) -> None:
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        if session.scalar(select(func.count()).select_from(Invoice)) == 0:
            session.add_all(
                Invoice(id=id_, customer=customer, amount_cents=amount)
                for id_, customer, amount in SEED
            )
            session.commit()


def _run(*, keyed: bool) -> list[str]:
    engine = _engine()
    _setup(engine)
    with Session(engine) as session:
        unpaid = session.scalars(
            select(Invoice).where(Invoice.paid.is_(False)).order_by(Invoice.id)
        ).all()
        for invoice in unpaid:
            charge(
                invoice.id,
                invoice.amount_cents,
                idempotency_key=invoice.id if keyed else None,
            )
            invoice.paid = True
            session.commit()
        paid = sorted(session.scalars(select(Invoice.id).where(Invoice.paid)))
    engine.dispose()
    return paid


def main() -> list[str]:
    return _run(keyed=False)


def main_keyed() -> list[str]:
    return _run(keyed=True)
