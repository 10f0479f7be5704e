"""I2, the log: what a fresh reader of the store finds is contiguous from sequence 1, every
record verifies its checksum, only whole batches are visible, and the log reduces.

It judges the log's form, not what the log says: every other family judges the content, and a
process that stopped on damaged storage is I13's (``refusal``), which runs instead.
"""

from __future__ import annotations

import itertools

from sim.judgement.oracles.facts import Reduced, reduce_log, row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_log(result: RunResult, reduced: Reduced | None = None) -> list[Violation]:
    if result.errors.store_error is not None:
        return [
            Violation("I2", "a fresh reader finds the store corrupt", (result.errors.store_error,))
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
            return [Violation("I2", "a committed record fails its checksum", (row(record),))]
    for previous, record in itertools.pairwise(records):
        if not previous.last_in_batch and previous.batch != record.batch:
            out.append(
                Violation(
                    "I2",
                    "a batch ends without its last record (a partial commit is visible)",
                    (row(previous), row(record)),
                )
            )
            break
        if previous.last_in_batch and previous.batch == record.batch:
            out.append(Violation("I2", "records follow the end of their own batch", (row(record),)))
            break
    if records and not records[-1].last_in_batch:
        out.append(
            Violation("I2", "a partial batch is visible after recovery", (row(records[-1]),))
        )
    error = (reduced or reduce_log(result)).error
    if error is not None:
        out.append(Violation("I2", f"the log does not reduce: {error}", ()))
    return out
