"""When Python's cyclic garbage collector runs while many simulated runs execute one after the
other: between runs, never inside one.

A simulated run makes thousands of reference cycles (trio's tasks and cancel scopes, the
exceptions a crash unwinds with and their tracebacks) and frees almost none of them by reference
counting. With the collector's default thresholds, a generation-0 collection fires every 700
allocations and a full one now and then, in the middle of a run, scanning everything still alive:
that was ~14 % of a small scenario's naive sweep (``read_edit_answer``: 490 -> 559 schedules/s
with the collector off in the workers) and a quarter of a ``long_horizon`` crash run
(171 -> 126 ms). Turned off altogether, though, a worker that runs hundreds of schedules grows by
their garbage (~3 MB per ``long_horizon`` run).

So: what is alive when the loop starts (the scenario, the reference run, imported modules) moves
to the permanent generation, automatic collection is off, and ``Between.run_done`` collects once
the objects allocated since the last collection pass ``collect_after_objects``. Memory stays
bounded by that many objects of garbage; a collection scans only what the recent runs left.
Collection timing cannot change a verdict: no code path the simulator drives has a finaliser
that touches the simulated world, and the record memos are identity-keyed with a check of the
object itself (``durable.events.Memo``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: Objects allocated (net of those freed) after which ``run_done`` collects: a few tens of MB.
COLLECT_AFTER_OBJECTS = 200_000


@dataclass
class Between:
    """The handle ``between_runs`` yields: call ``run_done`` after each run."""

    collect_after_objects: int
    collections: int = 0

    def run_done(self) -> None:
        """Collect if the runs since the last collection allocated enough to be worth it."""
        if run_done(collect_after_objects=self.collect_after_objects):
            self.collections += 1


def run_done(*, collect_after_objects: int = COLLECT_AFTER_OBJECTS) -> bool:
    """After a run outside a ``between_runs`` loop (a single re-run, a fuzzer's example): collect
    if automatic collection is off -- a parallel worker turns it off for its whole step -- and
    enough objects were allocated since the last collection. With automatic collection on, the
    count never gets that high, so this does nothing. Returns whether it collected."""
    if gc.get_count()[0] < collect_after_objects:
        return False
    gc.collect()
    return True


@contextmanager
def between_runs(*, collect_after_objects: int = COLLECT_AFTER_OBJECTS) -> Iterator[Between]:
    """Collect only between runs for the duration of the block (see the module docstring);
    the collector's previous state (enabled or not) is restored on exit, and what the block
    froze is unfrozen -- unless objects were already frozen on entry (a forking sweep in
    progress), whose own unfreeze then releases both: the gc module cannot unfreeze a part."""
    if collect_after_objects < 1:
        raise ValueError(f"collect_after_objects must be >= 1, not {collect_after_objects}")
    was_enabled = gc.isenabled()
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    gc.disable()
    try:
        yield Between(collect_after_objects)
    finally:
        if was_enabled:
            gc.enable()
        if frozen_before == 0:
            gc.unfreeze()
