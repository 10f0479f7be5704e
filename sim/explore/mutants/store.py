"""Mutants of the store and its files: the log's reader and writer, checkpoints, the
atomic-write protocol (tmp, fsync, rename, fsync dir), what an acknowledgement promises, and
what the reader does with damaged synced data (docs/crash-model.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypedDict, Unpack

from durable import events as events_mod
from durable import journal as journal_mod
from durable.codec import canonical_json, parse_json, sha256_hex
from durable.events import SCHEMA_VERSION, EventRecord
from durable.state import State
from durable.store import base as store_base_mod
from durable.store import file as file_store_mod
from durable.store import logscan as logscan_mod
from durable.store import sql as sql_store_mod
from durable.store.base import Append, Checkpoint, CorruptStore, Lease, Store
from durable.store.file import FileStore
from durable.store.logscan import LogScan
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When
from sim.world.stores import StoreKind

STORAGE = (
    CrashKind.PROCESS,
    CrashKind.POWER,
    CrashKind.STORAGE,
)  # the sweep of a damage-handling bug needs the faults


class _AppendOptions(TypedDict):
    """The keyword options of ``Store.append``, passed through as they came."""

    expected_sequence: int
    owner_id: str
    epoch: int


class _RecoverableRows(TypedDict):
    """The keyword options of ``durable.store.base.check_recoverable_rows``, passed through."""

    stored: Lease | None
    last_row: tuple[int, str] | None
    checkpoint_rows: list[tuple[int, str]]
    rows_after: Callable[[int], list[tuple[int, str]]]


@mutant(
    name="tmp-not-fsynced",
    bug_class="checkpoint/lease rename without fsync of the temporary file",
    scenario="idempotent_payment",
    caught_by=("I0",),
    witness=LabelledCrash(label="fs.fsync_dir:c1/", when=When.AFTER, kind=CrashKind.POWER),
    first_kill="5:after:power",
)
def tmp_not_fsynced_before_rename(mp: Patcher) -> None:
    """Atomic write without fsync of the temporary file: after power loss the renamed target may
    be empty or torn (checkpoints, and the lease file)."""

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        tmp = f"{directory}/{name}.tmp"
        self._fs.write(tmp, data)
        self._fs.rename(tmp, f"{directory}/{name}")
        if durable:
            self._fs.fsync_dir(directory)

    mp.setattr(FileStore, "_atomic_write", _atomic_write)


@mutant(
    name="lease-in-place",
    bug_class="lease file rewritten in place (no temporary file, no rename)",
    scenario="idempotent_payment",
    caught_by=("I0",),
    witness=LabelledCrash(
        label="fs.open_trunc:c1/lease.json", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="2:after:process",
)
def lease_written_in_place(mp: Patcher) -> None:
    """The lease file rewritten in place (no temporary file, no rename), though fsynced: a
    process killed between the truncating open and the data leaves an empty ``lease.json`` --
    the most common crash-consistency bug in the literature (ALICE, CrashMonkey)."""

    def _write_lease(self: FileStore, lease: Lease) -> None:
        directory = self._ensure_dir(lease.conversation_id)
        path = f"{directory}/{file_store_mod.LEASE_FILE}"
        self._fs.write(path, file_store_mod.encode_lease(lease))
        self._fs.fsync(path)
        self._fs.fsync_dir(directory)

    mp.setattr(FileStore, "_write_lease", _write_lease)


@mutant(
    name="checkpoint-in-place",
    bug_class="checkpoint written in place under its final name (no temporary file, no rename)",
    scenario="read_edit_answer",
    caught_by=("I2",),
    also=("I0",),
    witness=LabelledCrash(
        label="fs.open_trunc:c1/checkpoint-000000000024.json",
        when=When.AFTER,
        kind=CrashKind.PROCESS,
    ),
    first_kill="49:after:process",
)
def checkpoint_written_in_place(mp: Patcher) -> None:
    """Checkpoints written straight under their final name (no temporary file, no rename): a
    crash mid-write leaves a torn checkpoint where only complete ones may stand."""
    original = FileStore._atomic_write

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        if not name.startswith("checkpoint-"):
            original(self, directory, name, data, durable=durable)
            return
        self._fs.write(f"{directory}/{name}", data)
        if durable:
            self._fs.fsync(f"{directory}/{name}")
            self._fs.fsync_dir(directory)

    mp.setattr(FileStore, "_atomic_write", _atomic_write)


@mutant(
    name="no-dir-fsync",
    bug_class="no directory fsync after the rename",
    scenario="crash_during_recovery",
    caught_by=("I0",),
    witness=LabelledCrash(label="store.commit#6", when=When.AFTER, kind=CrashKind.POWER),
    first_kill="23:after:process,31:after:power",
)
def no_dir_fsync_after_rename(mp: Patcher) -> None:
    """Atomic write without the directory fsync: power loss may undo the rename, so a lease can
    go back to an older epoch (and a fencing token is handed out twice)."""

    def _atomic_write(
        self: FileStore, directory: str, name: str, data: bytes, *, durable: bool
    ) -> None:
        tmp = f"{directory}/{name}.tmp"
        self._fs.write(tmp, data)
        if durable:
            self._fs.fsync(tmp)
        self._fs.rename(tmp, f"{directory}/{name}")

    mp.setattr(FileStore, "_atomic_write", _atomic_write)


@mutant(
    name="torn-tail-trusted",
    bug_class="torn log tail trusted on open",
    scenario="read_edit_answer",
    caught_by=("I2",),
    also=("I12", "I7"),
    # The second append is commit #2's; its enumerated tear ~2 cuts it at a record end inside
    # the batch: complete lines of an incomplete batch.
    witness=LabelledCrash(
        label="fs.append:c1/events.jsonl", when=When.AFTER, kind=CrashKind.POWER, nth=2, tear=2
    ),
    first_kill="12:after:power~2",
)
def trust_torn_tail(mp: Patcher) -> None:
    """The file store's reader trusts the complete lines of an incomplete (torn) last batch."""
    original = FileStore._scan

    def _scan(self: FileStore, conversation_id: str, path: str) -> LogScan:
        scan = original(self, conversation_id, path)
        if scan.tail_problem is None:
            return scan
        data = self._fs.read(path)
        records, offsets, pos = list(scan.records), list(scan.offsets), scan.good_end
        while (newline := data.find(b"\n", pos)) >= 0:
            record, why = logscan_mod.check_line(data[pos:newline], conversation_id)
            if record is None or why is not None or record.sequence != len(records) + 1:
                break
            records.append(record)
            offsets.append(pos)
            pos = newline + 1
        return dataclasses.replace(scan, records=records, offsets=offsets, good_end=pos)

    mp.setattr(FileStore, "_scan", _scan)


@mutant(
    name="checksums-unverified",
    bug_class="checksums not verified on load",
    scenario="abort_mid_tool",
    caught_by=("I2",),
    also=("I5", "I11"),
    witness=LabelledCrash(
        label="fs.append:c1/events.jsonl", when=When.AFTER, kind=CrashKind.POWER, nth=7
    ),
    first_kill="46:after:power",
)
def checksums_not_verified(mp: Patcher) -> None:
    """The file store's reader parses records but never checks their checksums, so a damaged
    (partially programmed) sector that still parses is trusted."""

    def check_line(line: bytes, conversation_id: str) -> tuple[EventRecord | None, str | None]:
        try:
            record = events_mod.parse_record(line)
        except ValueError as exc:
            return None, f"does not parse ({type(exc).__name__})"
        if record.conversation_id != conversation_id:
            return None, "another conversation"
        return record, None

    mp.setattr(logscan_mod, "check_line", check_line)


@mutant(
    name="expected-sequence-ignored",
    bug_class="expected_sequence ignored (duplicate or gapped sequences)",
    scenario="read_edit_answer",
    caught_by=("I2", "I3"),
    also=("I8",),
    witness=LabelledCrash(label="store.commit#13", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="60:after:process",
)
def expected_sequence_ignored(mp: Patcher) -> None:
    """The stores do not check ``expected_sequence`` -- and the writer's idea of the tail is stale
    (recovery from a checkpoint does not replay the records after it). With the check, that bug
    is a loud ``SequenceConflict``; without it, sequences are silently duplicated."""

    def check_sequences(
        records: list[EventRecord], expected_sequence: int, last_sequence: int
    ) -> None:
        return None

    mp.setattr(file_store_mod, "check_sequences", check_sequences)
    mp.setattr(sql_store_mod, "check_sequences", check_sequences)
    original = journal_mod.recover_state

    async def recover_state(store: Store, conversation_id: str) -> State:
        for checkpoint in await store.load_checkpoints(conversation_id):
            state = journal_mod.usable_checkpoint(checkpoint, conversation_id)
            if state is not None:
                await store.read_records(conversation_id, 0, repair=True)
                return state  # the records after the checkpoint are never applied
        return await original(store, conversation_id)

    mp.setattr(journal_mod, "recover_state", recover_state)


@mutant(
    name="checkpoint-ahead",
    bug_class="checkpoint written ahead of the events it claims",
    scenario="read_edit_answer",
    caught_by=("I3",),
    witness=None,  # the periodic checkpoint through #19 claims #20, and the log has a #20
    first_kill="none",
)
def checkpoint_claims_one_more(mp: Patcher) -> None:
    """A checkpoint of the state through N is labelled (and checksummed) as through N+1."""

    def make_checkpoint(state: State, saved_at_s: float) -> Checkpoint:
        body: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "conversation_id": state.conversation_id,
            "through_sequence": state.last_sequence + 1,
            "saved_at_s": saved_at_s,
            "state": state.model_dump(mode="json"),
        }
        return Checkpoint(**body, checksum=sha256_hex(canonical_json(body)))

    mp.setattr(journal_mod, "make_checkpoint", make_checkpoint)


@mutant(
    name="checkpoint-drops-field",
    bug_class="recovery from a checkpoint drops a field (the request-id index)",
    scenario="read_edit_answer",
    caught_by=("I3",),
    witness=LabelledCrash(label="store.checkpoint#1", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="48:after:process",
)
def checkpoint_restore_drops_request_ids(mp: Patcher) -> None:
    """Recovery from a checkpoint restores every field but the request-id index (a field added
    after the checkpoint format, forgotten in ``to_state``): the rebuilt state is not the log's,
    and a re-sent request would start a second submission."""
    original = journal_mod.usable_checkpoint

    def usable_checkpoint(checkpoint: Checkpoint, conversation_id: str) -> State | None:
        state = original(checkpoint, conversation_id)
        if state is not None:
            state.request_ids.clear()
        return state

    mp.setattr(journal_mod, "usable_checkpoint", usable_checkpoint)


@mutant(
    name="append-skips-fsync",
    bug_class="a batch acknowledged without its fsync (FileStore(fsync=True))",
    scenario="idempotent_payment",
    caught_by=("I12",),
    also=("I5",),  # the client re-sends the lost input and gets a new submission
    # The mutant's trace has no fsync boundaries: the append of commit #3 is its boundary.
    witness=LabelledCrash(label="store.commit#3", when=When.BEFORE, kind=CrashKind.POWER),
    first_kill="11:before:power",
)
def append_skips_fsync(mp: Patcher) -> None:
    """``FileStore(fsync=True).append`` acknowledges a batch without fsyncing it: a power loss
    takes an acknowledged input with it."""
    original = FileStore.append

    async def append(
        self: FileStore,
        conversation_id: str,
        records: list[EventRecord],
        **kwargs: Unpack[_AppendOptions],
    ) -> None:
        saved, self._fsync = self._fsync, False
        try:
            await original(self, conversation_id, records, **kwargs)
        finally:
            self._fsync = saved

    mp.setattr(FileStore, "append", append)


@mutant(
    name="ack-before-durable",
    bug_class="an input acknowledged before it is durable",
    scenario="idempotent_payment",
    caught_by=("I12",),
    also=("I5",),  # the client re-sends the lost input and gets a new submission
    witness=LabelledCrash(
        label="fs.append:c1/events.jsonl", when=When.BEFORE, kind=CrashKind.POWER, nth=3
    ),
    first_kill="14:before:power",
)
def ack_before_durable(mp: Patcher) -> None:
    """``submit`` returns before its commit is durable (the append is not fsynced when the input
    is acknowledged), so an acknowledged input can vanish in a power loss."""
    original = FileStore.append

    async def append(
        self: FileStore,
        conversation_id: str,
        records: list[EventRecord],
        **kw: Unpack[_AppendOptions],
    ) -> None:
        if any(r.event.type == "input_accepted" for r in records):
            saved, self._fsync = self._fsync, False
            try:
                await original(self, conversation_id, records, **kw)
            finally:
                self._fsync = saved
            return
        await original(self, conversation_id, records, **kw)

    mp.setattr(FileStore, "append", append)


@mutant(
    name="damage-as-torn-tail",
    bug_class="damage to synced data read as a torn tail (acknowledged commits truncated)",
    scenario="read_edit_answer",
    crash_kinds=STORAGE,
    caught_by=("I23",),  # the damage table refuses it; I12 and I5 see the loss later on
    also=("I12", "I5"),
    witness=LabelledCrash(label="store.commit#2", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="11:after:storage",
)
def damage_read_as_torn_tail(mp: Patcher) -> None:
    """The file store's reader treats *any* damaged line as a torn tail, even one followed by
    valid later commits: damage to synced data is silently truncated away (with every
    acknowledged commit after it). Only the storage-fault mode produces such damage."""

    def _check_tail(self: FileStore, path: str, scan: LogScan) -> None:
        return None

    mp.setattr(FileStore, "_check_tail", _check_tail)


@mutant(
    name="repair-before-refusing",
    bug_class="a store that refuses damaged data only after cutting it away",
    scenario="read_edit_answer",
    crash_kinds=STORAGE,
    caught_by=("I13",),
    witness=LabelledCrash(label="store.commit#2", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="11:after:storage",
)
def repair_before_refusing(mp: Patcher) -> None:
    """The file store's reader cuts the log at the first damaged line *before* deciding whether
    the damage is a torn tail or corruption: it still refuses, but the evidence (the damaged
    line and every acknowledged commit after it) is gone."""
    original = FileStore._check_tail

    def _check_tail(self: FileStore, path: str, scan: LogScan) -> None:
        assert scan.anomaly is not None  # the store checks only a log with an anomaly
        self._fs.truncate(path, scan.anomaly.offset)
        original(self, path, scan)

    mp.setattr(FileStore, "_check_tail", _check_tail)


@mutant(
    name="corruption-unnamed",
    bug_class="a corruption error that does not name the damaged file",
    scenario="read_edit_answer",
    crash_kinds=STORAGE,
    caught_by=("I13",),
    also=("I23",),  # nor does it give the table's reason
    witness=LabelledCrash(label="store.commit#2", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="11:after:storage",
)
def corruption_unnamed(mp: Patcher) -> None:
    """The store refuses damaged data, but its error does not say which file is damaged (an
    operator is left to search the whole store)."""
    original = FileStore._check_tail

    def _check_tail(self: FileStore, path: str, scan: LogScan) -> None:
        try:
            original(self, path, scan)
        except CorruptStore:
            raise CorruptStore("the store is corrupt") from None

    mp.setattr(FileStore, "_check_tail", _check_tail)


@mutant(
    name="unparseable-checkpoint-skipped",
    bug_class="an unparseable checkpoint skipped under fsync=True (recovered from the log)",
    scenario="read_edit_answer",
    crash_kinds=STORAGE,
    caught_by=("I23",),
    witness=LabelledCrash(label="store.checkpoint#2", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="67:after:storage",
)
def unparseable_checkpoint_skipped(mp: Patcher) -> None:
    """``FileStore(fsync=True)`` skips a checkpoint that does not parse, as the mode without
    fsync may (a power loss can tear one there), and recovers from the older one or the log.
    Every acknowledged commit survives, so only the damage table's promise -- the atomic write
    never leaves an unparseable checkpoint, so one is damage to refuse -- tells it apart."""

    def _load_checkpoints(self: FileStore, conversation_id: str) -> list[Checkpoint]:
        directory, found, _ = self._checkpoint_files(conversation_id)
        out: list[Checkpoint] = []
        for _through, name in found:
            try:
                data = parse_json(self._read_file(f"{directory}/{name}"))
                out.append(Checkpoint.model_validate(data))
            except ValueError:
                continue
        out.sort(key=lambda cp: cp.through_sequence, reverse=True)
        return out

    mp.setattr(FileStore, "_load_checkpoints", _load_checkpoints)


@mutant(
    name="short-log-repaired",
    bug_class="a log shorter than a checkpoint repaired instead of refused (fsync=True)",
    scenario="read_edit_answer",
    crash_kinds=STORAGE,
    caught_by=("I23",),
    also=("I6", "I11"),  # the lost commits' effects and model calls are done again
    witness=LabelledCrash(label="store.checkpoint#1", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="48:after:storage",
)
def short_log_repaired(mp: Patcher) -> None:
    """``FileStore(fsync=True)`` no longer checks that its log reaches its newest checkpoint: a
    log cut at a commit boundary, emptied or deleted under a checkpoint is taken for a shorter
    log, the checkpoints beyond it are set aside, and the acknowledged commits the checkpoint
    proves are gone without a word. Only a storage fault that cuts a synced log makes one."""

    def _check_no_lost_commits(self: FileStore, conversation_id: str, last_sequence: int) -> None:
        return None

    mp.setattr(FileStore, "_check_no_lost_commits", _check_no_lost_commits)


@mutant(
    name="tail-cut-without-copy",
    bug_class="a log tail that a checkpoint or a later commit proves acknowledged cut without a "
    "quarantine copy (FileStore(fsync=False))",
    scenario="weak_durability_nofsync",
    crash_kinds=STORAGE,
    caught_by=("I23",),
    # The release's lease write syncs the directory, so the newest checkpoint's name survives
    # the power loss while the unsynced log loses its last commits: a tail that checkpoint
    # proves.
    witness=LabelledCrash(label="store.lease.release#1", when=When.AFTER, kind=CrashKind.POWER),
    first_kill="38:after:power~1",
)
def tail_cut_without_copy(mp: Patcher) -> None:
    """``FileStore``'s repair takes every tail for a torn one: it no longer looks for proof
    (``_tail_proof``), so a tail that a checkpoint beyond it, or a valid later commit, proves
    acknowledged is cut with no quarantine copy -- the bytes are gone for good. Without fsync a
    power loss may take that suffix anyway, so every oracle that judges what the log holds
    passes; only the damage table's repair (copy, then cut: I23) tells."""

    def _tail_proof(self: FileStore, conversation_id: str, scan: LogScan) -> str | None:
        return None

    mp.setattr(FileStore, "_tail_proof", _tail_proof)


@mutant(
    name="sqlite-damaged-row-as-end",
    bug_class="SQLiteStore reads an event row that fails its checksum as the end of the log (as "
    "a file store cuts a torn tail) instead of refusing it",
    scenario="idempotent_payment",
    store=StoreKind.SQLITE,
    crash_kinds=STORAGE,
    caught_by=("I23",),
    also=("I0",),  # the batch it appends next meets the rows it did not read: a conflict
    # Commit #4 checkpoints SQLite's log into the database file: every row is in a synced page.
    witness=LabelledCrash(label="store.commit#4", when=When.AFTER, kind=CrashKind.STORAGE),
    first_kill="33:after:storage",
)
def sqlite_damaged_row_as_end(mp: Patcher) -> None:
    """``SQLiteStore`` treats a row that does not parse or verify as where its log ends: the
    acquisition's check lets it pass, and recovery reads the rows before it (to the end of the
    last whole batch) and goes on from there. A transaction commits whole, so no crash leaves
    such a row -- only damage to a synced page of the database file does, which the damage
    table says the store refuses, naming the row."""
    # The names the database stores' shared bodies (``durable.store.sql``) call them by are
    # patched; the originals are the base's.
    check_recoverable_rows = store_base_mod.check_recoverable_rows
    verified_rows = store_base_mod.verified_rows

    def lenient_check(place: str, conversation_id: str, **kwargs: Unpack[_RecoverableRows]) -> None:
        try:
            check_recoverable_rows(place, conversation_id, **kwargs)
        except CorruptStore as exc:
            if "events row (" not in str(exc):
                raise

    def rows_before_damage(
        place: str, conversation_id: str, start: int, rows: list[tuple[int, str]]
    ) -> list[EventRecord]:
        kept: list[tuple[int, str, bool]] = []
        for sequence, text in rows:
            try:
                record = events_mod.parse_record(text)
            except ValueError:
                break
            if not record.verify():
                break
            kept.append((sequence, text, record.last_in_batch))
        while kept and not kept[-1][2]:
            kept.pop()
        return verified_rows(place, conversation_id, start, [(s, t) for s, t, _ in kept])

    mp.setattr(sql_store_mod, "check_recoverable_rows", lenient_check)
    mp.setattr(sql_store_mod, "verified_rows", rows_before_damage)


#: The sequence numbers whose commit ``fsync-skipped-on-round-sequence`` does not sync.
ROUND_SEQUENCE = 8


@mutant(
    name="fsync-skipped-on-round-sequence",
    bug_class="a commit acknowledged unsynced when it holds a sequence number divisible by 8",
    scenario="plan_edit_validate",
    caught_by=("I11",),
    # A record numbered a multiple of 8 is appended unsynced; the power fails before a later
    # commit syncs the log.
    witness=LabelledCrash(label="store.commit#5", when=When.BEFORE, kind=CrashKind.POWER),
    first_kill="20:before:power",
    absolute=True,
)
def fsync_skipped_on_round_sequence(mp: Patcher) -> None:
    """``FileStore._append`` skips its fsync for a batch holding a sequence number divisible
    by ``ROUND_SEQUENCE`` (an optimisation keyed on the absolute number): a power loss right
    after that commit takes an acknowledged record. A crashed run's log is longer than the
    fault-free run's by its recovery records, so the unsynced commit is another one there."""
    append = FileStore._append

    def _append(self: FileStore, batch: Append, *, expected_sequence: int) -> None:
        if not any(r.sequence % ROUND_SEQUENCE == 0 for r in batch.records):
            append(self, batch, expected_sequence=expected_sequence)
            return
        durable = self._fsync
        self._fsync = False  # this append's syncs only (a repair of a torn tail's too)
        try:
            append(self, batch, expected_sequence=expected_sequence)
        finally:
            self._fsync = durable

    mp.setattr(FileStore, "_append", _append)
