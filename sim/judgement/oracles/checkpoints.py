"""I3, checkpoints and recovered state: every checkpoint that verifies and lies inside the log
is ``reduce`` of the prefix it claims, and every recovery rebuilt exactly ``reduce`` of the log
its store returned.

A log that does not reduce is I2's; a checkpoint that fails its checksum or claims more than the
log holds is not judged (recovery must skip it, and I3's second check sees if it did not).
"""

from __future__ import annotations

from durable.codec import canonical_json, sha256_hex
from sim.judgement.oracles.facts import Reduced, reduce_log
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_checkpoints(result: RunResult, reduced: Reduced | None = None) -> list[Violation]:
    out: list[Violation] = []
    records = result.durable.records
    prefixes = (reduced or reduce_log(result)).prefixes
    for checkpoint in result.durable.checkpoints:
        if not checkpoint.verify() or checkpoint.through_sequence > len(records):
            continue
        expected = prefixes.get(checkpoint.through_sequence)
        if expected is None:
            continue  # I2 reports a log that does not reduce
        if expected != checkpoint.state:
            digest = sha256_hex(canonical_json(expected))  # ``State.digest`` of that state
            out.append(
                Violation(
                    "I3",
                    "a valid checkpoint differs from reduce of the log prefix it claims",
                    (f"checkpoint through #{checkpoint.through_sequence}",),
                    expected=f"digest {digest[:16]}",
                    actual=f"checkpoint state of {len(checkpoint.state.get('tasks', {}))} tasks",
                )
            )
    out += [
        Violation(
            "I3",
            "after recovery, the process's state differs from reduce of the log its store "
            "returns (a recovery that rebuilt wrongly, or a store that acknowledged commits it "
            "does not return)",
            (mismatch,),
            expected="reduce(log)",
            actual="the recovered state",
        )
        for mismatch in result.errors.recovery_mismatches[:1]
    ]
    return out
