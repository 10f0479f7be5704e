"""Crash schedules and the fault injector.

Every port call of a simulated process passes a labelled boundary *before* and *after* it. The
boundaries of one world run are numbered 0, 1, 2, ... in the order they are reached (across all
processes and restarts). A crash schedule is a list of ``(index, before|after, process|power)``;
its text form, printed by every failure and accepted by ``replay``, is
``14:after:power,3:before:process``.

Crash kinds (docs/crash-model.md): ``process`` (kill -9), ``power`` (power loss: what was not
synced may be lost or torn), ``storage`` (kill -9, then the disk damages data that *was*
synced: a flipped bit, a zeroed or misdirected block, a truncated or deleted file) and ``pause``
(no death: the process stops just before a store operation until a standby has taken its lease
over, then goes on as a zombie; ``14:before:pause``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NoReturn

from sim.errors import ScheduleError as ScheduleError  # re-exported: next to the schedules


class When(StrEnum):
    """Which side of a boundary a crash is at: ``before`` the port call or ``after`` it. A
    ``StrEnum``, so a member is also its text (``"after"``): schedules, results and repro lines
    read as they always have, and a caller may pass either."""

    BEFORE = "before"
    AFTER = "after"

    @classmethod
    def _missing_(cls, value: object) -> NoReturn:
        # Enum raises what ``_missing_`` raises: the package's error, naming the bad value.
        raise ScheduleError(f"unknown side of a boundary {value!r} (before or after)")


class CrashKind(StrEnum):
    """A crash kind (docs/crash-model.md): ``process`` (kill -9), ``power`` (power loss),
    ``storage`` (kill -9, then damage to synced data) or ``pause`` (the process frozen before a
    store operation past its lease, a standby's takeover, then the zombie goes on). Which kinds
    a store can take is ``sim.world.stores.StoreKind.can_inject``'s to say, nobody else's; a
    pause also needs a scenario with a standby (``Scenario.standby_at_s``)."""

    PROCESS = "process"
    POWER = "power"
    STORAGE = "storage"
    PAUSE = "pause"

    @classmethod
    def _missing_(cls, value: object) -> NoReturn:
        kinds = ", ".join(kind.value for kind in cls)
        raise ScheduleError(f"unknown crash kind {value!r} (kinds: {kinds})")


CRASH_KINDS: tuple[CrashKind, ...] = tuple(CrashKind)
MAX_SCHEDULE_DEPTH = 8
#: The largest boundary index and tear a crash point may have: what its text form can write.
MAX_INDEX = 9_999_999
MAX_TEAR = 999

_POINT = re.compile(
    rf"^(\d{{1,{len(str(MAX_INDEX))}}}):({'|'.join(When)}):({'|'.join(CrashKind)})"
    rf"(?:~([1-9]\d{{0,{len(str(MAX_TEAR)) - 1}}}))?$"
)
# At most this many enumerated tears per file and power-crash point (see SimFS.tear_points).
MAX_TEARS_PER_FILE = 8
# The boundary kinds after which a storage fault is tried: the store's acknowledged operations
# (their data is synced by then). Every other point would damage the same synced bytes again.
STORAGE_FAULT_BOUNDARY_KINDS = ("commit", "checkpoint", "lease")
# The boundaries before which a pause is tried: a store operation that writes the log or a
# checkpoint, and the transaction inside one (SQLite's, Postgres's: a store may fence in one
# and write in the next). Each is awaited by its caller, so the process can stop there while
# the others run; a file-system call inside ``FileStore`` is synchronous, and its nearest such
# point is the operation's own ``store.*`` boundary. Not the lease calls: each carries the
# caller's clock reading (``now_s``), and a pause between the reading and the call would be a
# clock that stood still, not a stopped process.
PAUSE_LABEL_HEADS = (
    "store.commit",
    "store.checkpoint",
    "sqlite.commit",
    "sqlite.checkpoint",
    "postgres.commit",
    "postgres.checkpoint",
)


def _count(value: object, name: str, top: int) -> int:
    """``value`` if it is an integer in 0..``top`` (a bool is not), else ``ScheduleError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ScheduleError(f"a crash point's {name} must be an integer in 0..{top}, not {value!r}")
    return value


@dataclass(frozen=True, order=True)
class CrashPoint:
    """A crash at a boundary. ``tear`` (power only): 0 lets the point's RNG stream settle every
    pending file; ``k`` >= 1 cuts the log's pending extension at the k-th enumerated tear point
    of that moment (``SimFS.tear_points``: the durable end, record ends, inside the last record),
    written ``14:after:power~3``. Interesting tears are enumerated, not left to one draw."""

    index: int
    when: When
    kind: CrashKind
    tear: int = 0

    def __post_init__(self) -> None:
        # Eagerly, where the point is made: a point that cannot exist is refused naming the bad
        # value, not found deep inside a run (or, for an unknown kind, never). ``when`` and
        # ``kind`` given as text are kept as members (equal to the text, so nothing else sees it).
        _count(self.index, "index", MAX_INDEX)
        object.__setattr__(self, "when", When(self.when))
        object.__setattr__(self, "kind", CrashKind(self.kind))
        _count(self.tear, "tear", MAX_TEAR)
        if self.tear and self.kind != "power":
            raise ScheduleError(f"only a power crash can tear a file, not a {self.kind} crash")
        if self.kind == "pause" and self.when != "before":
            # Once an operation has returned, the process's next stop is before its next one.
            raise ScheduleError("a pause is taken before a store operation, not after it")

    def text(self) -> str:
        tear = f"~{self.tear}" if self.tear else ""
        return f"{self.index}:{self.when}:{self.kind}{tear}"

    @property
    def column(self) -> str:
        """The crash kind as a report's matrix groups it: every enumerated tear is ``tear``."""
        return "tear" if self.tear else self.kind


@dataclass(frozen=True)
class Schedule:
    points: tuple[CrashPoint, ...] = ()

    def __post_init__(self) -> None:
        strays = [p for p in self.points if not isinstance(p, CrashPoint)]
        if strays:
            raise ScheduleError(f"a schedule holds crash points, not {strays[0]!r}")
        if len(self.points) > MAX_SCHEDULE_DEPTH:
            raise ScheduleError(f"a schedule has at most {MAX_SCHEDULE_DEPTH} crash points")
        indexes = [p.index for p in self.points]
        if indexes != sorted(indexes) or len(set(indexes)) != len(indexes):
            raise ScheduleError("crash points must have distinct, increasing boundary indexes")

    @classmethod
    def of(cls, *points: CrashPoint) -> Schedule:
        return cls(tuple(sorted(points)))

    def text(self) -> str:
        return ",".join(p.text() for p in self.points) or "none"

    def at(self, index: int, when: When) -> CrashPoint | None:
        for point in self.points:
            if point.index == index and point.when == when:
                return point
        return None

    @property
    def last_index(self) -> int:
        return self.points[-1].index if self.points else -1


def parse_schedule(text: str) -> Schedule:
    """Parse ``14:after:power,3:before:process`` (or ``none``); raise ``ScheduleError``."""
    text = text.strip()
    if text in ("", "none"):
        return Schedule()
    points: list[CrashPoint] = []
    for part in text.split(","):
        match = _POINT.match(part.strip())
        if match is None:
            raise ScheduleError(
                f"malformed crash point {part.strip()!r}: "
                f"expected INDEX:{'|'.join(When)}:{'|'.join(CrashKind)} (power may add ~TEAR)"
            )
        index, when, kind, tear = match.groups()
        points.append(CrashPoint(int(index), When(when), CrashKind(kind), int(tear or 0)))
    indexes = [p.index for p in points]
    if len(set(indexes)) != len(indexes):
        raise ScheduleError("two crash points at the same boundary index")
    return Schedule.of(*points)


def tries_kind(kind: CrashKind, when: When, label: str) -> bool:
    """Whether a sweep tries ``kind`` at this point: process and power everywhere; a storage
    fault (a kill, then damage to synced data) only after an acknowledged store operation; a
    pause only before a store operation or a blocking call inside one (``PAUSE_LABEL_HEADS``)."""
    if kind == "pause":
        return when == "before" and label.split(":", 1)[0].split("#", 1)[0] in PAUSE_LABEL_HEADS
    if kind != "storage":
        return True
    return when == "after" and boundary_kind(label) in STORAGE_FAULT_BOUNDARY_KINDS


def crash_points(index: int, when: When, kind: CrashKind, n_tears: int) -> list[CrashPoint]:
    """The crash points a sweep runs for one (boundary, when, kind): a power crash's seeded
    draw, then, after an operation, each of its ``n_tears`` enumerated tears
    (``14:after:power~1`` ...)."""
    out = [CrashPoint(index, when, kind)]
    # Tears only right after an operation: the file state before the next one is the same
    # (every file operation is a boundary), so "before" would repeat them.
    if kind == "power" and when == "after":
        out += [CrashPoint(index, when, kind, tear) for tear in range(1, n_tears + 1)]
    return out


def sweep_points(
    index: int, when: When, label: str, kinds: Iterable[CrashKind], n_tears: int
) -> list[CrashPoint]:
    """Every crash point a depth-1 sweep runs at one side of one boundary, in the sweep's order:
    kind by kind, each kind's points as ``crash_points`` lists them."""
    return [
        point
        for kind in kinds
        if tries_kind(kind, when, label)
        for point in crash_points(index, when, kind, n_tears)
    ]


@dataclass(frozen=True)
class Boundary:
    index: int
    label: str
    process: str
    time_s: float

    @property
    def kind(self) -> str:
        """The boundary's kind for reports: commit, fs.write, fs.fsync, tool, model, lease, ..."""
        return boundary_kind(self.label)


def boundary_kind(label: str) -> str:
    head = label.split(":", 1)[0].split("#", 1)[0]
    if head in ("store.commit", "sqlite.commit"):
        return "commit"
    if head.startswith("store.lease") or head == "sqlite.lease":
        return "lease"
    if head.startswith("store.checkpoint") or head == "sqlite.checkpoint":
        return "checkpoint"
    if head == "fs.fsync_dir":
        return "fs.dir-fsync"
    if head in ("fs.write", "fs.append", "fs.truncate"):
        return "fs.write"
    if head.startswith("tool."):
        return "tool"
    if head.startswith("model."):
        return "model"
    return head
