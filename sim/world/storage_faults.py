"""Storage faults as the stores' layouts see them, and the damage table's record of each.

``SimFS.damage_synced`` damages bytes: it knows files, not what they are. What needs a store's
layout lives here, next to the faults, in one place:

- the **aimed faults** on the file store (``aimed_fault``), which only a layout can aim: a log
  cut at a commit boundary, or deleted, while a checkpoint of its conversation proves commits
  beyond the cut; and damage inside the log's last synced write. ``damage_synced`` never makes
  them, because a single copy cannot tell them from a shorter log or a torn write -- except
  where a checkpoint proves the loss, which is exactly what the damage table promises to refuse
  (docs/crash-model.md, "Storage faults");
- the **faults on SQLite's files** (``aimed_sqlite_fault``): a bit flipped in a synced page of
  the database file or in a synced frame of its write-ahead log, the log cut at a frame
  boundary or lost, the database cut at a page boundary -- each tried on a copy of the disk
  first and read back through SQLite, so the record is what the fault did to the store's rows
  (``SQLITE_FAULTS``, below);
- the **damage-table record** of every injected fault (``table_row``; ``aimed_sqlite_fault``
  returns its own): which record of ``durable.store.damage`` it is, from the damaged file's role
  (log, checkpoint, lease, temporary or quarantine file; SQLite's database or log) and where in
  the file it struck. The oracle I23 (``sim.judgement.oracles.damage_table``) reads the store's
  response against that record. A fault this function cannot map is a harness error there,
  never a silent pass;
- the record of what a **power loss** left of a log that a checkpoint or a later commit proves
  acknowledged (``power_rows``): what a recovery without fsync must copy to a quarantine file
  before it cuts it (I23 holds it to the copy).

Determinism: the only randomness is the ``random.Random`` handed to ``aimed_fault`` and
``aimed_sqlite_fault``.
"""

from __future__ import annotations

import json
import random
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from durable.codec import canonical_json, parse_json, sha256_hex
from durable.store.base import Checkpoint, Lease, checkpoint_usable
from durable.store.file import EVENTS_FILE, LEASE_FILE, is_quarantine
from durable.store.logscan import check_line, scan_log
from sim.world.fs import SimFS

#: How often a storage point makes an aimed fault when one is possible (else the draw of
#: ``SimFS.damage_synced``, from its own stream, as before aimed faults existed).
AIMED_SHARE = 1 / 3
#: The aimed faults' names, as a crash's outcome writes them (``PATH: KIND:DETAIL``).
CUT = "cut-at-commit"  # the log cut at a commit boundary: ``cut-at-commit:SIZE``
DELETED = "deleted"  # the log gone: ``deleted:gone`` (as for a file written whole)
LAST_WRITE = "last-write-bitflip"  # a bit of the last synced write: ``...:OFFSET.BIT``
#: The record of a file the store never reads (a quarantine file): no row of the table applies,
#: and the store must go on as if nothing happened.
UNREAD = "unread"
#: The record of damage that left a file saying exactly what it said (a lease or checkpoint
#: cut at its last newline): nothing to refuse or repair, the store goes on.
INVISIBLE = "invisible"
#: The record of damage to the last transaction of SQLite's write-ahead log (a frame flipped, the
#: log cut inside it, or lost with it): SQLite's recovery stops at the first frame that fails
#: its checksum, as at a torn write, and no single copy can tell the two apart. No record of
#: ``durable.store.damage`` has it yet: the oracle holds the store to the file store's answer
#: to a damaged last commit (``sim.judgement.oracles.damage_table.TORN_WAL_OUTCOME``).
TORN_WAL = "sqlite-torn-wal"
#: SQLite's database file under a store's root (``sim.world.stores``: ``ROOT/store.sqlite``).
SQLITE_NAME = "store.sqlite"

_CHECKPOINT = re.compile(r"^checkpoint-(\d{12})\.json$")


class Role(StrEnum):
    """What a file under the store's root is to its store: the file store's files, or SQLite's
    database file and its write-ahead log."""

    LOG = "log"
    CHECKPOINT = "checkpoint"
    LEASE = "lease"
    TEMPORARY = "temporary"
    QUARANTINE = "quarantine"
    DATABASE = "database"
    WAL = "wal"
    OTHER = "other"


def role_of(path: str) -> Role:
    name = path.rsplit("/", 1)[-1]
    if name == EVENTS_FILE:
        return Role.LOG
    if name == SQLITE_NAME:
        return Role.DATABASE
    if name == f"{SQLITE_NAME}-wal":
        return Role.WAL
    if name == LEASE_FILE:
        return Role.LEASE
    if _CHECKPOINT.fullmatch(name):
        return Role.CHECKPOINT
    if is_quarantine(name):
        return Role.QUARANTINE
    if name.endswith(".tmp"):
        return Role.TEMPORARY
    return Role.OTHER


@dataclass(frozen=True)
class TableRow:
    """A damaged file's record in the damage table: ``kind`` (a ``durable.store.damage`` kind,
    or one of the harness's own: ``UNREAD``, ``INVISIBLE``, ``TORN_WAL``) and, for damage to the
    log, the first sequence the damage takes (``first_lost``: what a recovery that goes on may
    lose from, no earlier). ``conversation``: the conversation it is about, where the path does
    not say (SQLite's one database holds every conversation). For a file-store log that holds
    acknowledged commits past the damage: ``offset``, the first of its bytes a recovery that
    cuts must have copied to a quarantine file (-1: none to copy), and ``beyond``, the
    checkpoints (names) that prove them, which it may set aside but never delete."""

    kind: str
    first_lost: int = 0
    conversation: str = ""
    offset: int = -1
    beyond: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Line:
    start: int
    end: int  # one past its newline
    sequence: int
    batch: str
    first: int  # the first sequence of its batch (its commit)
    last_in_batch: bool


def _parse(data: bytes, start: int, end: int) -> _Line | None:
    """The record of one line (None: not a record -- an earlier fault of the same schedule
    damaged it; placing a fault must never raise inside the crash it is part of)."""
    try:
        doc = json.loads(data[start : end - 1])
        sequence, index = int(doc["sequence"]), int(doc["batch_index"])
        return _Line(
            start, end, sequence, str(doc["batch"]), sequence - index, doc["last_in_batch"]
        )
    except (ValueError, KeyError, TypeError):
        return None


def _lines(data: bytes) -> list[_Line]:
    """The records of a synced log, with their byte ranges, up to its first damaged line."""
    out: list[_Line] = []
    pos = 0
    while (newline := data.find(b"\n", pos)) >= 0 and (line := _parse(data, pos, newline + 1)):
        out.append(line)
        pos = newline + 1
    return out


def _line_at(data: bytes, offset: int) -> _Line | None:
    """The record of the synced, undamaged log ``data`` whose line holds byte ``offset`` (only
    that line is parsed: a long log is not read whole for one fault)."""
    if not 0 <= offset < len(data):
        return None
    end = data.find(b"\n", offset)
    return None if end < 0 else _parse(data, data.rfind(b"\n", 0, offset) + 1, end + 1)


def _last_record(data: bytes, conversation_id: str) -> _Line | None:
    """The last line of ``data`` that is a valid record -- parsed and its checksum verified, as
    ``durable.store.logscan`` checks a line: what a power loss tore off the end (a line without
    its newline, or with a letter's case changed, which still parses) is skipped, as the store's
    scan skips a torn tail."""
    end = data.rfind(b"\n") + 1  # past the last complete line (0: none)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        line = _parse(data, start, end)
        if line is not None and check_line(data[start : end - 1], conversation_id)[1] is None:
            return line
        end = start
    return None


def _throughs(fs: SimFS, log_path: str) -> list[int]:
    """The sequences the checkpoints beside ``log_path`` are through."""
    return [through for through, _ in _checkpoints_beside(fs, log_path)]


def _checkpoints_beside(fs: SimFS, log_path: str) -> list[tuple[int, str]]:
    """The checkpoints beside ``log_path``: (the sequence its name says, its name), sorted."""
    directory = log_path.rsplit("/", 1)[0]
    found = (_CHECKPOINT.fullmatch(name) for name in fs.listdir(directory))
    return sorted((int(match.group(1)), match.group(0)) for match in found if match is not None)


def _beyond(fs: SimFS, log_path: str, first: int) -> tuple[str, ...]:
    """The checkpoints beside ``log_path`` through ``first`` or later: each proves that the
    commits from ``first`` on were acknowledged (a recovery may set them aside, never delete
    them)."""
    return tuple(name for through, name in _checkpoints_beside(fs, log_path) if through >= first)


def proven_cuts(fs: SimFS, path: str, data: bytes) -> list[int]:
    """The commit boundaries of the synced log ``data`` (0 included, its end not) where a cut
    loses a commit that a checkpoint of its conversation covers: what a store must refuse."""
    top = max(_throughs(fs, path), default=0)
    cuts, last = [0] if top > 0 else [], 0
    for line in _lines(data):
        last = line.sequence
        if line.last_in_batch and line.end < len(data) and last < top:
            cuts.append(line.end)
    return cuts


def aimed_fault(fs: SimFS, rng: random.Random, *, under: str) -> dict[str, str]:
    """Maybe (``AIMED_SHARE``) make one aimed fault on a synced log under ``under``: a cut at a
    commit boundary or the log deleted (only where a checkpoint proves the loss), or a bit
    flipped inside its last synced write. ``{}``: none made (the caller draws a fault of
    ``damage_synced`` instead)."""
    options: list[tuple[str, str, bytes, int]] = []
    for path, data, proven in fs.synced_logs(under=under):
        options.append((path, LAST_WRITE, data, proven))
        if max(_throughs(fs, path), default=0) > 0:  # then a cut at 0, at least, is proven
            options += [(path, CUT, data, proven), (path, DELETED, data, proven)]
    if not options or rng.random() >= AIMED_SHARE:
        return {}
    path, kind, data, proven = options[rng.randrange(len(options))]
    if kind == CUT:
        cut = rng.choice(proven_cuts(fs, path, data))
        fs.damage_log(path, cut=cut)
        return {path: f"{CUT}:{cut}"}
    if kind == DELETED:
        fs.damage_log(path)
        return {path: f"{DELETED}:gone"}
    offset, bit = proven + rng.randrange(len(data) - proven), rng.randrange(8)
    fs.damage_log(path, flip=(offset, bit))
    return {path: f"{LAST_WRITE}:{offset}.{bit}"}


# -- the damage table's record of a fault ------------------------------------------------------


def table_row(before: SimFS, after: SimFS, path: str, fault: str) -> TableRow | None:
    """The damage-table record of ``fault`` (``KIND:DETAIL``, as the crash's outcome writes it)
    on ``path``; ``before`` and ``after`` are the disk on either side of it. None: unmapped."""
    role = role_of(path)
    kind = fault.split(":", 1)[0]
    if role is Role.QUARANTINE:
        return TableRow(UNREAD)
    if role is Role.TEMPORARY:
        return TableRow("stray-temporary-files")
    same = kind != "deleted" and role in (Role.LEASE, Role.CHECKPOINT)
    if same and _meaning(before.read(path)) == _meaning(after.read(path)) is not None:
        return TableRow(INVISIBLE)  # e.g. a cut of its last newline: the same lease
    if role is Role.LEASE:
        return _lease_row(after, path, kind)
    if role is Role.CHECKPOINT:
        return _checkpoint_row(after, path, kind)
    if role is Role.LOG:
        return _log_row(before, path, fault)
    return None


def _meaning(data: bytes) -> str | None:
    """What a lease or checkpoint file says: its JSON, canonical (None: it does not parse)."""
    try:
        return canonical_json(parse_json(data))
    except ValueError:
        return None


def _lease_row(after: SimFS, path: str, kind: str) -> TableRow | None:
    """A lease deleted while the log exists, or one that no longer verifies (its checksum is
    over the lease as stored: ``durable.store.file.encode_lease``)."""
    directory = path.rsplit("/", 1)[0]
    if kind == "deleted":
        if after.exists(f"{directory}/{EVENTS_FILE}"):
            return TableRow("lease-missing")
        if not _throughs(after, f"{directory}/{EVENTS_FILE}"):
            return TableRow("log-and-checkpoints-missing")
        return None
    try:
        doc = parse_json(after.read(path))
        if not isinstance(doc, dict) or set(doc) != {"checksum", "lease"}:
            return TableRow("lease-garbage")
    except ValueError:
        return TableRow("lease-garbage")
    if doc["checksum"] != sha256_hex(canonical_json(doc["lease"])):
        return TableRow("lease-garbage")
    try:
        Lease.model_validate(doc["lease"])
    except ValueError:
        return TableRow("lease-out-of-range")
    return None  # the damage left a valid lease: no record says what that is


def _checkpoint_row(after: SimFS, path: str, kind: str) -> TableRow | None:
    """A checkpoint gone, unparseable, failing its checksum, or under another's name."""
    if kind == "deleted":
        return TableRow("newest-checkpoint-missing")
    directory, name = path.rsplit("/", 1)
    conversation = directory.rsplit("/", 1)[-1]
    try:
        checkpoint = Checkpoint.model_validate(parse_json(after.read(path)))
    except ValueError:
        return TableRow("checkpoint-unparseable", beyond=(name,))
    if not checkpoint_usable(checkpoint, conversation):
        return TableRow("checkpoint-fails-checksum", beyond=(name,))
    match = _CHECKPOINT.fullmatch(name)
    if match is not None and int(match.group(1)) != checkpoint.through_sequence:
        return TableRow("checkpoint-misnamed", beyond=(name,))
    return None


def _damaged_range(fault: str, block_size: int) -> tuple[int, int] | None:
    """The bytes ``fault`` changed, [start, end), for a fault that changes bytes in place."""
    kind, _, detail = fault.partition(":")
    if kind in ("bitflip", LAST_WRITE):
        offset = int(detail.split(".")[0])
        return offset, offset + 1
    if kind == "zeroed-block":
        start, length = (int(part) for part in detail.split("+"))
        return start, start + length
    if kind == "misdirected-block":
        dst = int(detail.split("->")[1])
        return dst, dst + block_size
    return None


def _log_row(before: SimFS, path: str, fault: str) -> TableRow | None:
    """Damage to the log, read from the log as it was: the commit it struck, whether a later
    commit follows (damage to an earlier commit) or not (the last commit: a torn write to a
    single copy), and whether a checkpoint covers what a cut or a repair would lose."""
    kind, _, detail = fault.partition(":")
    data = before.read(path)
    top = max(_throughs(before, path), default=0)
    if kind == DELETED:
        return TableRow("log-missing", 1, beyond=_beyond(before, path, 1)) if top else None
    if kind == CUT:
        cut = _line_at(data, int(detail))
        if cut is None or top < cut.sequence:
            return None
        return TableRow(
            "log-cut-under-checkpoint", cut.sequence, beyond=_beyond(before, path, cut.sequence)
        )
    damaged = _damaged_range(fault, before.block_size_bytes)
    if damaged is None:
        return None
    last = _last_record(data, path.rsplit("/", 2)[-2])
    if last is None or damaged[0] >= last.end:
        # Only bytes after the last record changed: a torn tail (a power loss's) stays one.
        return TableRow(INVISIBLE)
    struck = _line_at(data, damaged[0])
    if struck is None:
        return None
    # Batches are contiguous: a later commit follows the damage if the last record starts
    # after it and belongs to another batch (as ``durable.store.logscan`` decides: a torn
    # tail after it proves nothing). A damaged newline before the last record (``>``, not
    # ``>=``) joins that record to the struck line: then nothing later proves the damage.
    proof = _beyond(before, path, struck.first)
    if last.start > damaged[1] and last.batch != struck.batch:
        return TableRow("damaged-earlier-commit", struck.first, offset=struck.start, beyond=proof)
    if top >= struck.first:
        return TableRow(
            "damaged-last-commit-under-checkpoint", struck.first, offset=struck.start, beyond=proof
        )
    return TableRow("damaged-last-commit", struck.first)


# -- what a power loss left of a log -------------------------------------------------------------


def power_rows(fs: SimFS, outcomes: dict[str, str]) -> dict[str, TableRow | None]:
    """After a power loss (``outcomes``: ``SimFS.power_loss``'s, what it left of each file that
    had pending content), the damage-table record of each file-store log whose tail no recovery
    may take for a crash's leftover: a checkpoint named through a sequence past its committed
    prefix, or a valid later commit after the damage, proves the tail held acknowledged
    commits (as ``durable.store.file.FileStore._tail_proof`` reads it). To the table that is a
    damaged last commit under a checkpoint, or a damaged earlier commit, as if a storage fault
    had made it: a mode that goes on past it copies the tail to a quarantine file before the cut
    and sets the checkpoints aside (I23 holds it to that). A torn tail nothing proves is no
    record: the store cuts it, and the mode's promise allows the loss."""
    rows: dict[str, TableRow | None] = {}
    for path, outcome in outcomes.items():
        if role_of(path) is not Role.LOG or outcome == "all" or not fs.exists(path):
            continue
        checkpoints = _checkpoints_beside(fs, path)
        damaged = outcome.startswith("damaged:")
        if not checkpoints and not damaged:
            continue  # only a valid later commit after a damaged letter could prove the tail
        conversation, data = path.rsplit("/", 2)[-2], fs.read(path)
        if not damaged and _ends_with_a_commit(data, conversation):
            continue  # no tail (the scan of a long log is the costly part: skipped)
        scan = scan_log(data, conversation)
        if scan.anomaly is None:
            continue
        first = scan.last_sequence + 1
        proof = tuple(name for through, name in checkpoints if through >= first)
        if scan.anomaly.later is not None:
            kind = "damaged-earlier-commit"
        elif proof:
            kind = "damaged-last-commit-under-checkpoint"
        else:
            continue
        rows[path] = TableRow(kind, first, conversation, offset=scan.good_end, beyond=proof)
    return rows


def _ends_with_a_commit(data: bytes, conversation: str) -> bool:
    """Whether a log's last line is a whole, valid record that ends its batch (then nothing
    follows its committed prefix but what a damaged letter could hide, which a power loss
    reports as such)."""
    if not data.endswith(b"\n"):
        return False
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    line = _parse(data, start, len(data))
    valid = line is not None and check_line(data[start:-1], conversation)[1] is None
    return valid and line is not None and line.last_in_batch


# -- SQLite's files ------------------------------------------------------------------------------

#: How many faults a storage point on SQLite tries on a copy of the disk (each read back through
#: SQLite) before it damages nothing: a fault the damage table has no record for is not made.
SQLITE_TRIES = 6
#: What the SQLite faults strike, in the order a point's draw lists them: a record's text in a
#: synced page of the database file, the file's header, the file cut at a page boundary, a
#: synced frame of the write-ahead log's last transaction (or the log's header, when it holds
#: one transaction), the log cut at a frame boundary inside it, the log lost with it.
SQLITE_AIMS = ("row", "header", "page-cut", "frame", "frame-cut", "lost")
#: SQLite's errors that make ``SQLiteStore`` say the database is not usable (``_CORRUPT_ERRORS``).
_CORRUPT = ("NotADBError", "CorruptError")
_HEADER = 100  # the database file's header: the first page's first bytes
_MAGIC = 16  # "SQLite format 3\0"
_WAL_HEADER = 32
_FRAME_HEADER = 24

Rows = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class DatabaseView:
    """What a fresh connection reads of a SQLite store (``sim.world.sqlite_vfs.read_database``).
    ``steps``: an acquisition's reads before it writes the lease
    (``durable.store.sql.SqlStore._check_recoverable``), by name, in the order it makes
    them -- the schema, the lease row, the last event row, the checkpoint rows, the rows after
    the newest usable checkpoint -- each its rows or SQLite's error (the reads stop at one).
    ``tables``: every row of the store's three tables, (table, conversation, key, text), as the
    judge's reader and the other conversations see them. ``usable``: the newest checkpoint
    recovery may start from."""

    steps: tuple[tuple[str, Rows | str], ...]
    tables: Rows | str
    usable: int


@dataclass(frozen=True)
class WalFrames:
    """The write-ahead log's frames SQLite's recovery accepts (``sim.world.sqlite_vfs``'s
    ``wal_frames``), up to its last commit frame: each frame's start offset and page number;
    ``transactions``: (first, last) frame indexes of each."""

    page_size: int
    starts: tuple[int, ...]
    pages: tuple[int, ...]
    transactions: tuple[tuple[int, int], ...]


#: How this module reads a database -- (a copy of the disk, the database, the conversation) --
#: and a log's frames: ``sim.world.sqlite_vfs``'s ``read_database`` and ``wal_frames``.
DatabaseReader = Callable[[SimFS, str, str], DatabaseView]
FrameReader = Callable[[bytes], WalFrames | None]
_READERS: list[tuple[DatabaseReader, FrameReader]] = []


def register_sqlite_readers(database: DatabaseReader, frames: FrameReader) -> None:
    """Set how this module reads SQLite's files. ``sim.world.sqlite_vfs`` registers its readers
    when imported: it sits above this module (its VFS raises the injector's crashes), so this
    module cannot import it, and every world imports it before it opens a SQLite store
    (``sim.run.runner``)."""
    _READERS[:] = [(database, frames)]


def _readers() -> tuple[DatabaseReader, FrameReader]:
    if not _READERS:
        raise RuntimeError("no SQLite readers registered (import sim.world.sqlite_vfs)")
    return _READERS[0]


def _read(fs: SimFS, database: str, conversation: str) -> DatabaseView:
    return _readers()[0](fs, database, conversation)


def sqlite_database(fs: SimFS, root: str) -> str | None:
    """The SQLite database under a store's ``root``, if the store is SQLite's."""
    path = f"{root.rstrip('/')}/{SQLITE_NAME}"
    return path if fs.exists(path) else None


def _sqlite_row(
    role: Role, before: DatabaseView, after: DatabaseView, conversation: str
) -> TableRow | None:
    """The damage-table record of what a fault did to the store, read ``before`` and ``after``
    it; None: no record the sweep holds a store to (the fault is not made). Damage to the log
    is a rollback to an earlier commit (SQLite's recovery stops at the first bad frame);
    damage to the database file is read as an acquisition reads it, first failure first."""
    if before == after:
        return None  # e.g. a page the log holds a newer copy of: nothing read changed
    if role is Role.WAL:
        return _rolled_back(before, after, conversation)
    return _first_damage(before, after, conversation)


def _first_damage(before: DatabaseView, after: DatabaseView, conversation: str) -> TableRow | None:
    """The record of the first thing an acquisition refuses, in ``SQLiteStore``'s order: its
    reads' errors (the schema, the lease row, the last event row and the checkpoint rows are
    all read before any is checked), then the lease, the last event row, the checkpoints, and
    the rows recovery reads. A change it does not read is none (the store goes on, and only
    the judge's read of the whole log would see it: not a fault the sweep makes)."""
    was, now = dict(before.steps), dict(after.steps)
    for name in ("setup", "lease", "last", "checkpoints"):
        if isinstance(now.get(name), str):
            corrupt = str(now[name]).startswith(_CORRUPT)
            return TableRow("sqlite-header-damaged", conversation=conversation) if corrupt else None
    if now.get("lease") != was.get("lease") or now.get("setup") != was.get("setup"):
        return None  # the schema or a lease row: not what these faults aim at
    if now.get("last") != was.get("last"):
        return _damaged_event(before, was["last"], now["last"], conversation)
    if now.get("checkpoints") != was.get("checkpoints"):
        row = _damaged_checkpoint(was["checkpoints"], now["checkpoints"], conversation)
        if row is None or row.kind != "checkpoint-fails-checksum":
            return row
        # Skipped: recovery starts from an older checkpoint or the log, and every other row
        # must read as before (the judge reads them all).
        key = _changed_checkpoint(was["checkpoints"], now["checkpoints"])
        others = [_other_rows(v.tables, conversation, key) for v in (before, after)]
        readable = "from" in now and not isinstance(now["from"], str)
        return row if others[0] == others[1] and readable else None
    if isinstance(now.get("from"), str):
        corrupt = str(now["from"]).startswith(_CORRUPT)
        return TableRow("sqlite-header-damaged", conversation=conversation) if corrupt else None
    if now.get("from") != was.get("from"):
        return _damaged_event(before, was["from"], now["from"], conversation)
    return None


def _damaged_event(
    before: DatabaseView, was: Rows | str, now: Rows | str, conversation: str
) -> TableRow | None:
    """One event row's text changed (its checksum no longer verifies): ``SQLiteStore`` refuses
    it, naming the row. The table's record: its last commit's (no checkpoint ends at or after
    it), the newest checkpoint's own row, or an earlier commit no checkpoint ends after -- which
    the table answers "as the next row", the checkpoint's own (its SQLite cell)."""
    if isinstance(was, str) or isinstance(now, str) or len(was) != len(now):
        return None
    changed = [a[0] for a, b in zip(was, now, strict=True) if a != b]
    if len(changed) != 1 or any(a[0] != b[0] for a, b in zip(was, now, strict=True)):
        return None
    batches = _batches(before.tables, conversation)
    struck = changed[0]
    if struck not in batches:
        return None
    batch, first = batches[struck]
    if struck != before.usable and batch == batches[max(batches)][0]:
        return TableRow("damaged-last-commit", first, conversation)
    return TableRow("damaged-checkpoint-commit", first, conversation)


def _batches(tables: Rows | str, conversation: str) -> dict[int, tuple[str, int]]:
    """The conversation's event rows: sequence -> (its batch, its commit's first sequence)."""
    out: dict[int, tuple[str, int]] = {}
    for table, owner, sequence, text in () if isinstance(tables, str) else tables:
        if table == "events" and owner == conversation:
            doc = json.loads(text)
            out[int(sequence)] = (str(doc["batch"]), int(sequence) - int(doc["batch_index"]))
    return out


def _damaged_checkpoint(was: Rows | str, now: Rows | str, conversation: str) -> TableRow | None:
    """One checkpoint row's body changed: ``SQLiteStore`` parses every row before it checks one
    (``durable.store.base.parsed_checkpoints``), so one that does not parse, or whose key is not
    what it holds, is refused; one that fails its checksum is skipped."""
    if isinstance(was, str) or isinstance(now, str) or [r[0] for r in was] != [r[0] for r in now]:
        return None
    changed = [b for a, b in zip(was, now, strict=True) if a != b]
    if len(changed) != 1:
        return None
    through, body = changed[0]
    try:
        checkpoint = Checkpoint.model_validate(parse_json(body))
    except ValueError:
        return TableRow("checkpoint-unparseable", conversation=conversation)
    if checkpoint.through_sequence != through:
        return TableRow("checkpoint-misnamed", conversation=conversation)
    if checkpoint_usable(checkpoint, conversation):
        return None
    return TableRow("checkpoint-fails-checksum", conversation=conversation)


def _changed_checkpoint(was: Rows | str, now: Rows | str) -> int:
    """The key of the checkpoint row whose body changed (``_damaged_checkpoint`` found one)."""
    assert not isinstance(was, str) and not isinstance(now, str)
    return int(next(a[0] for a, b in zip(was, now, strict=True) if a != b))


def _other_rows(tables: Rows | str, conversation: str, through: int) -> Rows | str:
    """Every row but the checkpoint row ``through`` of ``conversation``."""
    if isinstance(tables, str):
        return tables
    key = ("checkpoints", conversation, through)
    return tuple(r for r in tables if r[:3] != key)


def _rolled_back(before: DatabaseView, after: DatabaseView, conversation: str) -> TableRow | None:
    """Damage to the log's last transaction: the store reads as before it. A lost commit (the
    whole of the conversation's last batch, nothing else changed) is ``TORN_WAL``; a lost
    checkpoint save (its newest checkpoint gone, an older one back) is the table's newest
    checkpoint missing. Anything else -- a lease write lost (the epoch it granted would be
    granted again), another conversation's rows -- is no record the sweep holds a store to."""
    if isinstance(before.tables, str) or isinstance(after.tables, str):
        return None
    mine = ("events", "checkpoints")
    rest = [
        [r for r in view if not (r[0] in mine and r[1] == conversation)]
        for view in (before.tables, after.tables)
    ]
    if rest[0] != rest[1]:
        return None
    events = [
        [r[2:] for r in view if r[:2] == ("events", conversation)]
        for view in (before.tables, after.tables)
    ]
    saved = [
        {r[2]: r[3] for r in view if r[:2] == ("checkpoints", conversation)}
        for view in (before.tables, after.tables)
    ]
    kept, lost = events[1], events[0][len(events[1]) :]
    if kept != events[0][: len(kept)]:
        return None
    if lost:
        batches = {_batches(before.tables, conversation)[int(s)] for s, _ in lost}
        if saved[0] != saved[1] or len(batches) != 1 or next(iter(batches))[1] != lost[0][0]:
            return None
        first = int(lost[0][0])
        if max(saved[1], default=0) >= first:
            return TableRow("log-cut-under-checkpoint", first, conversation)
        return TableRow(TORN_WAL, first, conversation)
    newest = max(saved[0], default=0)
    if newest and newest not in saved[1] and max(saved[1], default=0) < newest:
        return TableRow("newest-checkpoint-missing", conversation=conversation)
    return None


@dataclass(frozen=True)
class _Fault:
    """One fault on one of SQLite's files: a bit flipped (``flip``: offset, bit), the file cut
    (``cut``), or -- neither -- the file gone; ``kind`` names it in the crash's outcome."""

    path: str
    kind: str
    flip: tuple[int, int] | None = None
    cut: int | None = None

    def text(self) -> str:
        if self.flip is not None:
            return f"{self.kind}:{self.flip[0]}.{self.flip[1]}"
        return f"{self.kind}:{self.cut}" if self.cut is not None else f"{self.kind}:gone"

    def make(self, fs: SimFS) -> None:
        fs.damage_log(self.path, cut=self.cut, flip=self.flip)


def _sqlite_aims(
    fs: SimFS, database: str, before: DatabaseView, conversation: str
) -> dict[str, list[_Fault] | list[tuple[int, int]]]:
    """What each of ``SQLITE_AIMS`` may strike at this point: cuts and whole faults as faults,
    flips as byte ranges (start, end) of synced bytes -- a bit of a byte in one is drawn."""
    aims: dict[str, list[Any]] = {aim: [] for aim in SQLITE_AIMS}
    wal_path = f"{database}-wal"
    wal = fs.synced_prefix(wal_path)
    frames = _readers()[1](wal[0]) if wal else None
    shadowed = set(frames.pages) if frames else set()
    db = fs.synced_prefix(database)
    if db is not None and 0 < db[1] == len(db[0]) and len(db[0]) >= _HEADER:
        data = db[0]
        size = struct.unpack(">H", data[16:18])[0]
        page_size = 65536 if size == 1 else size
        if 1 not in shadowed:
            aims["header"].append((0, _MAGIC))
        aims["row"] = [
            (start, end)
            for start, end in _row_ranges(data, before, conversation)
            if start // page_size + 1 not in shadowed
        ]
        pages = len(data) // page_size
        aims["page-cut"] = [
            _Fault(database, "cut-at-page", cut=k * page_size) for k in range(1, pages)
        ]
    if wal is not None and frames is not None and frames.transactions:
        data, synced = wal
        first, last = frames.transactions[-1]
        end = frames.starts[last] + _FRAME_HEADER + frames.page_size
        if min(end, synced) > frames.starts[first]:
            aims["frame"].append((frames.starts[first], min(end, synced)))
        alone = len(frames.transactions) == 1
        if alone and synced >= _WAL_HEADER:
            aims["frame"].append((0, _WAL_HEADER))
        if synced == len(data):
            aims["frame-cut"] = [
                _Fault(wal_path, "cut-at-frame", cut=frames.starts[i])
                for i in range(first, last + 1)
            ]
            if alone:
                aims["lost"].append(_Fault(wal_path, "deleted"))
    return aims


def _row_ranges(data: bytes, before: DatabaseView, conversation: str) -> list[tuple[int, int]]:
    """Where the text of each row an acquisition reads lies in the database file's bytes (its
    first copy; a text that spills into overflow pages, from its first 64 bytes): the
    conversation's event rows from the newest usable checkpoint's on, its last row, and its
    checkpoint rows. Only ASCII bytes are struck, by bits that keep them ASCII: a record's
    text must stay text for SQLite to hand it to the store, which then refuses it."""
    if isinstance(before.tables, str):
        return []
    events = [r for r in before.tables if r[:2] == ("events", conversation)]
    last = max((int(r[2]) for r in events), default=0)
    texts = [
        str(r[3])
        for r in before.tables
        if r[1] == conversation
        and (
            r[0] == "checkpoints" or (r[0] == "events" and (r[2] >= before.usable or r[2] == last))
        )
    ]
    out: list[tuple[int, int]] = []
    for text in texts:
        raw = text.encode("utf-8")
        at = data.find(raw)
        if at < 0:
            raw = raw[:64]
            at = data.find(raw)
        if at >= 0:
            out.append((at, at + len(raw)))
    return out


def aimed_sqlite_fault(
    fs: SimFS, rng: random.Random, *, database: str, conversation: str
) -> tuple[dict[str, str], dict[str, TableRow | None]]:
    """One fault on SQLite's files under a storage point, and its damage-table record: an aim of
    ``SQLITE_AIMS`` drawn among those this point offers, a fault drawn in it and made on a copy
    of the disk, read back through SQLite (``_sqlite_row``); the first whose record the table
    has is made on ``fs``. ``({}, {})``: none in ``SQLITE_TRIES`` (the point is a kill).

    Only what a single copy can tell, as for the file store: damage to the log below its last
    transaction loses every later commit without an error (SQLite's recovery stops at the first
    bad frame), damage the store reads only after it has written (a page no acquisition
    reads), and a lease write lost (its epoch granted again) have no record, and are not made
    (docs/crash-model.md, "Not modelled")."""
    before = _read(fs.clone(deep=True), database, conversation)
    if isinstance(before.tables, str):
        return {}, {}  # an earlier fault's damage: one fault at a time is judged
    aims = _sqlite_aims(fs, database, before, conversation)
    for _ in range(SQLITE_TRIES):
        live = [aim for aim in SQLITE_AIMS if aims[aim]]
        if not live:
            break
        fault = _draw(fs, database, live[rng.randrange(len(live))], aims, rng)
        if fault is None:
            continue
        scratch = fs.clone(deep=True)
        fault.make(scratch)
        row = _sqlite_row(
            role_of(fault.path), before, _read(scratch, database, conversation), conversation
        )
        if row is not None:
            fault.make(fs)
            return {fault.path: fault.text()}, {fault.path: row}
    return {}, {}


def _draw(
    fs: SimFS, database: str, aim: str, aims: dict[str, list[Any]], rng: random.Random
) -> _Fault | None:
    """A fault of ``aim``, taken out of ``aims`` (a flip's range stays: another bit may do)."""
    choices = aims[aim]
    if aim not in ("row", "header", "frame"):
        fault: _Fault = choices.pop(rng.randrange(len(choices)))
        return fault
    start, end = choices[rng.randrange(len(choices))]
    path = database if aim in ("row", "header") else f"{database}-wal"
    offset = start + rng.randrange(end - start)
    if aim != "row":
        return _Fault(
            path,
            "page-bitflip" if aim == "header" else "frame-bitflip",
            flip=(offset, rng.randrange(8)),
        )
    data = fs.read(path)
    if data[offset] >= 0x80:
        return None  # a byte of a character beyond ASCII: flipped, the text would not decode
    return _Fault(path, "page-bitflip", flip=(offset, rng.randrange(7)))
