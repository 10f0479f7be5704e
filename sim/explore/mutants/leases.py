"""Mutants of leases and fencing (docs/architecture.md, 1.2): who may write a conversation,
under which epoch, and what a zombie's late write or renewal may do."""

from __future__ import annotations

from typing import TypeVar

from durable import runtime as runtime_mod
from durable.errors import Fenced
from durable.events import EventRecord
from durable.journal import Builder, Journal
from durable.store import file as file_store_mod
from durable.store.base import (
    Append,
    Lease,
    LeaseHeld,
    StaleLease,
    check_batch,
    check_conversation_id,
    check_fence,
)
from durable.store.file import FileStore
from durable.store.postgres import PostgresStore
from durable.store.sql import Executor, SqlStore
from durable.store.sqlite import SQLiteStore
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When
from sim.world.stores import StoreKind

#: The sweep of the fence mutants: the default crash kinds, pauses included (a process kill
#: never lets another owner in between a fence and its write; a pause does).
WITH_PAUSES = (CrashKind.PROCESS, CrashKind.POWER, CrashKind.PAUSE)

#: The connection of whichever database store a planted ``append`` is set on.
ConnT = TypeVar("ConnT", bound=Executor)


@mutant(
    name="zombie-append",
    bug_class="a stale-epoch append accepted (zombie writer)",
    scenario="lease_takeover",
    caught_by=("I3", "I8"),
    also=("I12",),
    witness=None,
    first_kill="none",
)
def zombie_append_accepted(mp: Patcher) -> None:
    """The store checks neither the lease nor the sequence (a plain append-only file): a stale
    owner, paused past its lease, renews and appends with its old epoch and the store accepts."""

    def check_sequences(
        records: list[EventRecord], expected_sequence: int, last_sequence: int
    ) -> None:
        return None

    mp.setattr(file_store_mod, "check_sequences", check_sequences)

    def _fence(self: FileStore, conversation_id: str, owner_id: str, epoch: int) -> None:
        return None

    async def renew_lease(self: FileStore, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
        self._write_lease(renewed)
        return renewed

    mp.setattr(FileStore, "_fence", _fence)
    mp.setattr(FileStore, "renew_lease", renew_lease)


@mutant(
    name="renew-unfenced",
    bug_class="a lease renewal that does not check the stored lease (a zombie takes it back)",
    scenario="lease_takeover",
    caught_by=("I8",),
    also=("I0",),
    witness=None,  # the paused worker's heartbeat puts epoch 1 back over epoch 2
    first_kill="none",
)
def renew_without_fence(mp: Patcher) -> None:
    """``FileStore.renew_lease`` writes the caller's lease back without checking the stored one:
    a zombie's heartbeat after a takeover puts its older epoch back."""

    async def renew_lease(self: FileStore, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        renewed = lease.model_copy(update={"expires_at_s": now_s + ttl_s})
        self._write_lease(renewed)
        return renewed

    mp.setattr(FileStore, "renew_lease", renew_lease)


@mutant(
    name="acquire-ignores-lease",
    bug_class="a lease granted while another owner's is live",
    scenario="idempotent_payment",
    caught_by=("I8",),
    witness=LabelledCrash(label="store.lease.acquire#1", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="0:after:process",
)
def acquire_ignores_live_lease(mp: Patcher) -> None:
    """``FileStore.acquire_lease`` grants the lease even while another owner's is unexpired."""

    async def acquire_lease(
        self: FileStore, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        previous = self._read_lease(conversation_id)
        lease = Lease(
            conversation_id=conversation_id,
            owner_id=owner_id,
            epoch=(previous.epoch + 1) if previous is not None else 1,
            expires_at_s=now_s + ttl_s,
        )
        self._write_lease(lease)
        return lease

    mp.setattr(FileStore, "acquire_lease", acquire_lease)


@mutant(
    name="acquire-keeps-epoch",
    bug_class="a new owner granted the expired lease's epoch (no new fencing token)",
    scenario="idempotent_payment",
    caught_by=("I8",),
    witness=LabelledCrash(label="store.lease.acquire#1", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="0:after:process",
)
def acquire_keeps_epoch(mp: Patcher) -> None:
    """A new owner gets the *same* epoch as the expired lease (no fencing token bump), so two
    incarnations write under one epoch."""

    async def acquire_lease(
        self: FileStore, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        previous = self._read_lease(conversation_id)
        if previous is not None and previous.owner_id != owner_id and previous.expires_at_s > now_s:
            raise LeaseHeld("held", expires_at_s=previous.expires_at_s)
        lease = Lease(
            conversation_id=conversation_id,
            owner_id=owner_id,
            epoch=previous.epoch if previous is not None else 1,
            expires_at_s=now_s + ttl_s,
        )
        self._write_lease(lease)
        return lease

    mp.setattr(FileStore, "acquire_lease", acquire_lease)


@mutant(
    name="release-before-drain",
    bug_class="a graceful shutdown releases the lease before its work has stopped",
    scenario="graceful_shutdown_takeover",
    caught_by=("I8",),
    witness=None,  # the shutdown releases the lease, then the charge takes effect
    first_kill="none",
)
def release_before_drain(mp: Patcher) -> None:
    """A graceful shutdown releases the leases first and only then lets the work drain for a
    grace period before stopping it: a tool or a commit in flight races the next owner."""

    async def _shutdown(self: runtime_mod.Runtime) -> None:
        conversations = list(self._conversations.values())
        for conversation in conversations:
            if not conversation.journal.fenced:
                await self.store.release_lease(conversation.journal.lease)
        await self.ports.clock.sleep_until(self.ports.clock.now() + self.config.heartbeat_s)
        for conversation in conversations:
            conversation._scope.cancel()
        for conversation in conversations:
            await conversation._stopped.wait()

    mp.setattr(runtime_mod.Runtime, "_shutdown", _shutdown)


@mutant(
    name="fence-outside-transaction-file",
    bug_class="an append fenced by a lease read in a call of its own before the write, not "
    "under the lock that writes it (a takeover between the two lets a zombie's write in)",
    scenario="lease_takeover",
    crash_kinds=WITH_PAUSES,
    caught_by=("I8",),
    also=("I0",),  # the new owner's first commit then finds the zombie's sequence taken
    witness=LabelledCrash(label="store.commit#1", when=When.BEFORE, kind=CrashKind.PAUSE),
    first_kill="7:before:pause",
)
def fence_outside_transaction_file(mp: Patcher) -> None:
    """The file store's ``append`` writes under the conversation's lock without fencing there;
    the journal fences each commit just before, on a lease it reads in a call of its own
    (``current_lease``). ``FileStore`` is synchronous, so under the simulator a process stops
    only at an await: a fence read outside the append and the append itself are the nearest
    pair with one between them -- the operation's ``store.commit`` boundary, where a ``pause``
    lets a standby take the lease over (``sim.world.process.Pauses``). The fleet's
    ``fence-outside-transaction`` (``sim.explore.mutants.fleet``) is the same bug inside the
    store, stopped with a real ``SIGSTOP``."""
    commit = Journal.commit

    async def fenced_first(self: Journal, build: Builder) -> list[EventRecord]:
        lease = self.lease
        stored = await self.store.current_lease(self.state.conversation_id)
        try:
            check_fence(
                stored, self.state.conversation_id, owner_id=lease.owner_id, epoch=lease.epoch
            )
        except StaleLease as exc:
            self.fence()
            raise Fenced(str(exc)) from exc
        return await commit(self, build)

    async def append_unfenced(
        self: FileStore,
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        batch = Append.checked(conversation_id, records, owner_id=owner_id, epoch=epoch)
        with self._exclusive(conversation_id):
            self._fence = _no_fence  # type: ignore[method-assign]  # this append only: the planted bug
            try:
                self._append(batch, expected_sequence=expected_sequence)
            finally:
                del self._fence

    mp.setattr(Journal, "commit", fenced_first)
    mp.setattr(FileStore, "append", append_unfenced)


def _no_fence(conversation_id: str, owner_id: str, epoch: int) -> None:
    """The fence an append of ``fence-outside-transaction-file`` skips (its journal checked)."""


# The SQLite and Postgres stores fence inside the append's transaction (``BEGIN IMMEDIATE``; the
# lease row locked ``FOR UPDATE``). Planted: the fence in a transaction (a statement) of its own,
# the batch written in the next. The sequence check stays with the write, as a careful author
# would keep it, so only a write that lands in the new owner's window between its grant and its
# first append gets through: under the simulator, a ``pause`` before the write's transaction
# (``sim.world.process.Pauses`` holds the new owner there); in the fleet, its fence pause
# (``sim.targets.workers.takeover``, which plants these two as its ``fence-outside-transaction``).


@mutant(
    name="fence-outside-transaction-sqlite",
    bug_class="an append fenced in a SQLite transaction of its own, the batch written in the "
    "next (a takeover between the two lets a zombie's write in)",
    scenario="lease_takeover",
    store=StoreKind.SQLITE,
    crash_kinds=WITH_PAUSES,
    caught_by=("I8",),
    also=("I0",),
    witness=LabelledCrash(label="sqlite.commit", when=When.BEFORE, kind=CrashKind.PAUSE),
    first_kill="22:before:pause",
)
def fence_outside_transaction_sqlite(mp: Patcher) -> None:
    """``SQLiteStore.append`` checks the fence in an autocommit read (``sqlite.fence``), then
    writes the batch in its own ``BEGIN IMMEDIATE`` transaction (``sqlite.commit``)."""
    mp.setattr(SQLiteStore, "append", _append_fenced_apart)


@mutant(
    name="fence-outside-transaction-postgres",
    bug_class="an append fenced in a PostgreSQL statement of its own, the batch written in the "
    "next transaction (a takeover between the two lets a zombie's write in)",
    scenario="lease_takeover",
    store=StoreKind.POSTGRES,
    crash_kinds=(CrashKind.PROCESS, CrashKind.PAUSE),
    caught_by=("I8",),
    also=("I0",),
    witness=LabelledCrash(label="postgres.commit", when=When.BEFORE, kind=CrashKind.PAUSE),
    first_kill="4:before:pause",
)
def fence_outside_transaction_postgres(mp: Patcher) -> None:
    """``PostgresStore.append`` checks the fence in an autocommit statement (the lease row's
    lock ends with it: ``postgres.fence``), then writes the batch in a transaction of its own
    (``postgres.commit``)."""
    mp.setattr(PostgresStore, "append", _append_fenced_apart)


async def _append_fenced_apart(
    self: SqlStore[ConnT],
    conversation_id: str,
    records: list[EventRecord],
    *,
    expected_sequence: int,
    owner_id: str,
    epoch: int,
) -> None:
    """The planted ``append`` of both database stores (``durable.store.sql`` holds their one
    ``append``): the fence on the store's connection outside any transaction (SQLite: an
    autocommit read; PostgreSQL: an autocommit statement, whose row lock ends with it), in a
    blocking call of its own (``KIND.fence``), then the sequence check and the batch in the
    write transaction (``KIND.commit``)."""
    check_conversation_id(conversation_id)
    check_batch(conversation_id, records, owner_id, epoch)

    def fence() -> None:
        self._fence(self._connection(), conversation_id, owner_id, epoch)

    async with self._lock:
        await self._blocking.run(self._label("fence"), fence)
    await self._run(
        self._label("commit"),
        lambda conn: self._insert_batch(conn, conversation_id, records, expected_sequence),
        write=True,
    )
