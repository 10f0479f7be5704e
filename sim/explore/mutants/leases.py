"""Mutants of leases and fencing (docs/architecture.md, 1.2): who may write a conversation,
under which epoch, and what a zombie's late write or renewal may do."""

from __future__ import annotations

from typing import Any

from durable import runtime as runtime_mod
from durable.store import file as file_store_mod
from durable.store.base import Lease, LeaseHeld
from durable.store.file import FileStore
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When


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

    def check_sequences(records: Any, expected_sequence: int, last_sequence: int) -> None:
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

    async def _shutdown(self: Any) -> None:
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
