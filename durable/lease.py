"""Lease heartbeat: renew the conversation's lease every ``heartbeat_s`` so it never expires while
this process is alive and responsive. If a renewal finds a newer epoch, this process was fenced (it
was paused past its TTL and another owner took over) and must stop writing."""

from __future__ import annotations

from collections.abc import Callable

from durable.journal import Fenced, Journal


async def heartbeat(journal: Journal, *, on_fenced: Callable[[], None]) -> None:
    clock = journal.ports.clock
    assert journal.config.heartbeat_s < journal.config.lease_ttl_s, "heartbeat must beat the TTL"
    while True:
        await clock.sleep_until(clock.now() + journal.config.heartbeat_s)
        try:
            await journal.renew_locked()
        except Fenced:
            on_fenced()
            return
