"""The file store's log scanner: a pure function from the bytes of ``events.jsonl`` to what they
hold -- the committed records, where the committed prefix ends, and what follows it.

Commit rule (``durable.store.file``): a batch is committed only once its last record
(``last_in_batch``) is complete, parses and verifies, and continues the sequence. The scan stops
at the first line that breaks the rule; whatever follows the last committed batch is an
*anomaly*, which the scan classifies from the bytes alone:

- **torn**: nothing after the committed prefix proves a later commit. A crash (even power loss)
  damages only the last, unacknowledged write, so this is what a crash leaves: a tail to ignore
  and, on repair, truncate.
- **damage**: a valid record of a *later* commit -- one that starts after the first commit the
  prefix is missing, per its ``batch_index`` -- follows the failure (a CRLF line end does not
  make a record invalid here: ``check_line``). Commits were made on top of
  the damaged one: acknowledged data is damaged, and cutting it away would drop them. Valid
  records of the damaged commit itself prove nothing and are part of the tail.

What a store does with each is the store's decision, not the scanner's: ``FileStore`` refuses
damage with ``CorruptStore`` when it synced every commit (``fsync=True``), and treats it as a torn
suffix otherwise (power loss without fsync may damage any suffix). No I/O happens here: the scan
is tested on byte strings (tests/durable/test_log_scan.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from durable.events import EventRecord, parse_record


@dataclass(frozen=True)
class LaterCommit:
    """The evidence of damage: a valid record, at ``line`` (1-based) starting at byte ``offset``,
    of a commit later than the first one the committed prefix is missing."""

    line: int
    offset: int
    sequence: int


@dataclass(frozen=True)
class Anomaly:
    """What follows the committed prefix. ``problem`` says why the scan stopped, naming the line
    (``line``: the failing line, or where a batch without its last record starts); ``offset``
    is the first byte the scan could not accept (the failing line's start; the file's size when
    every line parsed but the last batch has no last record). ``later`` is the evidence of
    damage (None: a torn tail)."""

    problem: str
    line: int
    offset: int
    later: LaterCommit | None = None

    @property
    def kind(self) -> Literal["torn", "damage"]:
        return "torn" if self.later is None else "damage"


@dataclass(frozen=True)
class LogScan:
    """The scan of a log: its committed ``records`` and the byte offset of each one's line,
    ``good_end`` (the end of the last committed batch: the durable end, where a repair
    truncates), the file's ``size``, and the ``anomaly`` after ``good_end`` if there is one
    (``good_end == size`` otherwise)."""

    records: list[EventRecord]
    offsets: list[int]
    good_end: int
    size: int
    anomaly: Anomaly | None = field(default=None)

    @property
    def last_sequence(self) -> int:
        return self.records[-1].sequence if self.records else 0

    @property
    def tail_problem(self) -> str | None:
        """Why the scan stopped before the end of the file (None: it did not)."""
        return self.anomaly.problem if self.anomaly is not None else None


def check_line(line: bytes, conversation_id: str) -> tuple[EventRecord | None, str | None]:
    """Parse and verify one complete line: (record, None) if good, else (maybe record, why).

    A line ending in a carriage return is refused though its record verifies (JSON takes the
    ``\r`` for whitespace): the store writes ``\n`` alone, so a CRLF line is bytes the store
    did not write -- the log rewritten as text, by an editor or a checkout -- and a reader that
    took it would also miscount the log's bytes. Since its record is intact, a CRLF line of a
    later commit still proves the damage is not a torn tail (``later_commit``)."""
    try:
        record = parse_record(line)
    except ValueError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"does not parse ({first})"
    if not record.verify():
        return None, f"checksum mismatch (sequence {record.sequence})"
    if record.conversation_id != conversation_id:
        return None, f"record of conversation {record.conversation_id}"
    if line.endswith(b"\r"):
        return record, "ends with a carriage return (a CRLF line end: rewritten as text)"
    return record, None


def scan_log(data: bytes, conversation_id: str) -> LogScan:
    """Scan a whole log: the committed prefix, and a classified anomaly after it, if any."""
    size = len(data)
    good: list[EventRecord] = []
    good_offsets: list[int] = []
    pending: list[EventRecord] = []
    pending_offsets: list[int] = []
    pending_line = 0  # line number where the pending (not yet complete) batch starts
    good_end = 0
    last_sequence = 0
    pos = 0
    line_no = 0
    problem: str | None = None
    fail_pos = size  # where the first failing line starts (size: no failing line)
    while pos < size:
        line_no += 1
        newline = data.find(b"\n", pos)
        if newline < 0:
            problem = f"line {line_no}: incomplete line (no newline, {size - pos} bytes)"
            fail_pos = pos
            break
        record, why = check_line(data[pos:newline], conversation_id)
        if record is not None:
            expected = (pending[-1].sequence if pending else last_sequence) + 1
            if record.sequence != expected:
                why = f"sequence {record.sequence}, expected {expected}"
            elif pending and record.batch != pending[0].batch:
                why = f"batch {record.batch} starts before batch {pending[0].batch} completed"
        if why is not None:
            problem = f"line {line_no}: {why}"
            fail_pos = pos
            break
        assert record is not None
        if not pending:
            pending_line = line_no
        pending.append(record)
        pending_offsets.append(pos)
        pos = newline + 1
        if record.last_in_batch:
            good.extend(pending)
            good_offsets.extend(pending_offsets)
            pending.clear()
            pending_offsets.clear()
            good_end = pos
            last_sequence = record.sequence
    if problem is None and pending:
        problem = (
            f"line {pending_line}: batch {pending[0].batch} starts here but its last record "
            "is missing"
        )
        line_no = pending_line
    if problem is None:
        return LogScan(good, good_offsets, good_end, size)
    later = later_commit(data, fail_pos, line_no, last_sequence, conversation_id)
    return LogScan(good, good_offsets, good_end, size, Anomaly(problem, line_no, fail_pos, later))


def later_commit(
    data: bytes, start: int, line_no: int, last_sequence: int, conversation_id: str
) -> LaterCommit | None:
    """The first valid record at or after byte ``start`` (line ``line_no``) that belongs to a
    commit later than the one that should follow ``last_sequence``; None if there is none (the
    anomaly is a torn tail). An incomplete last line proves nothing; a CRLF line end is damage
    to the line, not to its record, which counts."""
    pos = start
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline < 0:
            return None
        record, why = check_line(data[pos:newline].removesuffix(b"\r"), conversation_id)
        later = record is not None and record.sequence - record.batch_index > last_sequence + 1
        if record is not None and why is None and later:
            return LaterCommit(line_no, pos, record.sequence)
        pos = newline + 1
        line_no += 1
    return None
