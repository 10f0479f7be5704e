"""The damage table: what each store mode does with each kind of damaged storage.

One record per kind of damage (``DAMAGE``), with, per store mode, the promised **response**
(``Response``: refuse, repair -- and how, ``Repair`` -- proceed, or cannot arise), what the
refusal says or what recovery keeps, and what ``python -m durable inspect`` says before recovery
and after it. The table of docs/stores.md ("What each store mode does with damaged storage") is
rendered from it (``markdown_table``); tests/durable/test_damage_table.py checks that the page holds
exactly that rendering and runs every record on real stores, each mode twice in a row. The
records are data a program can check -- a sweep under storage faults can read a schedule's
outcome against them -- so a promise lives here once, not in prose and tests separately.

The rule every record follows: recover everything acknowledged, or stop with ``CorruptStore``
naming the damage *before writing anything* (so every retry refuses the same way and the
evidence stays as found), and never destroy what cannot be explained -- where a mode goes on past
damage it moves the damaged part aside (a quarantine file, ``durable.store.file``); only a torn
tail, a crash's leftover that was never acknowledged, is cut without a copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Mode(StrEnum):
    """A store mode of the table. SQLite's ``synchronous=FULL`` and ``NORMAL`` read damage the
    same way (the setting is about syncs, not about what a read accepts): one mode here."""

    FILE_FSYNC = "file-fsync"
    FILE_NOFSYNC = "file-nofsync"
    SQLITE = "sqlite"
    POSTGRES = "postgres"


#: The table's column heading of each mode.
MODE_TITLES: Mapping[Mode, str] = {
    Mode.FILE_FSYNC: "`FileStore(fsync=True)`",
    Mode.FILE_NOFSYNC: "`FileStore(fsync=False)`",
    Mode.SQLITE: "`SQLiteStore` (FULL and NORMAL alike)",
    Mode.POSTGRES: "`PostgresStore`",
}


class Response(StrEnum):
    """What opening a damaged conversation (taking its lease, recovering it) does."""

    #: ``CorruptStore`` naming the damage, and nothing on disk changed (the lease included).
    REFUSE = "refuse"
    #: Recovery changes the store and goes on (how: ``Repair``).
    REPAIR = "repair"
    #: Recovery goes on and changes nothing the damage touched.
    PROCEED = "proceed"
    #: The mode makes this damage impossible (a database commits a transaction whole).
    CANNOT_ARISE = "cannot arise"


class Repair(StrEnum):
    """How a repair changes the store."""

    #: The torn tail -- a crash's leftover, never acknowledged -- is cut.
    TRUNCATE = "truncate"
    #: What follows the committed prefix is copied to a quarantine file, then cut.
    QUARANTINE = "quarantine"
    #: Checkpoints recovery cannot use are moved aside under a quarantine name.
    SET_ASIDE = "set aside"


class Kept(StrEnum):
    """What a recovery that goes on keeps of the acknowledged history."""

    ALL = "all"
    #: The commits before the first damaged (or missing) one.
    BEFORE_DAMAGE = "before the damage"
    NOTHING = "nothing"


@dataclass(frozen=True)
class Said:
    """What ``inspect`` prints: its exit status and a phrase of its report."""

    exit: int
    says: str

    def text(self) -> str:
        return f"`{self.says}`, exit {self.exit}"


@dataclass(frozen=True)
class Outcome:
    """One mode's promise for one kind of damage. ``doc`` is the table's cell; ``says`` a
    phrase of the refusal's message (``REFUSE``); ``repairs`` how it repairs (``REPAIR``);
    ``kept`` what recovery keeps and ``after`` what ``inspect`` says once it has (``REPAIR``,
    ``PROCEED``)."""

    response: Response
    doc: str
    says: str = ""
    repairs: tuple[Repair, ...] = ()
    kept: Kept | None = None
    after: Said | None = None

    def __post_init__(self) -> None:
        refuses = self.response is Response.REFUSE
        goes_on = self.response in (Response.REPAIR, Response.PROCEED)
        assert bool(self.says) == refuses, self
        assert bool(self.repairs) == (self.response is Response.REPAIR), self
        assert (self.kept is not None) == goes_on and (self.after is not None) == goes_on, self


@dataclass(frozen=True)
class Damage:
    """One kind of damage: ``kind`` (an id), ``title`` (the table's row), each mode's
    ``outcomes`` (a mode left out: the damage is about something the mode does not have, "n/a"),
    and what ``inspect`` says before recovery, per kind of store (``"file"``, ``"sqlite"``)."""

    kind: str
    title: str
    outcomes: Mapping[Mode, Outcome]
    inspect: Mapping[str, Said] = field(default_factory=dict)

    def outcome(self, mode: Mode) -> Outcome | None:
        return self.outcomes.get(mode)


def _refuse(says: str, doc: str) -> Outcome:
    return Outcome(Response.REFUSE, doc, says=says)


def _cannot(doc: str = "cannot arise (a transaction commits whole)") -> Outcome:
    return Outcome(Response.CANNOT_ARISE, doc)


PASS = Said(0, "all checks pass")
CORRUPT = Said(1, "corrupt store")
BEYOND = Said(1, "beyond the log")
QUARANTINED = Said(1, "quarantined: ")
LOST = "proves commits through"
LATER = "holds a valid later record"
ALL_KEPT = Outcome(
    Response.PROCEED,
    "recovers from the older checkpoint or the log",
    kept=Kept.ALL,
    after=PASS,
)


def _both(said: Said) -> dict[str, Said]:
    return {"file": said, "sqlite": said}


def _file_only(
    kind: str, title: str, fsync: Outcome, nofsync: Outcome, said: Said, why: str
) -> Damage:
    """A kind of damage to a file of the file store that a database's rows cannot suffer."""
    return Damage(
        kind,
        title,
        {
            Mode.FILE_FSYNC: fsync,
            Mode.FILE_NOFSYNC: nofsync,
            Mode.SQLITE: _cannot(why),
            Mode.POSTGRES: _cannot(why),
        },
        {"file": said},
    )


_LOG_DAMAGE: tuple[Damage, ...] = (
    Damage(
        "torn-tail",
        "torn tail (an incomplete last line or batch)",
        {
            Mode.FILE_FSYNC: Outcome(
                Response.REPAIR,
                "truncated (it was never acknowledged)",
                repairs=(Repair.TRUNCATE,),
                kept=Kept.ALL,
                after=PASS,
            ),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "truncated",
                repairs=(Repair.TRUNCATE,),
                kept=Kept.ALL,
                after=PASS,
            ),
            Mode.SQLITE: _cannot(),
            Mode.POSTGRES: _cannot(),
        },
        {"file": Said(0, "torn tail ignored")},
    ),
    Damage(
        "damaged-last-commit",
        "damaged last commit, no checkpoint beyond it",
        {
            Mode.FILE_FSYNC: Outcome(
                Response.REPAIR,
                "**truncated as a torn tail**: a single copy cannot tell damage to its last "
                "write from a torn write (the one undetectable case)",
                repairs=(Repair.TRUNCATE,),
                kept=Kept.BEFORE_DAMAGE,
                after=PASS,
            ),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "truncated, as with fsync",
                repairs=(Repair.TRUNCATE,),
                kept=Kept.BEFORE_DAMAGE,
                after=PASS,
            ),
            Mode.SQLITE: _refuse("events row (", "`CorruptStore` naming the row"),
            Mode.POSTGRES: _refuse("events row (", "`CorruptStore` naming the row"),
        },
        {"file": Said(0, "torn tail ignored"), "sqlite": CORRUPT},
    ),
    Damage(
        "damaged-last-commit-under-checkpoint",
        "damaged last commit, a checkpoint beyond it",
        {
            Mode.FILE_FSYNC: _refuse(LOST, "`CorruptStore` naming the lost sequences"),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "**moved to a quarantine file**, then cut (the mode may lose a suffix, but the "
                "checkpoint proves it was acknowledged: damage, not a torn write); the "
                "checkpoint set aside",
                repairs=(Repair.QUARANTINE, Repair.SET_ASIDE),
                kept=Kept.BEFORE_DAMAGE,
                after=QUARANTINED,
            ),
            Mode.SQLITE: Outcome(
                Response.PROCEED,
                "recovers from the checkpoint if the damage lies under the row it ends at (those "
                "rows are not read; the damaged row stays); damage to that row itself is "
                "`CorruptStore`, as for a damaged commit the newest checkpoint ends at",
                kept=Kept.ALL,
                after=CORRUPT,
            ),
            Mode.POSTGRES: Outcome(
                Response.PROCEED,
                "as SQLite",
                kept=Kept.ALL,
                after=CORRUPT,
            ),
        },
        {"file": BEYOND, "sqlite": CORRUPT},
    ),
    Damage(
        "log-cut-under-checkpoint",
        "log cut at a commit boundary, a checkpoint beyond it",
        {
            Mode.FILE_FSYNC: _refuse(LOST, "`CorruptStore` naming the lost sequences"),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "the checkpoint set aside",
                repairs=(Repair.SET_ASIDE,),
                kept=Kept.BEFORE_DAMAGE,
                after=QUARANTINED,
            ),
            Mode.SQLITE: _refuse(LOST, "`CorruptStore` naming the lost sequences"),
            Mode.POSTGRES: _refuse(LOST, "`CorruptStore` naming the lost sequences"),
        },
        _both(BEYOND),
    ),
    Damage(
        "damaged-earlier-commit",
        "damaged earlier commit (valid commits after it)",
        {
            Mode.FILE_FSYNC: _refuse(LATER, "`CorruptStore` naming the line"),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "everything from the damaged commit on **moved to a quarantine file**, then cut "
                "(a power loss without fsync may take a suffix); checkpoints beyond set aside",
                repairs=(Repair.QUARANTINE, Repair.SET_ASIDE),
                kept=Kept.BEFORE_DAMAGE,
                after=QUARANTINED,
            ),
            Mode.SQLITE: Outcome(
                Response.PROCEED,
                "recovers from a checkpoint that ends after it (the row stays); else "
                "`CorruptStore`, a checkpoint that ends *at* the damaged row included (next row)",
                kept=Kept.ALL,
                after=CORRUPT,
            ),
            Mode.POSTGRES: Outcome(
                Response.PROCEED,
                "as SQLite",
                kept=Kept.ALL,
                after=CORRUPT,
            ),
        },
        _both(CORRUPT),
    ),
    Damage(
        "damaged-checkpoint-commit",
        "damaged commit the newest checkpoint ends at (SQLite: its row; valid commits after it)",
        {
            Mode.FILE_FSYNC: _refuse(LATER, "`CorruptStore` naming the line"),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "as a damaged earlier commit: quarantined, then cut; the checkpoint set aside",
                repairs=(Repair.QUARANTINE, Repair.SET_ASIDE),
                kept=Kept.BEFORE_DAMAGE,
                after=QUARANTINED,
            ),
            Mode.SQLITE: _refuse(
                "events row (",
                "`CorruptStore` naming the row: recovery reads the row a checkpoint ends at to "
                "prove the log holds what the checkpoint claims (`durable.journal.recover_state`"
                "), and a damaged row proves nothing; an older checkpoint or a full replay reads "
                "it too",
            ),
            Mode.POSTGRES: _refuse("events row (", "as SQLite"),
        },
        _both(CORRUPT),
    ),
    _file_only(
        "duplicated-line",
        "a line of the log duplicated (no crash writes one)",
        _refuse(LATER, "`CorruptStore` naming the line"),
        Outcome(
            Response.REPAIR,
            "as a damaged earlier commit: quarantined, then cut",
            repairs=(Repair.QUARANTINE, Repair.SET_ASIDE),
            kept=Kept.BEFORE_DAMAGE,
            after=QUARANTINED,
        ),
        CORRUPT,
        "cannot arise (one row per sequence)",
    ),
    _file_only(
        "crlf-line-ends",
        "the log rewritten with CRLF line ends (its records intact)",
        _refuse("carriage return", "`CorruptStore`: bytes the store never writes"),
        Outcome(
            Response.REPAIR,
            "as a damaged earlier commit (from the first line): quarantined, then cut",
            repairs=(Repair.QUARANTINE, Repair.SET_ASIDE),
            kept=Kept.NOTHING,
            after=QUARANTINED,
        ),
        CORRUPT,
        "cannot arise (rows have no line ends)",
    ),
    _file_only(
        "log-is-a-directory",
        "a directory where the log should be",
        _refuse("is a directory", "`CorruptStore`"),
        _refuse("is a directory", "`CorruptStore`"),
        CORRUPT,
        "cannot arise (a table)",
    ),
    Damage(
        "log-missing",
        "log missing, checkpoints left",
        {
            Mode.FILE_FSYNC: _refuse(LOST, '`CorruptStore` ("is missing, but … proves commits")'),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "empty conversation; the checkpoints set aside",
                repairs=(Repair.SET_ASIDE,),
                kept=Kept.NOTHING,
                after=QUARANTINED,
            ),
            Mode.SQLITE: _refuse(LOST, "`CorruptStore` naming the lost sequences"),
            Mode.POSTGRES: _refuse(LOST, "`CorruptStore` naming the lost sequences"),
        },
        _both(BEYOND),
    ),
    Damage(
        "log-and-checkpoints-missing",
        "log and checkpoints missing (SQLite: the database file gone)",
        {
            Mode.FILE_FSYNC: Outcome(
                Response.PROCEED,
                "empty conversation: nothing is left to tell (a lease without commits is a "
                "legitimate state)",
                kept=Kept.NOTHING,
                after=PASS,
            ),
            Mode.FILE_NOFSYNC: Outcome(Response.PROCEED, "same", kept=Kept.NOTHING, after=PASS),
            Mode.SQLITE: Outcome(
                Response.PROCEED, "a new, empty store", kept=Kept.NOTHING, after=PASS
            ),
        },
        {"file": PASS, "sqlite": Said(2, "no such file")},
    ),
)

_CHECKPOINT_DAMAGE: tuple[Damage, ...] = (
    Damage(
        "newest-checkpoint-missing",
        "newest checkpoint missing",
        {mode: ALL_KEPT for mode in Mode},
        _both(PASS),
    ),
    Damage(
        "checkpoint-fails-checksum",
        "checkpoint fails its checksum",
        {
            mode: Outcome(
                Response.PROCEED,
                "skipped: recovers from the older one or the log; it stays, and a later save "
                "sets it aside instead of rotating it out"
                if mode in (Mode.FILE_FSYNC, Mode.FILE_NOFSYNC)
                else "skipped: recovers from the older one or the log",
                kept=Kept.ALL,
                after=Said(1, "checksum does not verify"),
            )
            for mode in Mode
        },
        _both(Said(1, "checksum does not verify")),
    ),
    Damage(
        "checkpoint-unparseable",
        "checkpoint does not parse",
        {
            Mode.FILE_FSYNC: _refuse(
                "does not parse", "`CorruptStore` (the atomic write never leaves one)"
            ),
            Mode.FILE_NOFSYNC: Outcome(
                Response.PROCEED,
                "skipped (a power loss may leave one torn); a later save sets it aside",
                kept=Kept.ALL,
                after=CORRUPT,
            ),
            Mode.SQLITE: _refuse("does not parse", "`CorruptStore` naming the row"),
            Mode.POSTGRES: _refuse("does not parse", "`CorruptStore` naming the row"),
        },
        _both(CORRUPT),
    ),
    Damage(
        "checkpoint-misnamed",
        "checkpoint under another sequence's name (SQLite: key) than it holds",
        {
            Mode.FILE_FSYNC: _refuse(
                "its name is damaged", "`CorruptStore` (the atomic write names it after itself)"
            ),
            Mode.FILE_NOFSYNC: Outcome(
                Response.REPAIR,
                "skipped, and set aside by recovery (a name higher or lower than what it holds)",
                repairs=(Repair.SET_ASIDE,),
                kept=Kept.ALL,
                after=QUARANTINED,
            ),
            Mode.SQLITE: _refuse("its key is damaged", "`CorruptStore` naming the row"),
            Mode.POSTGRES: _refuse("its key is damaged", "`CorruptStore` naming the row"),
        },
        _both(CORRUPT),
    ),
)

_LEASE_DAMAGE: tuple[Damage, ...] = (
    Damage(
        "lease-garbage",
        "garbage lease (does not parse, fails its checksum; SQLite: not a number)",
        {
            Mode.FILE_FSYNC: _refuse("lease file", "`CorruptStore`"),
            Mode.FILE_NOFSYNC: _refuse("lease file", "`CorruptStore`"),
            Mode.SQLITE: _refuse("not a lease", "`CorruptStore` (the row is not a lease)"),
            Mode.POSTGRES: _cannot("cannot arise (typed columns; see the next row)"),
        },
        _both(CORRUPT),
    ),
    Damage(
        "lease-out-of-range",
        "lease with an empty owner or an epoch below 1 (checksum intact)",
        {
            Mode.FILE_FSYNC: _refuse("holds no valid lease", "`CorruptStore`, before any write"),
            Mode.FILE_NOFSYNC: _refuse("holds no valid lease", "`CorruptStore`, before any write"),
            Mode.SQLITE: _refuse("not a lease", "`CorruptStore`, before any write"),
            Mode.POSTGRES: _refuse("not a lease", "`CorruptStore`, before any write"),
        },
        _both(CORRUPT),
    ),
    Damage(
        "lease-went-back",
        "lease went back (a valid lease with an epoch below the log's)",
        {
            mode: _refuse(
                "the lease went back",
                "`CorruptStore` before the new lease is written, so every retry refuses",
            )
            for mode in Mode
        },
        _both(Said(1, "lease epoch")),
    ),
    Damage(
        "lease-missing",
        "lease missing while the log holds commits",
        {
            mode: _refuse(
                "is missing, but", "`CorruptStore` (epoch 1 again would let fencing go back)"
            )
            for mode in Mode
        },
        _both(Said(1, "lease epoch")),
    ),
)

_SIDE_FILES: tuple[Damage, ...] = (
    Damage(
        "stray-temporary-files",
        "stray temporary files (`*.tmp`; SQLite: a garbage `-journal`)",
        {
            Mode.FILE_FSYNC: Outcome(
                Response.PROCEED,
                "ignored; the next atomic write of the same file replaces one, a checkpoint "
                "save removes the rest",
                kept=Kept.ALL,
                after=PASS,
            ),
            Mode.FILE_NOFSYNC: Outcome(Response.PROCEED, "same", kept=Kept.ALL, after=PASS),
            Mode.SQLITE: Outcome(
                Response.PROCEED,
                "SQLite takes a `-journal` whose first byte is not zero for a hot journal, finds "
                "no journal header in it, rolls nothing back and deletes it (a journal whose "
                "first byte is zero is not hot, and stays)",
                kept=Kept.ALL,
                after=PASS,
            ),
        },
        _both(PASS),
    ),
    Damage(
        "sqlite-header-damaged",
        "the database file's SQLite header damaged",
        {
            Mode.SQLITE: _refuse(
                "not a usable SQLite database", "`CorruptStore` (SQLite cannot open it)"
            ),
        },
        {"sqlite": Said(1, "the SQLite header is damaged")},
    ),
    Damage(
        "table-dropped",
        "a table of the store dropped (the events table; the others left)",
        {
            Mode.SQLITE: _refuse(
                "missing, though",
                "`CorruptStore` naming the table, before anything is written (the store creates "
                "its tables together, so one missing was dropped; created empty, it would be a "
                "write before the refusal)",
            ),
            Mode.POSTGRES: _refuse("missing, though", "as SQLite"),
        },
        {"sqlite": Said(2, "not a durable store")},
    ),
)

#: Every kind of damage, in the table's order.
DAMAGE: tuple[Damage, ...] = _LOG_DAMAGE + _CHECKPOINT_DAMAGE + _LEASE_DAMAGE + _SIDE_FILES


def by_kind(kind: str) -> Damage:
    """The record of one kind of damage (``KeyError`` if there is none)."""
    for damage in DAMAGE:
        if damage.kind == kind:
            return damage
    raise KeyError(kind)


def _cell(outcome: Outcome | None) -> str:
    if outcome is None:
        return "n/a"
    return outcome.doc.replace("|", "\\|")


def _inspect_cell(damage: Damage) -> str:
    said = damage.inspect
    if len(said) == 1 or (len(said) == 2 and said["file"] == said["sqlite"]):
        return next(iter(said.values())).text()
    return "; ".join(
        f"{'SQLite' if kind == 'sqlite' else kind}: {s.text()}" for kind, s in said.items()
    )


def markdown_table() -> str:
    """The table "What each store mode does with damaged storage" of docs/stores.md, row by row."""
    modes = list(Mode)
    lines = [
        "| damage | "
        + " | ".join(MODE_TITLES[m] for m in modes)
        + " | `inspect` (before recovery) |",
        "|---|" + "---|" * len(modes) + "---|",
    ]
    lines += [
        f"| {d.title} | "
        + " | ".join(_cell(d.outcome(m)) for m in modes)
        + f" | {_inspect_cell(d)} |"
        for d in DAMAGE
    ]
    return "\n".join(lines) + "\n"
