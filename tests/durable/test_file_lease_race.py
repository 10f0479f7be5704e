"""Worker processes racing for one conversation's lease must never both own it.

``FileStore``'s lease is a read-modify-write of ``lease.json``; inside one event loop nothing can
come between the read and the write, but two OS processes can: both read epoch n and both write
n + 1, each believing it owns the conversation (and fencing, which compares epochs, cannot tell
them apart). The store holds the conversation directory's ``flock`` around every
read-modify-write (``FileStore._exclusive``). These tests race real forked processes; the read is
widened by a short sleep so that the unlocked race is hit every time rather than once in a while,
and the second test shows the check fails when the lock is dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from testkit import run_lease_race

from durable.ports import OsFileSystem
from durable.store import FileStore
from durable.store.base import Lease, StoreError

CONV = "conv-race"
WORKERS = 4
ROUNDS = 60
WIDEN_S = 0.0005  # a pause between reading the lease and writing the next one
JOIN_TIMEOUT_S = 120.0


def _race(root: str, owner: str, out: str, start: Any, *, drop_lock: bool) -> None:
    """One worker (a forked child): acquire the lease ROUNDS times, recording each epoch won."""
    store = FileStore(root, fs=OsFileSystem(), fsync=True)
    if drop_lock:  # the mutant: the read-modify-write without the lock

        @contextmanager
        def unlocked(conversation_id: str) -> Iterator[None]:
            yield

        store._exclusive = unlocked  # type: ignore[method-assign]  # the mutant's patch
    read_lease = store._read_lease

    def slow_read(conversation_id: str) -> Lease | None:
        lease = read_lease(conversation_id)
        time.sleep(WIDEN_S)
        return lease

    store._read_lease = slow_read  # type: ignore[method-assign]  # the test's patch
    won: list[int] = []
    errors: list[str] = []

    async def rounds() -> None:
        for _ in range(ROUNDS):
            try:  # ttl 0: every lease is expired at once, so any worker may take the next epoch
                lease = await store.acquire_lease(CONV, owner, ttl_s=0.0, now_s=0.0)
                won.append(lease.epoch)
            except (StoreError, OSError) as exc:  # a torn or clobbered lease.json: the race
                errors.append(f"{type(exc).__name__}: {exc}")

    start.wait()
    trio.run(rounds)
    Path(out).write_text(json.dumps({"won": won, "errors": errors}), encoding="utf-8")


def _run_race(tmp_path: Path, *, drop_lock: bool) -> tuple[list[int], list[str]]:
    root = str(tmp_path / "store")
    return run_lease_race(
        tmp_path,
        partial(_race, drop_lock=drop_lock),
        lambda owner, out, start: (root, owner, out, start),
        workers=WORKERS,
        join_timeout_s=JOIN_TIMEOUT_S,
    )


def test_racing_processes_never_share_an_epoch(tmp_path: Path) -> None:
    won, errors = _run_race(tmp_path, drop_lock=False)
    assert errors == []
    # Every acquisition got its own epoch, and epochs only grew: 1..WORKERS*ROUNDS, each once.
    assert sorted(won) == list(range(1, WORKERS * ROUNDS + 1))


def test_without_the_lock_the_race_is_caught(tmp_path: Path) -> None:
    """The check above can fail: the same race with the lock dropped hands one epoch to two
    workers (or clobbers the shared ``lease.json.tmp`` under another writer)."""
    won, errors = _run_race(tmp_path, drop_lock=True)
    shared = len(won) - len(set(won))
    assert shared > 0 or errors, "the unlocked race went unnoticed"
