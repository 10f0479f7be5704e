"""I2, the log: what a fresh reader of the store finds is contiguous from sequence 1, every
record verifies its checksum, only whole batches are visible, and the log reduces.

It judges the log's form, not what the log says: every other family judges the content, and a
process that stopped on damaged storage is I13's (``refusal``), which runs instead. Each
violation says what a whole log has there and what this one has (``expected``/``actual``), as
the other families do, so a report's card shows the difference and not only the witness rows.
"""

from __future__ import annotations

import itertools

from durable.events import SCHEMA_VERSION, EventRecord
from sim.judgement.oracles.facts import Reduced, reduce_log, row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_log(result: RunResult, reduced: Reduced | None = None) -> list[Violation]:
    if result.errors.store_error is not None:
        return [
            Violation(
                "I2",
                "a fresh reader finds the store corrupt",
                (result.errors.store_error,),
                expected="the store reads without an error",
                actual=result.errors.store_error,
            )
        ]
    out: list[Violation] = []
    records = result.durable.records
    for i, record in enumerate(records):
        if record.sequence != i + 1:
            return [
                Violation(
                    "I2",
                    "sequences are not contiguous from 1",
                    tuple(row(r) for r in records[max(0, i - 1) : i + 1]),
                    expected=f"sequence {i + 1}",
                    actual=f"sequence {record.sequence}",
                )
            ]
        if not record.verify():
            return [_checksum_fails(record)]
    for previous, record in itertools.pairwise(records):
        if not previous.last_in_batch and previous.batch != record.batch:
            out.append(
                Violation(
                    "I2",
                    "a batch ends without its last record (a partial commit is visible)",
                    (row(previous), row(record)),
                    expected=f"#{previous.sequence} is the last record of batch {previous.batch}",
                    actual=f"#{previous.sequence} is not, and #{record.sequence} starts batch "
                    f"{record.batch}",
                )
            )
            break
        if previous.last_in_batch and previous.batch == record.batch:
            out.append(
                Violation(
                    "I2",
                    "records follow the end of their own batch",
                    (row(record),),
                    expected=f"batch {previous.batch} ends at #{previous.sequence}",
                    actual=f"#{record.sequence} is in batch {record.batch} too",
                )
            )
            break
    if records and not records[-1].last_in_batch:
        last = records[-1]
        out.append(
            Violation(
                "I2",
                "a partial batch is visible after recovery",
                (row(last),),
                expected="the log ends with the last record of a batch",
                actual=f"it ends at #{last.sequence}, inside batch {last.batch}",
            )
        )
    error = (reduced or reduce_log(result)).error
    if error is not None:
        out.append(
            Violation(
                "I2",
                f"the log does not reduce: {error}",
                (),
                expected="every record reduces in order",
                actual=str(error),
            )
        )
    return out


def _checksum_fails(record: EventRecord) -> Violation:
    """The stored checksum against the one the record's content gives (or the schema version
    a record of another version has: it verifies only under its own)."""
    if record.schema_version != SCHEMA_VERSION:
        expected = f"schema version {SCHEMA_VERSION}"
        actual = f"schema version {record.schema_version}"
    else:
        expected = f"checksum {record.compute_checksum()[:16]} (of its content)"
        actual = f"checksum {record.checksum[:16]} (stored)"
    return Violation(
        "I2",
        "a committed record fails its checksum",
        (row(record),),
        expected=expected,
        actual=actual,
    )
