"""I23, the damage table kept: under a storage fault, the store answers as the damage table
(``durable.store.damage``, the registry docs/stores.md and tests/durable/test_damage_table.py
read) says its mode answers that damage -- it refuses what the table refuses, goes on where the
table goes on, and a recovery that goes on keeps what the table says it keeps.

Each injected fault carries its record (``sim.world.storage_faults.table_row``, read when the
fault is made: the damaged file's role and where the fault struck). "Refused" and "recovered
correctly" both pass every other oracle, so without this one a store that skips an unparseable
checkpoint under ``fsync=True`` and recovers from the log would pass every storage-fault
schedule. What it leaves to others: whether a refusal names the damage and leaves the evidence
as found (I13); whether what a recovery kept is what the log then holds (I2, I12 and the rest).

Only a schedule with one storage fault and no power loss after it is judged (a second fault,
or a power loss dropping what the page cache held, changes what the first's record promises);
a refusal the table demands is judged only when a process opened the damaged conversation
after the fault (a lease granted to it: the scenario's own conversation, whose grants the
machine records). A fault the mapping cannot place is ``UnmappedFault``: a harness
error, never a pass.
"""

from __future__ import annotations

from durable.store.damage import Kept, Mode, Outcome, Response, by_kind
from sim.judgement.violation import Violation
from sim.run.runner import RunResult
from sim.world.evidence import CrashRecord
from sim.world.storage_faults import INVISIBLE, UNREAD, TableRow
from sim.world.stores import StoreKind


class UnmappedFault(AssertionError):
    """A storage fault no record of the damage table describes: the harness made a fault it
    cannot judge (extend ``sim.world.storage_faults.table_row``, or the table)."""


def _mode(result: RunResult) -> Mode:
    if StoreKind(result.store) is not StoreKind.FILE:
        raise UnmappedFault(f"storage faults on the {result.store} store have no table mode")
    return Mode.FILE_FSYNC if result.scenario.fsync else Mode.FILE_NOFSYNC


def _only_fault(result: RunResult) -> CrashRecord | None:
    faults = [c for c in result.trace.crashes if c.point.kind == "storage"]
    return faults[0] if len(faults) == 1 and faults[0].fs_outcome else None


def promised(result: RunResult) -> list[tuple[str, TableRow, Outcome]]:
    """Each file the schedule's one storage fault damaged, with its record and the outcome the
    table promises in this run's mode (``[]``: no single storage fault damaged anything)."""
    fault = _only_fault(result)
    if fault is None:
        return []
    mode = _mode(result)
    out: list[tuple[str, TableRow, Outcome]] = []
    for path, what in fault.fs_outcome.items():
        row = fault.damage_rows.get(path)
        if row is None:
            raise UnmappedFault(f"{fault.point.text()}: {path}: {what} maps to no damage record")
        if row.kind in (UNREAD, INVISIBLE):
            continue  # nothing the store reads changed: no row applies, every oracle judges
        outcome = by_kind(row.kind).outcome(mode)
        if outcome is None or outcome.response is Response.CANNOT_ARISE:
            raise UnmappedFault(f"{path}: {what} is {row.kind}, which {mode} cannot suffer")
        out.append((path, row, outcome))
    return out


def table_allows_loss(result: RunResult) -> bool:
    """Whether the damage table lets this run's recovery lose acknowledged commits: a single
    storage fault the store cannot tell from a shorter log (a damaged last commit, no
    checkpoint beyond it). The other oracles then judge it as outside the store's promise, and
    ``check_damage_table`` checks the loss starts no earlier than the damage."""
    if not any(c.point.kind == "storage" for c in result.trace.crashes):
        return False
    return any(
        outcome.response is not Response.REFUSE and outcome.kept is not Kept.ALL
        for _, _, outcome in promised(result)
    )


def check_damage_table(result: RunResult) -> list[Violation]:
    """I23: the response the table promises for the fault's record in the run's mode."""
    out: list[Violation] = []
    refusal = result.storage.refusal
    fault = _only_fault(result)
    if fault is not None and _power_lost_after(result, fault):
        return []  # the disk a later process found is no longer the one the record describes
    for path, row, outcome in promised(result):
        assert fault is not None
        witness = (f"{path}: {fault.fs_outcome[path]} ({row.kind})", f"table: {outcome.doc}")
        if outcome.response is Response.REFUSE:
            if refusal is not None and outcome.says not in refusal:
                out.append(
                    Violation(
                        "I23",
                        "the store refused the damage, but not for the reason the table gives",
                        witness,
                        expected=f"CorruptStore saying {outcome.says!r}",
                        actual=refusal[:120],
                    )
                )
            elif refusal is None and _opened_after(result, fault, path):
                out.append(
                    Violation(
                        "I23",
                        "the store went on past damage its damage table says it refuses",
                        witness,
                        expected="CorruptStore before anything is written",
                        actual="the conversation was opened and recovered",
                    )
                )
        elif refusal is not None:
            out.append(
                Violation(
                    "I23",
                    "the store refused damage its damage table says it recovers from",
                    witness,
                    expected=str(outcome.response),
                    actual=refusal[:120],
                )
            )
        elif outcome.kept is Kept.BEFORE_DAMAGE:
            out += _lost_before_damage(result, fault, row, witness)
    return out


def _power_lost_after(result: RunResult, fault: CrashRecord) -> bool:
    """Whether a power loss followed the storage fault: it drops what the page cache held
    then (with ``fsync=False``, perhaps the whole damaged log), so the record made at the fault
    no longer says what a recovery finds; the refusal is still judged by I13, any loss by the
    other families."""
    return any(
        c.point.kind == "power" and c.point.index > fault.point.index for c in result.trace.crashes
    )


def _conversation(path: str) -> str:
    return path.rsplit("/", 2)[-2]


def _opened_after(result: RunResult, fault: CrashRecord, path: str) -> bool:
    """Whether a process took the damaged conversation's lease after the fault (the machine
    records the grants of the scenario's own conversation only)."""
    conversation = _conversation(path)
    return any(
        g.granted.conversation_id == conversation and g.boundary > fault.point.index
        for g in result.leases.grants
    )


def _lost_before_damage(
    result: RunResult, fault: CrashRecord, row: TableRow, witness: tuple[str, ...]
) -> list[Violation]:
    """A recovery that may lose the damaged commit and what follows it must keep every
    acknowledged commit before it (the scenario's own conversation)."""
    if _conversation(next(iter(fault.fs_outcome))) != result.scenario.conversation_id:
        return []
    final = {r.checksum for r in result.durable.records}
    accepted = {a.boundary for a in result.leases.accepted}
    for index, records in result.durable.commits:
        if index >= fault.point.index or index not in accepted or not records:
            continue
        if records[-1].sequence < row.first_lost and records[0].checksum not in final:
            return [
                Violation(
                    "I23",
                    "a recovery after damage lost an acknowledged commit from before the damage",
                    (*witness, f"lost: commit at boundary {index} (#{records[0].sequence})"),
                    expected=f"every acknowledged commit before #{row.first_lost} kept",
                    actual=f"#{records[0].sequence} lost",
                )
            ]
    return []
