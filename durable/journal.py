"""The journal: one conversation's durable state machine inside one process.

It owns the in-memory ``State`` (always ``reduce`` of the committed log), the lease, and the only
path by which anything is written: ``commit``. A commit is built from the current state under a
lock (so the check and the write are one step), sealed into records, appended with the expected
sequence, owner and epoch, and only then applied to the in-memory state. If the store rejects it,
nothing was written and nothing is applied.

Recovery (``Journal.open``) takes the newest checkpoint that verifies and whose ``through_sequence``
is present in the log, replays the records after it, and falls back to the older checkpoint or a
full replay otherwise; its cost is bounded by the checkpoint interval, not by the history.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from durable.config import RuntimeConfig
from durable.errors import Fenced
from durable.events import Event as EventT
from durable.events import EventRecord, LeaseAcquired, RunStopped, TaskSettled
from durable.ports import Ports
from durable.state import State, apply, new_state
from durable.store.base import (
    Checkpoint,
    CorruptStore,
    Lease,
    LeaseHeld,
    StaleLease,
    Store,
    checkpoint_usable,
    make_checkpoint,
)

Builder = Callable[[State], list[EventT]]


class Journal:
    def __init__(
        self, *, store: Store, ports: Ports, config: RuntimeConfig, state: State, lease: Lease
    ) -> None:
        self.store = store
        self.ports = ports
        self.config = config
        self.state = state
        self.lease = lease
        self.fenced = False
        self._lock = trio.Lock()
        # Tasks settled in the log, and records since the last one settled (or this journal
        # opened): where the next checkpoint falls (``_checkpoint_due``).
        self._settled_tasks = sum(1 for t in state.tasks.values() if t.status == "terminal")
        self._since_settled = 0
        # When this process last acquired or renewed the lease (the heartbeat's phase): a
        # journal is made as its lease is acquired (``open``; recovery reads take no time).
        self.lease_granted_at_s = ports.clock.now()
        self._changed = trio.Event()
        self.on_commit: Callable[[], None] = lambda: None
        self.on_renewal: Callable[[], None] = lambda: None

    @property
    def records_since_settled(self) -> int:
        """Records applied since a task last settled, or since this journal was opened: with
        the state's settled tasks, when it writes the next checkpoint. Process-local, so a host
        inspecting a process reads it here (the simulator compares it between a crashed run and
        the fault-free one)."""
        return self._since_settled

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        *,
        store: Store,
        ports: Ports,
        config: RuntimeConfig,
        conversation_id: str,
        owner_id: str,
    ) -> Journal:
        """Acquire the lease (waiting out another owner's unexpired lease), recover the state,
        and record the new epoch in the log."""
        lease = await acquire_lease(store, ports, config, conversation_id, owner_id)
        state = await recover_state(store, conversation_id)
        if lease.epoch <= state.epoch:
            current = await store.current_lease(conversation_id)
            if current is not None and current.epoch > lease.epoch:
                # Another owner took the lease between our acquisition and our read of the log
                # (this process was paused past its TTL while opening): we are fenced, and the
                # store is fine.
                raise Fenced(
                    f"{conversation_id}: lease epoch {lease.epoch} was taken over (epoch "
                    f"{current.epoch}, {current.owner_id}) before this process recovered"
                )
            # The lease record went back (e.g. an operator deleted it): writing under this epoch
            # would put a second owner of an old epoch into the log, which nothing could replay.
            raise CorruptStore(
                f"{conversation_id}: the store granted lease epoch {lease.epoch}, but the log "
                f"already holds epoch {state.epoch}; the lease record was reset"
            )
        journal = cls(store=store, ports=ports, config=config, state=state, lease=lease)
        acquired = LeaseAcquired(
            owner_id=lease.owner_id, epoch=lease.epoch, expires_at_s=lease.expires_at_s
        )
        await journal.commit(lambda s: [acquired])
        return journal

    # -- writing -------------------------------------------------------------------------------

    async def commit(self, build: Builder) -> list[EventRecord]:
        """Build events from the current state and append them as one atomic batch.

        Returns the committed records (empty if ``build`` returned nothing). Raises ``Fenced`` if
        the lease is lost; nothing is written then.
        """
        async with self._lock:
            if self.fenced:
                raise Fenced(f"{self.state.conversation_id}: lease lost")
            # A commit whose caller was cancelled while it waited here (a graceful shutdown
            # began) must not start: the next owner resumes what was in flight, not more.
            # This yields only when cancelled, so an uncancelled commit schedules as before.
            await trio.lowlevel.checkpoint_if_cancelled()
            await self._ensure_lease_fresh()
            events = build(self.state)
            if not events:
                return []
            records = self._seal(events, self.lease.epoch)
            try:
                await self.store.append(
                    self.state.conversation_id,
                    records,
                    expected_sequence=self.state.last_sequence + 1,
                    owner_id=self.lease.owner_id,
                    epoch=records[0].epoch,
                )
            except StaleLease as exc:
                self.fence()
                raise Fenced(str(exc)) from exc
            for record in records:
                apply(self.state, record)
            # Waiters are woken before the checkpoint: writing it may be a cancellation point,
            # and an applied commit must never go unannounced.
            self._notify()
            due = self._checkpoint_due(records)
            if due is not None:
                await self._checkpoint(renew=due)
            return records

    def _checkpoint_due(self, records: list[EventRecord]) -> bool | None:
        """Whether a checkpoint follows this commit (None: no; else whether it renews the lease).

        A checkpoint follows a commit that stops a run, or whose settled tasks cross a multiple
        of ``checkpoint_every_tasks`` (it then renews the lease), or whose records since a task
        last settled cross a multiple of ``checkpoint_every`` (a bound: a log that settles no
        task, inputs queued or a crash loop's lease records, is not left to grow unread).

        Each is a function of the log's content, not of this process's history: a recovery adds
        records (its ``LeaseAcquired``, a tool call's second intent) but settles no task, so
        from the first task settled after a crash a replacement process checkpoints and renews
        where the process it replaced would have, and the heartbeat, which counts from the last
        renewal, beats where it would have (docs/architecture.md, 1.3)."""
        settled = sum(isinstance(r.event, TaskSettled) for r in records)
        every_tasks = self.config.checkpoint_every_tasks
        every_records = self.config.checkpoint_every
        before_tasks, before_records = self._settled_tasks, self._since_settled
        self._settled_tasks += settled
        self._since_settled = 0 if settled else before_records + len(records)
        if any(isinstance(r.event, RunStopped) for r in records):
            return False  # the heartbeat renews a conversation that goes on
        if before_tasks // every_tasks != self._settled_tasks // every_tasks:
            return True
        if before_records // every_records != self._since_settled // every_records:
            return False
        return None

    def _seal(self, events: list[EventT], epoch: int) -> list[EventRecord]:
        ids = self.ports.ids
        now = self.ports.clock.now()
        batch = ids.new("batch")
        first = self.state.last_sequence + 1
        return [
            EventRecord(
                conversation_id=self.state.conversation_id,
                sequence=first + i,
                event_id=ids.new("evt"),
                recorded_at_s=now,
                batch=batch,
                batch_index=i,
                last_in_batch=i == len(events) - 1,
                owner_id=self.lease.owner_id,
                epoch=epoch,
                event=event,
            ).sealed()
            for i, event in enumerate(events)
        ]

    async def _checkpoint(self, *, renew: bool) -> None:
        checkpoint = make_checkpoint(self.state, self.ports.clock.now())
        try:
            await self.store.save_checkpoint(
                checkpoint, owner_id=self.lease.owner_id, epoch=self.lease.epoch
            )
        except StaleLease as exc:
            self.fence()
            raise Fenced(str(exc)) from exc
        if renew:
            await self.renew()

    async def _ensure_lease_fresh(self) -> None:
        """Renew before writing if the lease is past half its TTL: a paused process that wakes up
        after losing its lease finds out here (``Fenced``) instead of writing as a zombie."""
        now = self.ports.clock.now()
        if now < self.lease.expires_at_s - self.config.lease_ttl_s / 2:
            return
        await self.renew()

    async def ensure_lease(self) -> None:
        """Raise ``Fenced`` if the lease is lost, renewing it first if it is past half its TTL.
        Called before a tool runs: it narrows (cannot close) the window in which a process that
        was paused past its lease acts as a zombie. Only a fenced service closes it."""
        async with self._lock:
            if self.fenced:
                raise Fenced(f"{self.state.conversation_id}: lease lost")
            # Nor may a tool whose caller was cancelled while it waited here (see ``commit``)
            # start, or renew the lease for it.
            await trio.lowlevel.checkpoint_if_cancelled()
            await self._ensure_lease_fresh()

    async def renew_locked(self, *, granted_at_s: float) -> None:
        """Renew under the commit lock (the heartbeat's entry point), unless the lease was
        renewed since ``granted_at_s`` while the heartbeat waited for the lock."""
        async with self._lock:
            if self.fenced:
                raise Fenced(f"{self.state.conversation_id}: lease lost")
            if self.lease_granted_at_s == granted_at_s:
                await self.renew()

    async def renew(self) -> None:
        now_s = self.ports.clock.now()
        try:
            self.lease = await self.store.renew_lease(
                self.lease, ttl_s=self.config.lease_ttl_s, now_s=now_s
            )
        except StaleLease as exc:
            self.fence()
            raise Fenced(str(exc)) from exc
        self.lease_granted_at_s = now_s
        self.on_renewal()

    # -- observing -----------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        self.on_commit()

    async def wait_changed(self) -> None:
        """Wait for the next commit (or fencing)."""
        await self._changed.wait()

    def fence(self) -> None:
        self.fenced = True
        self._notify()


async def acquire_lease(
    store: Store, ports: Ports, config: RuntimeConfig, conversation_id: str, owner_id: str
) -> Lease:
    """Acquire, sleeping until another owner's lease expires (bounded by ``lease_wait_limit``)."""
    for _ in range(config.lease_wait_limit):
        try:
            return await store.acquire_lease(
                conversation_id, owner_id, ttl_s=config.lease_ttl_s, now_s=ports.clock.now()
            )
        except LeaseHeld as held:
            await ports.clock.sleep_until(max(held.expires_at_s, ports.clock.now()) + 1e-3)
    raise LeaseHeld(
        f"{conversation_id}: lease still held after {config.lease_wait_limit} waits",
        expires_at_s=float("nan"),
    )


def usable_checkpoint(checkpoint: Checkpoint, conversation_id: str) -> State | None:
    """The checkpoint's state if recovery may start from it (``checkpoint_usable``: the one
    rule, which the stores also read to check, before writing, what a recovery will read)."""
    if not checkpoint_usable(checkpoint, conversation_id):
        return None
    state = checkpoint.to_state()
    if state.last_sequence != checkpoint.through_sequence:
        return None
    return state


async def recover_state(store: Store, conversation_id: str) -> State:
    """Newest valid checkpoint whose ``through_sequence`` is in the log, then the records after it;
    else the older checkpoint; else a full replay. Repairs a torn log tail (we hold the lease)."""
    for checkpoint in await store.load_checkpoints(conversation_id):
        state = usable_checkpoint(checkpoint, conversation_id)
        if state is None:
            continue
        through = checkpoint.through_sequence
        records = await store.read_records(conversation_id, max(through - 1, 0), repair=True)
        if through > 0 and (not records or records[0].sequence != through):
            continue  # the checkpoint claims events the log does not have: never trust it
        for record in records:
            if record.sequence > through:
                apply(state, record)
        return state
    state = new_state(conversation_id)
    for record in await store.read_records(conversation_id, 0, repair=True):
        apply(state, record)
    return state
