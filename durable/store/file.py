"""``FileStore``: a directory per conversation holding a JSONL event log, checkpoints and a lease.

Layout under ``root``::

    {conversation_id}/events.jsonl                      one sealed EventRecord per line
    {conversation_id}/lease.json                        the current Lease and its checksum
    {conversation_id}/checkpoint-{through:012d}.json    up to two Checkpoints
    {conversation_id}/quarantine-{n:04d}.{what}         what recovery moved aside (never read)

Every file operation goes through the ``FileSystem`` port, so the simulator can crash the process
(or cut the power) between any two of them and then check that what survives is what the
durability mode promises (see the ``FileStore`` docstring).

Commit rule of the log: a batch (the records of one ``append``) is committed only once its last
record (``last_in_batch``) is complete, parses and verifies. Whatever follows the last committed
batch is a *tail*. A tail is what a crash leaves behind (a torn last write) and is never trusted;
a damaged record *followed by* valid later records is damage to committed data and is reported as
``CorruptStore`` instead of being silently dropped. Telling the two apart is a pure function of
the log's bytes (``durable.store.logscan``); what to do about each is this store's.

Nothing damaged is ever deleted. Where recovery goes on past damage (``fsync=False``: the mode
may lose a suffix), it first copies the bytes it cannot explain to a **quarantine** file beside
the log (the atomic-write protocol, durably, *then* the cut), and moves a checkpoint it cannot
use aside under a quarantine name instead of deleting it; ``python -m durable inspect`` reports
every quarantine file. Only a torn tail -- what the scanner can explain as a crash's leftover,
and no checkpoint beyond it proves acknowledged (``_tail_proof``) -- is cut without a copy. The
damage table (``durable.store.damage``) says what each mode does.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast

from durable.codec import LEASE_FILES, canonical_json, parse_json, sha256_hex
from durable.events import EventRecord
from durable.ports import FileSystem
from durable.store.base import (
    Append,
    Checkpoint,
    CorruptStore,
    Lease,
    check_conversation_id,
    check_fence,
    check_lease_follows_log,
    check_sequences,
    checkpoint_usable,
    granted_lease,
    is_conversation_id,
    renewed_lease,
)
from durable.store.logscan import LogScan, check_line, scan_log

_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d{12})\.json$")
_CHECKPOINT_TMP = re.compile(r"^checkpoint-\d+\.json\.tmp$")
_QUARANTINE_NAME = re.compile(r"^quarantine-(\d{4,})\.(.+)$")
EVENTS_FILE = "events.jsonl"
LEASE_FILE = "lease.json"

#: Where recovery says what it moved aside (``durable.store`` adds no handler: the host decides).
LOG = logging.getLogger(__name__)


def is_quarantine(name: str) -> bool:
    """Whether ``name`` (in a conversation directory) is a finished quarantine file: what a
    recovery moved aside. A ``.tmp`` is a copy a crash interrupted; the log still holds it."""
    return _QUARANTINE_NAME.fullmatch(name) is not None and not name.endswith(".tmp")


def encode_lease(lease: Lease) -> bytes:
    """The lease file's bytes: the lease and a checksum over it. A flipped bit in an epoch digit
    would still parse, and fencing tokens going backwards is the one thing a lease must prevent:
    the checksum turns such damage into ``CorruptStore``."""
    body = lease.model_dump(mode="json")
    doc = {"checksum": sha256_hex(canonical_json(body)), "lease": body}
    return (canonical_json(doc) + "\n").encode("utf-8")


def decode_lease(path: str, raw: bytes) -> Lease:
    """Parse and verify a lease file (see ``encode_lease``); ``CorruptStore`` naming ``path``."""
    known = LEASE_FILES.get(raw)
    if known is not None:
        return cast(Lease, known)  # only leases are put here
    lease = _decode_lease(path, raw)
    LEASE_FILES.put(raw, lease)
    return lease


def _decode_lease(path: str, raw: bytes) -> Lease:
    """Parse, check the checksum over the lease as stored, then validate it: a lease that
    verifies but holds an empty owner or an epoch below 1 is no lease any store grants."""
    try:
        doc = parse_json(raw)
        if not isinstance(doc, dict) or set(doc) != {"checksum", "lease"}:
            raise ValueError("expected an object with exactly 'checksum' and 'lease'")
    except ValueError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CorruptStore(f"{path}: lease file does not parse: {first}") from exc
    if doc["checksum"] != sha256_hex(canonical_json(doc["lease"])):
        raise CorruptStore(f"{path}: lease file fails its checksum (damaged storage?)")
    try:
        return Lease.model_validate(doc["lease"])
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise CorruptStore(f"{path}: lease file holds no valid lease: {first}") from exc


@dataclass
class _LogCache:
    """What this process knows about a clean (tail-free) events file it has verified.

    ``offsets[i]`` is the byte offset of the line holding sequence ``i + 1``; ``size`` is the file
    size, which also equals the end of the last committed batch (only clean files are cached).
    """

    size: int
    last_sequence: int
    offsets: list[int] = field(default_factory=list)


class FileStore:
    """A store in a directory of plain files, with two durability modes.

    ``fsync=True``: every acknowledged append (``append`` returned) survives a process crash and
    power loss: the batch is written with one ``append`` call and fsynced (and the directory is
    fsynced when the events file is created) before ``append`` returns. Checkpoints and leases are
    written with the atomic-write protocol (write ``tmp``, fsync ``tmp``, rename over the target,
    fsync the directory), so each is either the old or the new version, durably.

    ``fsync=False``: acknowledged appends survive a process crash (``kill -9``: the data is in the
    OS page cache) but power loss may lose any *suffix* of them, never a middle one; a batch torn
    by power loss is a tail that recovery (``read_records(repair=True)``) truncates, never trusts.
    Checkpoints are written atomically but not durably (power loss may leave a torn or missing
    one; ``load_checkpoints`` skips what does not parse and the caller verifies checksums).
    Leases are fsynced even in this mode: they are rare, and a lease that went back to an older
    epoch (or was torn) after power loss would break fencing or make the conversation unreadable.

    Appends are fenced against ``lease.json`` and checked against the log's next sequence; a
    rejected append writes nothing. This process caches (file size, last sequence) per
    conversation so an append does not rescan the log; a size that differs from the cached one
    means another process wrote, and the log is rescanned.
    """

    def __init__(self, root: str, *, fs: FileSystem, fsync: bool = True) -> None:
        self._root = root.rstrip("/") or "/"
        self._fs = fs
        self._fsync = fsync
        self._cache: dict[str, _LogCache] = {}
        # The checkpoints this object wrote (path -> sha256 of the bytes): a rotation may delete
        # such a file unread; any other it must verify first (``_superseded``).
        self._written: dict[str, str] = {}

    # -- paths ---------------------------------------------------------------------------------

    def _dir(self, conversation_id: str) -> str:
        return f"{self._root}/{check_conversation_id(conversation_id)}"

    def _events_path(self, conversation_id: str) -> str:
        return f"{self._dir(conversation_id)}/{EVENTS_FILE}"

    def _lease_path(self, conversation_id: str) -> str:
        return f"{self._dir(conversation_id)}/{LEASE_FILE}"

    def _ensure_dir(self, conversation_id: str) -> str:
        """Create the conversation directory, its entry in ``root`` made durable in fsync mode."""
        path = self._dir(conversation_id)
        if not self._fs.exists(path):
            self._fs.makedirs(path)
            if self._fsync:
                self._fs.fsync_dir(self._root)
        return path

    @contextmanager
    def _exclusive(self, conversation_id: str) -> Iterator[None]:
        """Make a read-modify-write of the conversation (the lease, the fence and the append
        behind it, a checkpoint's fence) exclusive across OS processes: without it two worker
        processes could read the same lease and both write the next epoch, each believing it
        owns the conversation. A conversation without a directory has no lease and no log to
        race on; the operation finds that out by itself."""
        directory = self._dir(conversation_id)
        if not self._fs.exists(directory):
            yield
            return
        with self._fs.exclusive(directory):
            yield

    def describe(self) -> str:
        if self._fsync:
            return "file store (fsync=True: acknowledged commits survive power loss)"
        return (
            "file store (fsync=False: acknowledged commits survive a process crash, not power loss)"
        )

    # -- atomic writes -------------------------------------------------------------------------

    def _atomic_write(self, directory: str, name: str, data: bytes, *, durable: bool) -> None:
        """Write ``tmp``, fsync it, rename over ``name``, fsync the directory (fsyncs if durable).

        A crash at any point leaves either the old file or the new one under ``name`` (plus,
        perhaps, a stray ``tmp`` that the next write overwrites or a checkpoint save removes).
        """
        target = f"{directory}/{name}"
        tmp = f"{target}.tmp"
        self._fs.write(tmp, data)
        if durable:
            self._fs.fsync(tmp)
        self._fs.rename(tmp, target)
        if durable:
            self._fs.fsync_dir(directory)

    # -- leases --------------------------------------------------------------------------------

    def _read_lease(self, conversation_id: str) -> Lease | None:
        path = self._lease_path(conversation_id)
        if not self._fs.exists(path):
            return None
        lease = decode_lease(path, self._read_file(path))
        if lease.conversation_id != conversation_id:
            raise CorruptStore(f"{path}: lease is for conversation {lease.conversation_id}")
        return lease

    def _write_lease(self, lease: Lease) -> None:
        directory = self._ensure_dir(lease.conversation_id)
        # Always durable, whatever the mode: see the class docstring.
        self._atomic_write(directory, LEASE_FILE, encode_lease(lease), durable=True)

    def _fence(self, conversation_id: str, owner_id: str, epoch: int) -> None:
        """``check_fence`` on ``lease.json``; the caller holds the conversation's lock."""
        check_fence(
            self._read_lease(conversation_id), conversation_id, owner_id=owner_id, epoch=epoch
        )

    async def current_lease(self, conversation_id: str) -> Lease | None:
        return self._read_lease(conversation_id)

    async def acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        """Take the lease unless another owner holds it unexpired; the epoch always increases.
        Exclusive across processes (a new conversation's directory is made first: the lock is
        the directory's)."""
        self._ensure_dir(conversation_id)
        with self._exclusive(conversation_id):
            return self._acquire_lease(conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)

    def _acquire_lease(
        self, conversation_id: str, owner_id: str, *, ttl_s: float, now_s: float
    ) -> Lease:
        """Take the lease unless another owner holds it unexpired; the epoch always increases.
        Nothing is written unless the new owner's recovery can go on (``_check_recoverable``)."""
        previous = self._read_lease(conversation_id)
        if previous is None and self._fs.exists(self._events_path(conversation_id)):
            # The lease is written, durably, before the first commit and never removed: a log
            # without one means the lease file was lost. Starting again at epoch 1 would let
            # fencing tokens go backwards; only an operator can say which epoch is safe.
            raise CorruptStore(
                f"{self._lease_path(conversation_id)} is missing, but "
                f"{self._events_path(conversation_id)} holds commits: the lease file was lost "
                "(nothing was written)"
            )
        self._check_recoverable(conversation_id, previous)
        lease = granted_lease(previous, conversation_id, owner_id, ttl_s=ttl_s, now_s=now_s)
        self._write_lease(lease)
        return lease

    def _check_recoverable(self, conversation_id: str, previous: Lease | None) -> None:
        """Before an acquisition writes the lease, refuse what the new owner's recovery
        (``read_records(repair=True)``, ``load_checkpoints``) would refuse, and a stored lease
        that went back behind the log (``check_lease_follows_log``). A refusal then changes
        nothing on disk, so every retry refuses the same way and the evidence stays as found;
        written first, the lease would hide that anything was refused. Reads only."""
        path = self._events_path(conversation_id)
        last_sequence = 0
        if self._fs.exists(path):
            scan = self._scan(conversation_id, path)
            if previous is not None and scan.records:
                check_lease_follows_log(
                    previous,
                    scan.records[-1],
                    lease_place=self._lease_path(conversation_id),
                    log_place=path,
                )
            last_sequence = scan.last_sequence
        self._load_checkpoints(conversation_id)
        self._check_no_lost_commits(conversation_id, last_sequence)

    async def renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        with self._exclusive(lease.conversation_id):
            return self._renew_lease(lease, ttl_s=ttl_s, now_s=now_s)

    def _renew_lease(self, lease: Lease, *, ttl_s: float, now_s: float) -> Lease:
        stored = self._read_lease(lease.conversation_id)
        renewed = renewed_lease(stored, lease, ttl_s=ttl_s, now_s=now_s)
        self._write_lease(renewed)
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Expire the lease now, keeping its epoch so the next acquirer gets epoch + 1."""
        with self._exclusive(lease.conversation_id):
            self._release_lease(lease)

    def _release_lease(self, lease: Lease) -> None:
        """Expire the lease now, keeping its epoch so the next acquirer gets epoch + 1."""
        stored = self._read_lease(lease.conversation_id)
        if stored is None or (stored.owner_id, stored.epoch) != (lease.owner_id, lease.epoch):
            return
        self._write_lease(stored.model_copy(update={"expires_at_s": -1.0}))

    # -- the event log -------------------------------------------------------------------------

    def _scan(self, conversation_id: str, path: str) -> LogScan:
        """Read and scan the whole file (``scan_log``: the committed prefix and what
        follows it), refusing damage under this store's durability mode (``_check_tail``)."""
        scan = scan_log(self._read_file(path), conversation_id)
        if scan.anomaly is not None:
            self._check_tail(path, scan)
        return scan

    def _read_file(self, path: str) -> bytes:
        """A file of the store, whole. A directory where the store keeps a file is damage the
        store did not make (``CorruptStore``), not an error of the host."""
        try:
            return self._fs.read(path)
        except IsADirectoryError as exc:
            raise CorruptStore(
                f"{path} is a directory, not a file of the store (nothing was read or written)"
            ) from exc

    def _check_tail(self, path: str, scan: LogScan) -> None:
        """Refuse damaged committed data: an anomaly the scan classified as damage (a valid
        later commit follows it) is ``CorruptStore`` naming the file and both lines; a torn
        tail passes, for the caller to ignore or truncate.

        With ``fsync=False`` a power loss may damage any suffix of acknowledged commits (the
        mode's promise allows losing it), so damage is always treated as a torn suffix there.
        """
        anomaly = scan.anomaly
        if anomaly is None or anomaly.later is None or not self._fsync:
            return
        raise CorruptStore(
            f"{path}: {anomaly.problem}, but line {anomaly.later.line} holds a valid later "
            f"record (sequence {anomaly.later.sequence}): committed data is damaged"
        )

    def _settle(self, conversation_id: str, path: str, scan: LogScan, *, repair: bool) -> None:
        """Cache a clean scan; with ``repair``, truncate a torn tail first (and drop checkpoints
        beyond the log). An unrepaired tail is not cached, so the next call rescans.

        A repair also fsyncs the log: a crash may have left complete batches written but never
        synced (killed between append and fsync). Recovery builds on them, so they must be
        durable before anything is appended after them -- otherwise a later power loss could
        damage them under valid newer commits, which reads as corruption."""
        entry = _LogCache(scan.good_end, scan.last_sequence, scan.offsets)
        if repair:
            self._check_no_lost_commits(conversation_id, scan.last_sequence)  # before truncating
        if scan.good_end == scan.size:
            self._cache[conversation_id] = entry
        elif repair:
            self._cut_tail(conversation_id, path, scan)
            self._cache[conversation_id] = entry
        else:
            self._cache.pop(conversation_id, None)
        if repair and self._fsync and scan.size > 0:
            self._fs.fsync(path)
        if repair:
            self._set_aside_future_checkpoints(conversation_id, scan.last_sequence)

    def _cut_tail(self, conversation_id: str, path: str, scan: LogScan) -> None:
        """Truncate the log at the end of its committed prefix. A torn tail (``logscan``: no
        later commit follows it) is what a crash leaves and was never acknowledged: it is cut.
        A tail that held acknowledged commits (``_tail_proof``: damage, which with
        ``fsync=True`` ``_check_tail`` refused already, or a torn-looking tail a checkpoint
        beyond it proves acknowledged) is copied to a quarantine file first, durably, so the
        cut is never the only copy of what it removes."""
        proof = self._tail_proof(conversation_id, scan)
        if proof is not None:
            tail = self._fs.read(path)[scan.good_end :]
            what = f"events-from-byte-{scan.good_end}.jsonl"
            name = self._quarantine(conversation_id, what, tail)
            LOG.warning(
                "%s: %s; the %d bytes from byte %d on (acknowledged commits among them: %s) "
                "moved to quarantine file %s, and the log cut there",
                path,
                scan.tail_problem,
                len(tail),
                scan.good_end,
                proof,
                name,
            )
        self._fs.truncate(path, scan.good_end)

    def _tail_proof(self, conversation_id: str, scan: LogScan) -> str | None:
        """Why the bytes after the log's committed prefix held acknowledged commits, or None
        when nothing proves it (a torn tail: a crash's leftover, cut without a copy).

        Two things prove it: a valid later commit after the damage (``logscan``), and a
        checkpoint named beyond the prefix's last sequence -- a checkpoint is saved only after
        the commits it covers were acknowledged, so a tail under it is damage to acknowledged
        commits (a flipped byte, a cut inside the last batch, another conversation's record),
        however much it looks like a torn write. The name is what counts, as for
        ``_check_no_lost_commits``: a copy too many costs an operator a look, a copy too few
        loses acknowledged bytes for good."""
        anomaly = scan.anomaly
        if anomaly is not None and anomaly.later is not None:
            later = anomaly.later
            return f"line {later.line} holds a valid later record (sequence {later.sequence})"
        _, found, _ = self._checkpoint_files(conversation_id)
        for through, name in found:
            if through > scan.last_sequence:
                return f"{name} proves commits through sequence {through} were acknowledged"
        return None

    # -- quarantine ----------------------------------------------------------------------------

    def _quarantine_name(self, directory: str, what: str) -> str:
        """``quarantine-{n:04d}.{what}``, n one past the highest finished one (a ``.tmp`` left by
        a crash is rewritten under the same name: the copy it was is still in the log)."""
        taken = [
            int(match.group(1))
            for name in self._fs.listdir(directory)
            if is_quarantine(name) and (match := _QUARANTINE_NAME.fullmatch(name)) is not None
        ]
        return f"quarantine-{max(taken, default=0) + 1:04d}.{what}"

    def _quarantine(self, conversation_id: str, what: str, data: bytes) -> str:
        """Write ``data`` to a new quarantine file with the atomic-write protocol, durably in
        every mode (the caller is about to cut the only other copy); returns its name."""
        directory = self._dir(conversation_id)
        name = self._quarantine_name(directory, what)
        self._atomic_write(directory, name, data, durable=True)
        return name

    def _set_aside(self, directory: str, names: list[str], why: str) -> None:
        """Move checkpoints the store cannot use aside (a rename to a quarantine name), never
        delete them: they are evidence. A rename is atomic; undone by a power loss, the file is
        back under its name and the next recovery moves it again."""
        for name in names:
            target = self._quarantine_name(directory, name)
            self._fs.rename(f"{directory}/{name}", f"{directory}/{target}")
            LOG.warning("%s/%s moved aside to quarantine file %s: %s", directory, name, target, why)
        if names and self._fsync:
            self._fs.fsync_dir(directory)

    async def read_records(
        self, conversation_id: str, after_sequence: int = 0, *, repair: bool = False
    ) -> list[EventRecord]:
        """The committed records after ``after_sequence``, verified; see the module docstring.

        ``repair`` (the lease holder recovering) truncates a torn tail instead of ignoring it,
        and always rescans the whole file rather than trusting this process's cache. A repair is
        a read-modify-write of the log, exclusive across processes like an append: otherwise an
        append still being written by the lease's new owner could look like a torn tail to a
        process that lost the lease while recovering, and be cut away after it was acknowledged.
        """
        if repair:
            with self._exclusive(conversation_id):
                return self._read_records(conversation_id, after_sequence, repair=True)
        return self._read_records(conversation_id, after_sequence, repair=False)

    def _read_records(
        self, conversation_id: str, after_sequence: int, *, repair: bool
    ) -> list[EventRecord]:
        path = self._events_path(conversation_id)
        if not self._fs.exists(path):
            self._cache.pop(conversation_id, None)
            if repair:
                self._check_no_lost_commits(conversation_id, 0)
                self._set_aside_future_checkpoints(conversation_id, 0)
            return []
        cached = self._cache.get(conversation_id)
        if cached is not None and not repair and self._fs.size(path) == cached.size:
            # A clean file this process already verified: parse only the lines asked for.
            records = self._read_from_cache(conversation_id, path, cached, after_sequence)
            if records is not None:
                return records
        scan = self._scan(conversation_id, path)
        self._settle(conversation_id, path, scan, repair=repair)
        return [r for r in scan.records if r.sequence > after_sequence]

    def _read_from_cache(
        self, conversation_id: str, path: str, cached: _LogCache, after_sequence: int
    ) -> list[EventRecord] | None:
        """Parse the lines after ``after_sequence`` of a cached clean file; None if they changed."""
        start_index = max(after_sequence, 0)
        if start_index >= cached.last_sequence:
            return []
        data = self._fs.read(path)
        if len(data) != cached.size:
            return None
        out: list[EventRecord] = []
        pos = cached.offsets[start_index]
        expected = start_index + 1
        while pos < cached.size:
            newline = data.find(b"\n", pos)
            if newline < 0:
                return None
            record, why = check_line(data[pos:newline], conversation_id)
            if record is None or why is not None or record.sequence != expected:
                return None
            out.append(record)
            expected += 1
            pos = newline + 1
        if not out or not out[-1].last_in_batch or out[-1].sequence != cached.last_sequence:
            return None
        return out

    async def append(
        self,
        conversation_id: str,
        records: list[EventRecord],
        *,
        expected_sequence: int,
        owner_id: str,
        epoch: int,
    ) -> None:
        """Check the batch, then fence, check the sequence and write the whole batch with one
        ``append`` call, exclusive across processes (see ``_append``)."""
        batch = Append.checked(conversation_id, records, owner_id=owner_id, epoch=epoch)
        with self._exclusive(conversation_id):
            self._append(batch, expected_sequence=expected_sequence)

    def _append(self, batch: Append, *, expected_sequence: int) -> None:
        """Fence, check the sequence, then write the whole batch with one ``append`` call.

        One call means a process crash leaves all or nothing of the batch; power loss may tear
        it, and the reader treats that as a tail. The log is repaired (its torn tail truncated)
        before appending, which is safe because the fence proved this writer holds the lease:
        appending after a torn tail would turn it into corruption in the middle of the log.
        """
        conversation_id, records = batch.conversation_id, batch.records
        path = self._events_path(conversation_id)
        self._fence(conversation_id, batch.owner_id, batch.epoch)
        created = not self._fs.exists(path)
        if created:
            log = _LogCache(size=0, last_sequence=0)
        else:
            cached = self._cache.get(conversation_id)
            if cached is not None and self._fs.size(path) == cached.size:
                log = cached
            else:
                scan = self._scan(conversation_id, path)
                self._settle(conversation_id, path, scan, repair=True)
                log = _LogCache(scan.good_end, scan.last_sequence, scan.offsets)
        check_sequences(records, expected_sequence, log.last_sequence)
        data = bytearray()
        new_offsets: list[int] = []
        lines = [line.encode("utf-8") for line in batch.lines]
        for line in lines:
            new_offsets.append(log.size + len(data))
            data += line + b"\n"
        self._fs.append(path, bytes(data))
        batch.stored(encoded=lines)  # the bytes a reader will slice out of the file
        if self._fsync:
            self._fs.fsync(path)
            if created:
                self._fs.fsync_dir(self._dir(conversation_id))
        # Only now that the batch is written does the cache move (extended in place: copying
        # the offsets on every append would make a long conversation quadratic).
        log.offsets.extend(new_offsets)
        log.size += len(data)
        log.last_sequence = records[-1].sequence
        self._cache[conversation_id] = log

    # -- checkpoints ---------------------------------------------------------------------------

    def _checkpoint_files(
        self, conversation_id: str
    ) -> tuple[str, list[tuple[int, str]], list[str]]:
        """(directory, [(through_sequence, name)] sorted newest first, stray tmp names)."""
        directory = self._dir(conversation_id)
        if not self._fs.exists(directory):
            return directory, [], []
        found: list[tuple[int, str]] = []
        strays: list[str] = []
        for name in self._fs.listdir(directory):
            match = _CHECKPOINT_NAME.fullmatch(name)
            if match is not None:
                found.append((int(match.group(1)), name))
            elif _CHECKPOINT_TMP.fullmatch(name):
                strays.append(name)
        found.sort(reverse=True)
        return directory, found, strays

    def _unlink_all(self, directory: str, names: list[str]) -> None:
        """Delete what is no evidence of anything: superseded checkpoints that verify, and the
        temporary files of interrupted atomic writes."""
        for name in names:
            self._fs.unlink(f"{directory}/{name}")
            self._written.pop(f"{directory}/{name}", None)
        if names and self._fsync:
            self._fs.fsync_dir(directory)

    def _superseded(self, conversation_id: str, directory: str, names: list[str]) -> list[str]:
        """Of checkpoints a save rotates out, those that may be deleted: each is a verified
        copy of a state the newer checkpoints and the log still hold. One that does not verify
        (or whose name is not its content) is damage, and is moved aside instead."""
        out: list[str] = []
        for name in names:
            path = f"{directory}/{name}"
            data = self._read_file(path)
            if self._written.get(path) == hashlib.sha256(data).hexdigest():
                out.append(name)
                continue
            try:
                checkpoint = Checkpoint.model_validate(parse_json(data))
            except ValueError:
                continue
            match = _CHECKPOINT_NAME.fullmatch(name)
            named = int(match.group(1)) if match is not None else -1
            if checkpoint_usable(checkpoint, conversation_id) and named == (
                checkpoint.through_sequence
            ):
                out.append(name)
        return out

    def _check_no_lost_commits(self, conversation_id: str, last_sequence: int) -> None:
        """With ``fsync=True``, a checkpoint through a sequence the log no longer has is proof
        that acknowledged commits are gone (a checkpoint is saved only after the commits it
        covers were acknowledged, hence synced): a deleted, emptied or cut log, or damage that
        reads like a torn tail. Recovery must stop with the evidence intact -- truncating the
        log or deleting the checkpoint would erase the only trace of what was lost. With
        ``fsync=False`` power loss may legitimately take that suffix (the mode's promise)."""
        if not self._fsync:
            return
        _, found, _ = self._checkpoint_files(conversation_id)
        beyond = [(through, name) for through, name in found if through > last_sequence]
        if beyond:
            through, name = beyond[0]
            events = self._events_path(conversation_id)
            held = f"ends at sequence {last_sequence}" if last_sequence else "holds no commit"
            if not self._fs.exists(events):
                held = "is missing"
            raise CorruptStore(
                f"{events} {held}, but {name} proves commits through sequence {through} were "
                f"acknowledged: sequences {last_sequence + 1}..{through} are lost or damaged "
                "(nothing was repaired or deleted)"
            )

    def _set_aside_future_checkpoints(self, conversation_id: str, last_sequence: int) -> None:
        """Move checkpoints beyond the log aside: they describe a suffix that power loss took
        away (``fsync=False`` only: with ``fsync=True`` ``_check_no_lost_commits`` refuses
        first), or that recovery just cut with the damage under it.

        Left in place, such a checkpoint would verify and, once the log grew past its sequence
        again with *different* events, be trusted as the state of history that never survived.
        Deleted, it would be gone as evidence: it is the one record of what was lost.
        """
        directory, found, _ = self._checkpoint_files(conversation_id)
        beyond = [name for through, name in found if through > last_sequence]
        self._set_aside(directory, beyond, f"beyond the log, which ends at {last_sequence}")
        misnamed = self._misnamed(directory, found, last_sequence)
        self._set_aside(directory, misnamed, "it holds a checkpoint through another sequence")

    def _misnamed(
        self, directory: str, found: list[tuple[int, str]], last_sequence: int
    ) -> list[str]:
        """With ``fsync=False``, the checkpoints within the log that verify under another
        sequence's name, which ``_load_checkpoints`` skips: recovery moves them aside with the
        ones beyond the log. A name lower than what the file holds claims nothing beyond the
        log, yet is damage all the same (the atomic write names a checkpoint after what it
        holds): left in place it would stand as the "newest older" checkpoint a save keeps,
        and only a later rotation would notice it. With ``fsync=True`` ``_load_checkpoints``
        refuses it, and it stays where it is, as evidence."""
        if self._fsync:
            return []
        out: list[str] = []
        for through, name in found:
            if through > last_sequence:
                continue  # set aside as beyond the log
            try:
                checkpoint = Checkpoint.model_validate(
                    parse_json(self._read_file(f"{directory}/{name}"))
                )
            except ValueError:
                continue  # torn: skipped, and a later save sets it aside (the damage table)
            if checkpoint.through_sequence != through and checkpoint.verify():
                out.append(name)
        return out

    async def save_checkpoint(self, checkpoint: Checkpoint, *, owner_id: str, epoch: int) -> None:
        """Fence and write, exclusive across processes (see ``_save_checkpoint``)."""
        with self._exclusive(checkpoint.conversation_id):
            self._save_checkpoint(checkpoint, owner_id=owner_id, epoch=epoch)

    def _save_checkpoint(self, checkpoint: Checkpoint, *, owner_id: str, epoch: int) -> None:
        """Fence, write atomically, then keep only this checkpoint and the newest older one.

        Checkpoints *newer* than the one saved are removed too: the writer's log ends here, so
        they can only be left over from a suffix lost to power loss.
        """
        conversation_id = checkpoint.conversation_id
        self._fence(conversation_id, owner_id, epoch)
        directory = self._ensure_dir(conversation_id)
        name = f"checkpoint-{checkpoint.through_sequence:012d}.json"
        data = (checkpoint.to_text() + "\n").encode("utf-8")
        self._atomic_write(directory, name, data, durable=self._fsync)
        self._written[f"{directory}/{name}"] = hashlib.sha256(data).hexdigest()
        _, found, strays = self._checkpoint_files(conversation_id)
        older = [n for through, n in found if through < checkpoint.through_sequence]
        newer = [n for through, n in found if through > checkpoint.through_sequence]
        superseded = self._superseded(conversation_id, directory, older[1:])
        damaged = [n for n in older[1:] if n not in superseded]
        self._set_aside(directory, newer, "beyond the checkpoint saved over it")
        self._set_aside(directory, damaged, "it does not verify, and a save rotated it out")
        self._unlink_all(directory, superseded + strays)

    async def load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        """Every checkpoint, newest first; checksums are the caller's to verify.

        With ``fsync=True`` a checkpoint reaches its final name only complete and synced (the
        atomic-write protocol), so one that does not parse is damage, not a crash's leftover:
        ``CorruptStore`` names it rather than dropping it in silence. With ``fsync=False`` power
        loss can leave the renamed file empty or torn; it is skipped and the caller falls back.
        """
        return self._load_checkpoints(conversation_id)

    def _load_checkpoints(self, conversation_id: str) -> list[Checkpoint]:
        """``load_checkpoints``: also what an acquisition checks before it writes the lease.

        A checkpoint that verifies under another sequence's name is damage too (the atomic
        write names a checkpoint after what it holds; the name is metadata no checksum covers):
        ``CorruptStore`` with ``fsync=True``; skipped without, and set aside by the repair that
        follows (``_misnamed``: this is also a read that must not write). One that does not
        verify is the caller's to skip, whatever its name says."""
        directory, found, _ = self._checkpoint_files(conversation_id)
        out: list[Checkpoint] = []
        for through, name in found:
            path = f"{directory}/{name}"
            try:
                checkpoint = Checkpoint.model_validate(parse_json(self._read_file(path)))
            except ValueError as exc:
                if self._fsync:
                    raise CorruptStore(
                        f"{path}: checkpoint does not parse, though written atomically and "
                        f"synced (damaged storage?): {str(exc).splitlines()[0]}"
                    ) from exc
                continue  # torn by power loss without fsync: expected, the caller falls back
            if checkpoint.through_sequence != through and checkpoint.verify():
                if self._fsync:
                    raise CorruptStore(
                        f"{path} holds a checkpoint through {checkpoint.through_sequence}: its "
                        "name is damaged (nothing was repaired or deleted)"
                    )
                continue
            out.append(checkpoint)
        out.sort(key=lambda cp: cp.through_sequence, reverse=True)
        return out

    # -- listing -------------------------------------------------------------------------------

    async def list_conversations(self) -> list[str]:
        if not self._fs.exists(self._root):
            return []
        out: list[str] = []
        for name in self._fs.listdir(self._root):
            if not is_conversation_id(name):
                continue
            base = f"{self._root}/{name}"
            if self._fs.exists(f"{base}/{EVENTS_FILE}") or self._fs.exists(f"{base}/{LEASE_FILE}"):
                out.append(name)
        return sorted(out)
