"""The file store's log scanner (durable/store/logscan.py), on byte strings: what it accepts as
committed, where the durable end is, and how it classifies what follows -- a torn tail (what a
crash leaves) or damage (a valid later commit follows the failure). These pin what the scanner
says today; what the store does with each is tested in test_store_file.py and
test_damage_table.py."""

from __future__ import annotations

import pytest
from testkit import CONV, input_batch, sealed_batch

from durable.events import EventRecord, InputAccepted
from durable.store.base import Lease
from durable.store.logscan import Anomaly, LaterCommit, LogScan, scan_log

LEASE = Lease(conversation_id=CONV, owner_id="owner-a", epoch=1, expires_at_s=30.0)
#: Three commits: [1], [2, 3], [4].
LOG = (
    input_batch(1, 1, lease=LEASE) + input_batch(2, 2, lease=LEASE) + input_batch(4, 1, lease=LEASE)
)


def line(record: EventRecord) -> bytes:
    return (record.to_line() + "\n").encode("utf-8")


def log_bytes(records: list[EventRecord]) -> bytes:
    return b"".join(line(r) for r in records)


def offsets(records: list[EventRecord]) -> list[int]:
    """The byte offset of each record's line in ``log_bytes(records)``."""
    out, pos = [], 0
    for record in records:
        out.append(pos)
        pos += len(line(record))
    return out


def flip_content(record: EventRecord) -> bytes:
    """The record's line with one bit flipped inside its content: it still parses, but its
    checksum no longer verifies (what bit rot in a text field looks like)."""
    raw = bytearray(line(record))
    at = raw.index(b'"content":"hello') + len(b'"content":"')
    raw[at] ^= 0x01  # h -> i
    return bytes(raw)


def assert_committed(scan: LogScan, records: list[EventRecord]) -> None:
    assert scan.records == records
    assert scan.offsets == offsets(records)
    assert scan.good_end == len(log_bytes(records))
    assert scan.last_sequence == (records[-1].sequence if records else 0)


def test_an_empty_file_holds_nothing_and_nothing_is_wrong() -> None:
    scan = scan_log(b"", CONV)
    assert scan == LogScan([], [], 0, 0, None)
    assert scan.tail_problem is None


def test_a_clean_log_is_committed_to_its_last_byte() -> None:
    data = log_bytes(LOG)
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG)
    assert (scan.size, scan.anomaly) == (len(data), None)


def test_a_torn_last_batch_is_a_tail_that_starts_where_the_batch_does() -> None:
    torn = input_batch(5, 3, lease=LEASE)[:2]  # batch 5-7 lost its last record
    data = log_bytes(LOG + torn)
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG)
    assert scan.anomaly == Anomaly(
        problem=f"line 5: batch {torn[0].batch} starts here but its last record is missing",
        line=5,
        offset=len(data),  # every line parsed: the scan stopped at the end of the file
        later=None,
    )
    assert scan.anomaly.kind == "torn" and scan.tail_problem == scan.anomaly.problem


def test_a_half_written_last_line_is_a_torn_tail_from_its_first_byte() -> None:
    committed = log_bytes(LOG)
    data = committed + line(input_batch(5, 1, lease=LEASE)[0])[:40]
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG)
    assert scan.anomaly == Anomaly(
        "line 5: incomplete line (no newline, 40 bytes)", 5, len(committed), None
    )


def test_a_flipped_bit_in_the_middle_is_damage_proven_by_the_next_commit() -> None:
    data = line(LOG[0]) + flip_content(LOG[1]) + line(LOG[2]) + line(LOG[3])
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG[:1])
    starts = offsets(LOG)
    # Record 3 is part of the damaged commit (batch_index 1): it proves nothing. Record 4
    # starts a later commit: the damaged one had been acknowledged.
    assert scan.anomaly == Anomaly(
        "line 2: checksum mismatch (sequence 2)",
        2,
        starts[1],
        LaterCommit(line=4, offset=starts[3], sequence=4),
    )
    assert scan.anomaly.kind == "damage"


def test_a_flipped_bit_in_the_last_commit_reads_as_a_torn_tail() -> None:
    """The one case a single copy cannot tell: damage to its last write looks like a torn
    write (docs/stores.md, "What each store mode does with damaged storage")."""
    data = log_bytes(LOG[:3]) + flip_content(LOG[3])
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG[:3])
    assert scan.anomaly == Anomaly(
        "line 4: checksum mismatch (sequence 4)", 4, len(log_bytes(LOG[:3])), None
    )


def test_a_duplicated_last_line_is_a_torn_tail() -> None:
    data = log_bytes(LOG) + line(LOG[3])
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG)
    assert scan.anomaly == Anomaly("line 5: sequence 4, expected 5", 5, len(log_bytes(LOG)), None)


def test_a_duplicated_line_before_later_commits_is_damage() -> None:
    data = line(LOG[0]) + line(LOG[0]) + log_bytes(LOG[1:])
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG[:1])
    at = len(line(LOG[0]))
    # Record 2 starts the commit that should follow sequence 1: only record 4 is later.
    assert scan.anomaly == Anomaly(
        "line 2: sequence 1, expected 2",
        2,
        at,
        LaterCommit(line=5, offset=at + len(log_bytes(LOG[:3])), sequence=4),
    )


def test_a_crlf_log_is_damage_from_its_first_line() -> None:
    """A ``\r`` before each newline is JSON whitespace, so every record would parse and verify;
    but the store writes ``\n`` alone, so a CRLF line is bytes it never wrote (the log rewritten
    as text): the scan stops at the first one. Its records are intact, so the CRLF lines of
    later commits prove it is damage, not a torn tail that recovery could cut."""
    data = log_bytes(LOG).replace(b"\n", b"\r\n")
    scan = scan_log(data, CONV)
    assert_committed(scan, [])
    second = len(line(LOG[0])) + 1  # line 2 starts after line 1 and its \r
    assert scan.anomaly == Anomaly(
        problem="line 1: ends with a carriage return (a CRLF line end: rewritten as text)",
        line=1,
        offset=0,
        later=LaterCommit(line=2, offset=second, sequence=2),
    )
    assert scan.anomaly.kind == "damage"


def test_a_crlf_last_line_alone_is_a_torn_tail() -> None:
    """Only the last line ends in CRLF: nothing later proves a commit, so it reads as a torn
    tail (what follows the committed prefix), like any other damage to the last write."""
    data = log_bytes(LOG)[:-1] + b"\r\n"
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG[:3])
    assert scan.anomaly is not None and scan.anomaly.kind == "torn"


def test_zeros_after_the_log_do_not_parse_and_are_a_torn_tail() -> None:
    committed = log_bytes(LOG)
    scan = scan_log(committed + b"\x00" * 300, CONV)
    assert_committed(scan, LOG)
    assert scan.anomaly is not None and scan.anomaly.later is None
    assert scan.anomaly.problem == "line 5: incomplete line (no newline, 300 bytes)"
    scan = scan_log(committed + b"\x00" * 30 + b"\n", CONV)
    assert scan.anomaly is not None and scan.anomaly.later is None
    assert scan.anomaly.problem.startswith("line 5: does not parse (")


def test_a_record_of_another_conversation_stops_the_scan() -> None:
    other = input_batch(2, 1, lease=LEASE, conversation_id="other")
    data = line(LOG[0]) + line(other[0]) + log_bytes(LOG[1:])
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG[:1])
    assert scan.anomaly is not None
    assert scan.anomaly.problem == "line 2: record of conversation other"
    assert scan.anomaly.later == LaterCommit(5, len(data) - len(line(LOG[3])), 4)


def test_interleaved_batches_stop_the_scan() -> None:
    first = input_batch(2, 2, lease=LEASE, batch="one")
    second = sealed_batch(
        [InputAccepted(submission_id="x", request_id=None, content="x")],
        start=3,
        owner_id="owner-a",
        epoch=1,
        batch="two",
    )
    data = line(LOG[0]) + line(first[0]) + line(second[0])
    scan = scan_log(data, CONV)
    assert_committed(scan, LOG[:1])
    at = len(line(LOG[0])) + len(line(first[0]))
    # Batch two starts at sequence 3, after the commit that should follow sequence 1 began:
    # its valid record is the evidence that batch one was damaged, not torn.
    assert scan.anomaly == Anomaly(
        "line 3: batch two starts before batch one completed", 3, at, LaterCommit(3, at, 3)
    )


@pytest.mark.parametrize("cut", [0, 1, 100])
def test_a_cut_inside_the_first_line_leaves_nothing_committed(cut: int) -> None:
    data = line(LOG[0])[:cut]
    scan = scan_log(data, CONV)
    assert_committed(scan, [])
    assert (scan.anomaly is None) == (cut == 0)
