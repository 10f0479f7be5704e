"""Lease heartbeat: renew the conversation's lease every ``heartbeat_s`` so it never expires while
this process is alive and responsive. If a renewal finds a newer epoch, this process was fenced (it
was paused past its TTL and another owner took over) and must stop writing."""

from __future__ import annotations

from collections.abc import Callable

from durable.errors import Fenced
from durable.journal import Journal


async def heartbeat(journal: Journal, *, on_fenced: Callable[[], None]) -> None:
    """Renew at ``start + k * heartbeat_s``: fixed deadlines, not ``heartbeat_s`` after the last
    renewal ended, so the renewals' own duration (zero on the simulator's clock, a few
    milliseconds of real I/O) never shifts later beats. A process that was paused past several
    beats renews once on waking and keeps the grid (it does not renew once per missed beat)."""
    clock = journal.ports.clock
    period_s = journal.config.heartbeat_s
    assert period_s < journal.config.lease_ttl_s, "heartbeat must beat the TTL"
    deadline_s = clock.now() + period_s
    while True:
        await clock.sleep_until(deadline_s)
        while deadline_s <= clock.now():
            deadline_s += period_s
        try:
            await journal.renew_locked()
        except Fenced:
            on_fenced()
            return
