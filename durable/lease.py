"""Lease heartbeat: renew the conversation's lease ``heartbeat_s`` after its last renewal so it
never expires while this process is alive and responsive. If a renewal finds a newer epoch, this
process was fenced (it was paused past its TTL and another owner took over) and must stop
writing."""

from __future__ import annotations

from collections.abc import Callable

import trio

from durable.errors import Fenced
from durable.journal import Journal


async def heartbeat(journal: Journal, *, on_fenced: Callable[[], None]) -> None:
    """Renew ``heartbeat_s`` after the lease was last acquired or renewed, by this beat or by a
    checkpoint (``Journal._checkpoint``), not on a grid from this process's start: the
    renewals then fall at times the log decides, so a process that replaced a crashed one
    renews where the crashed one would have (docs/architecture.md, 1.3). A renewal elsewhere
    cancels the wait (``Journal.on_renewal``) so the next beat is measured from it. A process
    that was paused past several beats renews once on waking."""
    clock = journal.ports.clock
    period_s = journal.config.heartbeat_s
    assert period_s < journal.config.lease_ttl_s, "heartbeat must beat the TTL"
    while True:
        granted_at_s = journal.lease_granted_at_s
        if clock.now() < granted_at_s + period_s:
            with trio.CancelScope() as wait:
                journal.on_renewal = wait.cancel
                await clock.sleep_until(granted_at_s + period_s)
            continue
        try:
            await journal.renew_locked(granted_at_s=granted_at_s)
        except Fenced:
            on_fenced()
            return
