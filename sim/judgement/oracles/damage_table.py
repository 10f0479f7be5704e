"""I23, the damage table kept: under a storage fault, the store answers as the damage table
(``durable.store.damage``, the registry docs/stores.md and tests/durable/test_damage_table.py
read) says its mode answers that damage -- it refuses what the table refuses, goes on where the
table goes on, and a recovery that goes on keeps what the table says it keeps, and never cuts or
removes what the table (or a checkpoint) proves was acknowledged without a quarantine copy.

Each injected fault carries its record (``sim.world.storage_faults.table_row``, read when the
fault is made: the damaged file's role and where the fault struck; on SQLite,
``aimed_sqlite_fault``: what the fault did to the store's rows, read back through SQLite).
"Refused" and "recovered correctly" both pass every other oracle, so without this one a store
that skips an unparseable checkpoint under ``fsync=True`` and recovers from the log would pass
every storage-fault schedule. What it leaves to others: whether a refusal names the damage and
leaves the evidence as found (I13); whether what a recovery kept is what the log then holds (I2,
I12 and the rest).

Only a schedule with one storage fault and no power loss after it is judged for the response (a
second fault, or a power loss dropping what the page cache held, changes what the first's record
promises); a refusal the table demands is judged only when a process opened the damaged
conversation after the fault (a lease granted to it: the scenario's own conversation, whose
grants the machine records). A fault the mapping cannot place is ``UnmappedFault``: a harness
error, never a pass.

The repairs (``_repairs_kept``) are judged after every crash that left such a record -- a
storage fault's, or a power loss's that left a log whose tail a checkpoint or a later commit
proves acknowledged (``sim.world.storage_faults.power_rows``): where the table's repair is a
quarantine, the first cut of the log after the crash must come after a copy of the tail from
the damage on, renamed into place under a quarantine name and its directory synced; where it
sets checkpoints aside, those that prove the loss (and a damaged checkpoint) are renamed aside,
never unlinked. Read off the boundaries the recovery crossed (``fs.rename``, ``fs.fsync_dir``,
``fs.truncate``, ``fs.unlink``: their labels name the files), so no repair goes unseen.
"""

from __future__ import annotations

import re

from durable.store.damage import PASS, Kept, Mode, Outcome, Repair, Response, by_kind
from sim.judgement.violation import Violation
from sim.run.runner import RunResult
from sim.world.evidence import CrashRecord
from sim.world.storage_faults import INVISIBLE, TORN_WAL, UNREAD, Role, TableRow, role_of
from sim.world.stores import StoreKind

#: The harness's record of ``TORN_WAL`` (damage to the last transaction of SQLite's write-ahead
#: log): SQLite's recovery ends the log before the first frame that fails its checksum, exactly
#: as at a torn write, so the store goes on without that transaction -- what the table answers
#: for the file store's damaged last commit ("the one undetectable case"), and what it says no
#: more than that of, for SQLite, which it has no record of yet (docs/stores.md).
TORN_WAL_OUTCOME = Outcome(
    Response.REPAIR,
    "dropped as a torn write: SQLite's recovery stops at the first frame that fails its "
    "checksum, and a single copy cannot tell damage to its last transaction from a torn one",
    repairs=(Repair.TRUNCATE,),
    kept=Kept.BEFORE_DAMAGE,
    after=PASS,
)

_QUARANTINED_TAIL = re.compile(r"^quarantine-\d{4,}\.events-from-byte-(\d+)\.jsonl$")


class UnmappedFault(AssertionError):
    """A storage fault no record of the damage table describes: the harness made a fault it
    cannot judge (extend ``sim.world.storage_faults.table_row``, or the table)."""


def _mode(result: RunResult) -> Mode:
    store = StoreKind(result.store)
    if store is StoreKind.SQLITE:
        return Mode.SQLITE  # FULL and NORMAL read damage alike (the table's one column)
    if store is not StoreKind.FILE:
        raise UnmappedFault(f"storage faults on the {result.store} store have no table mode")
    return Mode.FILE_FSYNC if result.scenario.fsync else Mode.FILE_NOFSYNC


def _outcome(row: TableRow, mode: Mode) -> Outcome | None:
    """What the table (or, for ``TORN_WAL``, the harness's record) promises for ``row``."""
    if row.kind == TORN_WAL:
        return TORN_WAL_OUTCOME if mode is Mode.SQLITE else None
    return by_kind(row.kind).outcome(mode)


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
        outcome = _outcome(row, mode)
        if outcome is None or outcome.response is Response.CANNOT_ARISE:
            raise UnmappedFault(f"{path}: {what} is {row.kind}, which {mode} cannot suffer")
        out.append((path, row, outcome))
    return out


def table_allows_loss(result: RunResult) -> bool:
    """Whether the damage table lets this run's recovery lose acknowledged commits: a single
    storage fault the store cannot tell from a shorter log (a damaged last commit, no
    checkpoint beyond it; SQLite's log's last transaction damaged). The other oracles then
    judge it as outside the store's promise, and ``check_damage_table`` checks the loss starts
    no earlier than the damage."""
    if not any(c.point.kind == "storage" for c in result.trace.crashes):
        return False
    return any(
        outcome.response is not Response.REFUSE and outcome.kept is not Kept.ALL
        for _, _, outcome in promised(result)
    )


def check_damage_table(result: RunResult) -> list[Violation]:
    """I23: the response the table promises for the fault's record in the run's mode, and the
    repairs it promises after every crash that left a record."""
    out = _repairs_kept(result)
    fault = _only_fault(result)
    if fault is not None and _power_lost_after(result, fault):
        return out  # the disk a later process found is no longer the one the record describes
    for path, row, outcome in promised(result):
        assert fault is not None
        witness = (f"{path}: {fault.fs_outcome[path]} ({row.kind})", f"table: {outcome.doc}")
        out += _response_kept(result, fault, path, row, outcome, witness)
    return out


def _response_kept(
    result: RunResult,
    fault: CrashRecord,
    path: str,
    row: TableRow,
    outcome: Outcome,
    witness: tuple[str, ...],
) -> list[Violation]:
    """The store refused what the table refuses, for its reason, and went on where it goes on,
    keeping what it keeps."""
    refusal = result.storage.refusal
    if outcome.response is Response.REFUSE:
        if refusal is not None and outcome.says not in refusal:
            return [
                Violation(
                    "I23",
                    "the store refused the damage, but not for the reason the table gives",
                    witness,
                    expected=f"CorruptStore saying {outcome.says!r}",
                    actual=refusal[:120],
                )
            ]
        if refusal is None and _opened_after(result, fault, _conversation(path, row)):
            return [
                Violation(
                    "I23",
                    "the store went on past damage its damage table says it refuses",
                    witness,
                    expected="CorruptStore before anything is written",
                    actual="the conversation was opened and recovered",
                )
            ]
        return []
    if refusal is not None:
        return [
            Violation(
                "I23",
                "the store refused damage its damage table says it recovers from",
                witness,
                expected=str(outcome.response),
                actual=refusal[:120],
            )
        ]
    if outcome.kept is Kept.BEFORE_DAMAGE:
        return _lost_before_damage(result, fault, path, row, witness)
    return []


def _power_lost_after(result: RunResult, fault: CrashRecord) -> bool:
    """Whether a power loss followed the storage fault: it drops what the page cache held
    then (with ``fsync=False``, perhaps the whole damaged log), so the record made at the fault
    no longer says what a recovery finds; the refusal is still judged by I13, any loss by the
    other families."""
    return any(
        c.point.kind == "power" and c.point.index > fault.point.index for c in result.trace.crashes
    )


def _conversation(path: str, row: TableRow) -> str:
    """The conversation a record is about: its own (SQLite's one database holds them all), or
    the file store's directory it is in."""
    return row.conversation or path.rsplit("/", 2)[-2]


def _opened_after(result: RunResult, fault: CrashRecord, conversation: str) -> bool:
    """Whether a process took ``conversation``'s lease after the fault (the machine records the
    grants of the scenario's own conversation only)."""
    return any(
        g.granted.conversation_id == conversation and g.boundary > fault.point.index
        for g in result.leases.grants
    )


def _lost_before_damage(
    result: RunResult, fault: CrashRecord, path: str, row: TableRow, witness: tuple[str, ...]
) -> list[Violation]:
    """A recovery that may lose the damaged commit and what follows it must keep every
    acknowledged commit before it (the scenario's own conversation)."""
    if _conversation(path, row) != result.scenario.conversation_id:
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


def _repairs_kept(result: RunResult) -> list[Violation]:
    """After each crash whose record says a log's tail held acknowledged commits, or which
    checkpoints prove them: the recovery that cuts the tail copies it first, and none of those
    checkpoints is deleted (see the module docstring). Judged until the next crash that damages
    (a power loss or storage fault makes its own records)."""
    records = [c for c in result.trace.crashes if c.damage_rows]
    if not records:
        return []
    mode = _mode(result)
    out: list[Violation] = []
    for crash in records:
        labels = _recovery_labels(result, crash)
        for path, row in sorted(crash.damage_rows.items()):
            outcome = (
                None if row is None or row.kind in (UNREAD, INVISIBLE) else _outcome(row, mode)
            )
            if row is None or outcome is None or outcome.response is Response.REFUSE:
                continue  # a refusal writes nothing (I13); an unmapped one is promised()'s
            if Repair.QUARANTINE in outcome.repairs and role_of(path) is Role.LOG:
                out += _copied_before_cut(crash, path, row, labels)
            out += _set_aside_not_deleted(crash, path, row, labels)
    return out


def _recovery_labels(result: RunResult, crash: CrashRecord) -> list[tuple[int, str]]:
    """The boundaries crossed after ``crash`` (those its own operation had entered excluded)
    and before the next crash that damages the disk, each (index, label); a boundary a crash
    struck before its operation ran is left out (its label was recorded, the call never made)."""
    start = crash.boundaries_entered or crash.point.index + 1
    later = [
        (c.boundaries_entered or c.point.index + 1) - 1
        for c in result.trace.crashes
        if c.point.index > crash.point.index and c.point.kind in ("power", "storage")
    ]
    end = min(later, default=len(result.trace.boundaries) + start)
    never = {
        c.point.index
        for c in result.trace.crashes
        if c.point.when == "before" and c.point.kind != "pause"
    }
    return [
        (b.index, b.label)
        for b in result.trace.boundaries
        if start <= b.index <= end and b.index not in never
    ]


def _copied_before_cut(
    crash: CrashRecord, path: str, row: TableRow, labels: list[tuple[int, str]]
) -> list[Violation]:
    """The first cut of the log after ``crash`` comes after a quarantine copy of its tail from
    ``row.offset`` on (or from earlier), renamed into place and its directory synced."""
    conversation = _conversation(path, row)
    cut = next(
        (i for i, label in labels if label == f"fs.truncate:{conversation}/events.jsonl"), None
    )
    if cut is None or row.offset < 0:
        return []
    copied, synced = None, False
    for index, label in labels:
        if index >= cut:
            break
        head, _, name = label.partition(":")
        folder, _, file = name.partition("/")
        match = _QUARANTINED_TAIL.fullmatch(file) if folder == conversation else None
        if head == "fs.rename" and match and int(match.group(1)) <= row.offset:
            copied, synced = index, False
        elif head == "fs.fsync_dir" and name == f"{conversation}/" and copied is not None:
            synced = True
    if copied is not None and synced:
        return []
    return [
        Violation(
            "I23",
            "a recovery cut acknowledged commits off the log without a quarantine copy of them",
            (
                f"{path}: {crash.fs_outcome.get(path, 'after the crash')} ({row.kind})",
                f"after {crash.point.text()}: cut at boundary {cut}",
                *(f"proof: {name}" for name in row.beyond),
            ),
            expected=f"the log from byte {row.offset} on copied to a quarantine file, renamed "
            "into place and its directory synced, before the cut",
            actual="a copy not made durable" if copied is not None else "no copy",
        )
    ]


def _set_aside_not_deleted(
    crash: CrashRecord, path: str, row: TableRow, labels: list[tuple[int, str]]
) -> list[Violation]:
    """A checkpoint that proves acknowledged commits (``row.beyond``: beyond the damage, or the
    damaged checkpoint itself) is never unlinked after ``crash`` unless renamed aside first."""
    conversation = _conversation(path, row)
    aside: set[str] = set()
    for index, label in labels:
        head, _, name = label.partition(":")
        folder, _, file = name.partition("/")
        if folder != conversation:
            continue
        if head == "fs.rename" and file.startswith("quarantine-"):
            aside.add(file.split(".", 1)[1])
        elif head == "fs.unlink" and file in row.beyond and file not in aside:
            return [
                Violation(
                    "I23",
                    "a recovery deleted a checkpoint that proves acknowledged commits, instead "
                    "of setting it aside",
                    (
                        f"{path}: {crash.fs_outcome.get(path, 'after the crash')} ({row.kind})",
                        f"after {crash.point.text()}: {label} at boundary {index}",
                    ),
                    expected=f"{file} renamed to a quarantine name",
                    actual=f"{file} deleted",
                )
            ]
    return []
