"""Recovery only (``target sweep --recovery-only``): each crash point starts from a snapshot of
the fault-free run's files at its instant, instead of a first process that replays the prefix
and is killed there.

Why: a real crash point runs the program's prefix in a first process until the kill, then the
recovery in a second, so a sweep replays the prefix at every point -- its cost grows with the
square of the run's length. A SIGKILL loses the process's memory and nothing it wrote, so where
the prefix is deterministic the first process's files at the kill are the fault-free run's files
at that instant. The fault-free run therefore snapshots its directory at every boundary instant
(``sim.targets.snapshots``), once, and each point runs only its recovery from its instant's
snapshot (ALICE and CrashMonkey build every crash state from one recorded trace the same way).
The snapshot is restored into the fault-free run's own directory, so a file that holds its
directory's absolute path reads as it would have.

What it needs, and how it is checked: every durable file of the run in the point's directory
(no server or database elsewhere: ``Target.no_snapshots`` says why not), and a prefix that does
the same in every run -- no thread racing the boundaries, no state kept outside the directory.
The second cannot be proved ahead, so a seeded 1 in ``CHECK_ONE_IN`` points (every point with
``full``) also runs the real way. A verdict, an invariant, the ledger or what a process did
that differs names the point and the difference (``RecoveryOnly.broken``), and the sweep runs
again the real way (``sim.targets.sweep.sweep_target``), saying why in its report.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sim.targets.host import Crash, PointRun, run_point, run_recovery
from sim.targets.judge import judge_point
from sim.targets.protocol import Target, TargetOptions
from sim.targets.zygote import Zygote
from sim.world import tempdirs

#: The soundness check's sample: one point in this many also runs the real way (at least one).
CHECK_ONE_IN = 16


class RecoveryCheck(StrEnum):
    """Which points started from a snapshot also run the real way: a seeded sample, or all."""

    SAMPLE = "sample"
    FULL = "full"


def refusal(target: Target, options: TargetOptions) -> str | None:
    """Why a sweep of these options cannot start its points from snapshots (None: it can): a
    preemption, or the target's own reason (``Target.no_snapshots``)."""
    if options.preempt_s:
        return "a preemption runs the process's own shutdown, which no copy of its files holds"
    return target.no_snapshots(options)


def checked(crashes: list[Crash], check: RecoveryCheck, *, seed: int = 0) -> set[str]:
    """The points (``Crash.text``) the check runs the real way too: every one, or a seeded 1 in
    ``CHECK_ONE_IN`` of them -- hashed, so the pick depends on the seed and the point only."""
    texts = [c.text() for c in crashes]
    if check is RecoveryCheck.FULL:
        return set(texts)
    count = max(1, -(-len(texts) // CHECK_ONE_IN)) if texts else 0
    ranked = sorted(texts, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())
    return set(ranked[:count])


@dataclass
class RecoveryOnly:
    """Runs each crash point from its snapshot, and the sampled ones the real way as well."""

    target: Target
    options: TargetOptions
    reference: PointRun
    point_dir: Path  # the fault-free run's directory: each point's recovery runs here
    copies: dict[tuple[str, str], Path]
    checked_texts: set[str]  # the points (``Crash.text``) run the real way too
    timeout_s: float
    zygote: Zygote | None
    checked_points: int = 0
    real_points: int = 0  # without a snapshot (past where the snapshots stopped): the real way
    stopped: str | None = None  # why the snapshots stopped short, if they did
    broken: str | None = None  # the first difference the check found

    def run(self, crash: Crash) -> PointRun:
        """The point from its instant's snapshot (the real way where there is none); the
        sampled ones the real way as well, compared, until a difference is found."""
        copy = self.copies.get((crash.label, str(crash.when)))
        if copy is None:
            self.real_points += 1
            return self._real(crash)
        run = run_recovery(
            self.target,
            self.options,
            crash,
            copy,
            self.point_dir,
            timeout_s=self.timeout_s,
            zygote=self.zygote,
        )
        if crash.text() in self.checked_texts and self.broken is None:
            self.checked_points += 1
            self.broken = self._differs(crash, run, self._real(crash))
        return run

    def _real(self, crash: Crash) -> PointRun:
        return run_point(
            self.target, self.options, crash, timeout_s=self.timeout_s, zygote=self.zygote
        )

    def _differs(self, crash: Crash, recovered: PointRun, real: PointRun) -> str | None:
        """What tells the point from its snapshot from the real one -- the verdict and the
        invariants it breaks, then the ledger, then what each process after the kill did --
        or None."""
        tools = self.target.tools(self.options)
        ours = judge_point(recovered, self.reference, tools)
        theirs = judge_point(real, self.reference, tools)
        where = f"point {crash.text()} ({crash.label})"
        mine = (ours.verdict, sorted(v.invariant for v in ours.violations))
        other = (theirs.verdict, sorted(v.invariant for v in theirs.violations))
        if mine != other:
            return f"{where}: {mine} from its snapshot, {other} the real way"
        ours_rows, real_rows = [r.text() for r in recovered.ledger], [r.text() for r in real.ledger]
        if ours_rows != real_rows:
            first = next(
                (i for i, (a, b) in enumerate(zip(ours_rows, real_rows, strict=False)) if a != b),
                min(len(ours_rows), len(real_rows)),
            )
            mine_row = ours_rows[first] if first < len(ours_rows) else "(none)"
            real_row = real_rows[first] if first < len(real_rows) else "(none)"
            return (
                f"{where}: ledger row {first + 1} is {mine_row!r} from its snapshot, "
                f"{real_row!r} the real way"
            )
        if recovered.actions != real.actions:
            return (
                f"{where}: the processes did {recovered.actions} from its snapshot, {real.actions}"
            )
        return None

    def summary(self) -> str:
        """The report's line on how the points ran."""
        said = (
            f"recovery only, from the fault-free run's files at each instant "
            f"({self.checked_points} checked the real way"
        )
        if self.real_points:
            said += f"; {self.real_points} run the real way: {self.stopped or 'no snapshot'}"
        return said + ")"


@contextlib.contextmanager
def snapshot_dirs() -> Iterator[tuple[Path, Path]]:
    """The fault-free run's directory and where its snapshots go, both removed at the end."""
    point_dir = Path(tempdirs.make("faultfree"))
    into = Path(tempdirs.make("snapshots"))
    try:
        yield point_dir, into
    finally:
        shutil.rmtree(point_dir, ignore_errors=True)
        shutil.rmtree(into, ignore_errors=True)
