"""Fold crash points whose futures are identical, so a sweep runs each future once.

Two crash points leave the same world when nothing the future depends on changed between them:
after a log append and after its fsync a process kill leaves the same files; two power losses
between the same two fsyncs whose draws keep the same bytes leave the same disk. The machine
digests that world at every crash point (``sim.world.injector.Injector.state_digests``: files as
the crash leaves them, services, client, model log, ids, virtual time, trio's scheduler state,
pending timed crashes). Here the sweep's traced run, which passes every boundary anyway, asks
for the digest at each crash point it lists and maps each schedule to the first schedule with the
same digest, its *twin*. Both sweep paths then run only the schedules without a twin; the others
inherit their twin's verdict (and, if it fails, are re-run to show their own crash and timeline).

Folding only ever merges points of one *durable window* (between two durable changes): a
recovery writes its own epoch and settlements at a position unique to the state the crash left,
so the futures of points in different windows never meet again. It is a constant factor, not a
cure for a sweep's quadratic cost (docs/performance.md, "Folding"). The fast-versus-naive
equivalence tests keep every verdict equal to the unfolded sweep's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from sim.run.result import RunResult
from sim.world.faults import CrashKind, Schedule, When, sweep_points
from sim.world.injector import Injector, Victim


class ForksNothing:
    """The ``sim.world.injector.ForkHook`` methods of a hook that only looks at each boundary
    and forks no child (``FoldPlan``, ``sim.explore.rejoin.CanonicalProbe``)."""

    def interrupt_guard(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # nothing forks: an interrupt is raised as usual

    def finish_child(self, result: RunResult) -> None:
        raise AssertionError(f"a {type(self).__name__} forks no child")

    def abort_child(self, exc: BaseException) -> None:
        raise AssertionError(f"a {type(self).__name__} forks no child") from exc


@dataclass
class FoldPlan(ForksNothing):
    """A ``sim.world.injector.ForkHook`` that forks nothing: at every boundary after the base
    schedule's points it digests each crash point the sweep lists there and remembers the first
    schedule of each digest. ``twin_of`` then maps every other schedule to that first one."""

    base: Schedule
    kinds: tuple[CrashKind, ...]
    in_child: bool = False
    child_schedule: Schedule = field(default_factory=Schedule)
    first_of: dict[str, str] = field(default_factory=dict)  # digest -> first schedule's text
    twin_of: dict[str, str] = field(default_factory=dict)  # schedule text -> its twin's text

    def fork_at(
        self, injector: Injector, process: Victim, index: int, when: When, label: str
    ) -> None:
        if index <= self.base.last_index:
            return
        # The traced run counts each point's enumerated tears (``count_tears``) before calling
        # here: the same count the sweep lists schedules from (``Trace.tear_counts``).
        assert injector.tear_counts is not None, "a fold plan needs a run that counts tears"
        n_tears = injector.tear_counts.get((index, when), 0)
        points = sweep_points(index, when, label, self.kinds, n_tears)
        for point, digest in zip(points, injector.state_digests(process, points), strict=True):
            if digest is None:
                continue
            text = Schedule.of(*self.base.points, point).text()
            first = self.first_of.setdefault(digest, text)
            if first != text:
                self.twin_of[text] = first
