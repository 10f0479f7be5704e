"""A process that loses its lease while it is still opening the conversation is fenced, and the
store is not called corrupt.

Found by the fleet mode (``durable-sim workers``): a worker stopped by the kernel between
acquiring the lease and reading the log woke up to a log whose epoch was newer than its own, and
``Journal.open`` reported "the lease record was reset" (``CorruptStore``), an operator's alarm
for what is an ordinary takeover. The lease record really going back stays corrupt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable.config import RuntimeConfig
from durable.errors import Fenced
from durable.events import LeaseAcquired
from durable.journal import Journal
from durable.ports import InlineBlocking, OsFileSystem, Ports, real_ports
from durable.store import FileStore, SQLiteStore
from durable.store.base import CorruptStore, Lease, Store

CONV = "conv-1"
CONFIG = RuntimeConfig(lease_ttl_s=30.0, heartbeat_s=10.0)


def _stores(tmp_path: Path) -> dict[str, Callable[[], Store]]:
    return {
        "file": lambda: FileStore(str(tmp_path / "files"), fs=OsFileSystem(), fsync=True),
        "sqlite": lambda: SQLiteStore(str(tmp_path / "db.sqlite"), blocking=InlineBlocking()),
    }


class _PausedAfterAcquire:
    """A store whose ``acquire_lease`` returns only after ``meanwhile`` ran: the kernel stopped
    this process between the grant and the read of the log."""

    def __init__(self, store: Store, meanwhile: Callable[[Lease], Any]) -> None:
        self._store = store
        self._meanwhile = meanwhile

    async def acquire_lease(self, conversation_id: str, owner_id: str, **kw: Any) -> Lease:
        lease = await self._store.acquire_lease(conversation_id, owner_id, **kw)
        await self._meanwhile(lease)
        return lease

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _ports() -> Ports:
    return real_ports()


@pytest.mark.parametrize("kind", ["file", "sqlite"])
async def test_a_takeover_while_opening_fences_the_opener(kind: str, tmp_path: Path) -> None:
    reopen = _stores(tmp_path)[kind]
    first = await Journal.open(
        store=reopen(), ports=_ports(), config=CONFIG, conversation_id=CONV, owner_id="a"
    )
    await first.store.release_lease(first.lease)

    async def taken_over(lease: Lease) -> None:
        """While "b" is stopped: its lease expires and "c" takes over and commits."""
        other = reopen()
        await other.release_lease(lease)  # expire b's lease, as its TTL would
        await Journal.open(
            store=other, ports=_ports(), config=CONFIG, conversation_id=CONV, owner_id="c"
        )

    paused = _PausedAfterAcquire(reopen(), taken_over)
    with pytest.raises(Fenced, match="taken over"):
        await Journal.open(
            store=paused,
            ports=_ports(),
            config=CONFIG,
            conversation_id=CONV,
            owner_id="b",
        )
    records = await reopen().read_records(CONV)
    owners = [r.event.owner_id for r in records if isinstance(r.event, LeaseAcquired)]
    assert owners == ["a", "c"]  # b wrote nothing


async def test_a_lease_record_that_went_back_is_still_corrupt(tmp_path: Path) -> None:
    """An old copy of ``lease.json`` restored over the current one: a grant would repeat an
    epoch the log already holds, and nobody took over. That is corruption, refused before the
    store writes a new lease, so the next attempt refuses again (the evidence is not
    overwritten by the refusing process's own lease)."""
    reopen = _stores(tmp_path)["file"]
    lease_file = tmp_path / "files" / CONV / "lease.json"
    old_copy: bytes | None = None
    for owner in ("a", "a2"):
        journal = await Journal.open(
            store=reopen(), ports=_ports(), config=CONFIG, conversation_id=CONV, owner_id=owner
        )
        await journal.store.release_lease(journal.lease)
        if owner == "a":
            old_copy = lease_file.read_bytes()  # epoch 1, released
    assert old_copy is not None
    lease_file.write_bytes(old_copy)
    for _ in range(2):
        with pytest.raises(CorruptStore, match="the lease went back"):
            await Journal.open(
                store=reopen(), ports=_ports(), config=CONFIG, conversation_id=CONV, owner_id="b"
            )
        assert lease_file.read_bytes() == old_copy
