"""Storage faults as the file store's layout sees them, and the damage table's record of each.

``SimFS.damage_synced`` damages bytes: it knows files, not what they are. Two things need the
store's layout (``durable.store.file``) and live here, next to the faults, in one place:

- the **aimed faults** (``aimed_fault``), which only a layout can aim: a log cut at a commit
  boundary, or deleted, while a checkpoint of its conversation proves commits beyond the cut; and
  damage inside the log's last synced write. ``damage_synced`` never makes them, because a
  single copy cannot tell them from a shorter log or a torn write -- except where a checkpoint
  proves the loss, which is exactly what the damage table promises to refuse
  (docs/crash-model.md, "Storage faults");
- the **damage-table record** of every injected fault (``table_row``): which record of
  ``durable.store.damage`` it is, from the damaged file's role (log, checkpoint, lease,
  temporary or quarantine file) and where in the file it struck. The oracle I23
  (``sim.judgement.oracles.damage_table``) reads the store's response against that record. A
  fault this function cannot map is a harness error there, never a silent pass.

Determinism: the only randomness is the ``random.Random`` handed to ``aimed_fault``.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from enum import StrEnum

from durable.codec import canonical_json, parse_json, sha256_hex
from durable.store.base import Checkpoint, Lease, checkpoint_usable
from durable.store.file import EVENTS_FILE, LEASE_FILE, is_quarantine
from durable.store.logscan import check_line
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

_CHECKPOINT = re.compile(r"^checkpoint-(\d{12})\.json$")


class Role(StrEnum):
    """What a file under the store's root is to the file store."""

    LOG = "log"
    CHECKPOINT = "checkpoint"
    LEASE = "lease"
    TEMPORARY = "temporary"
    QUARANTINE = "quarantine"
    OTHER = "other"


def role_of(path: str) -> Role:
    name = path.rsplit("/", 1)[-1]
    if name == EVENTS_FILE:
        return Role.LOG
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
    or ``UNREAD``) and, for damage to the log, the first sequence the damage takes
    (``first_lost``: what a recovery that goes on may lose from, no earlier)."""

    kind: str
    first_lost: int = 0


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
    directory = log_path.rsplit("/", 1)[0]
    found = (_CHECKPOINT.fullmatch(name) for name in fs.listdir(directory))
    return [int(match.group(1)) for match in found if match is not None]


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
        return TableRow("checkpoint-unparseable")
    if not checkpoint_usable(checkpoint, conversation):
        return TableRow("checkpoint-fails-checksum")
    match = _CHECKPOINT.fullmatch(name)
    if match is not None and int(match.group(1)) != checkpoint.through_sequence:
        return TableRow("checkpoint-misnamed")
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
        return TableRow("log-missing", 1) if top else None
    if kind == CUT:
        cut = _line_at(data, int(detail))
        return (
            TableRow("log-cut-under-checkpoint", cut.sequence)
            if cut and top >= cut.sequence
            else None
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
    # tail after it proves nothing).
    if last.start >= damaged[1] and last.batch != struck.batch:
        return TableRow("damaged-earlier-commit", struck.first)
    if top >= struck.first:
        return TableRow("damaged-last-commit-under-checkpoint", struck.first)
    return TableRow("damaged-last-commit", struck.first)
