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

So: inside ``between_runs`` (a loop of runs) and in a parallel worker or forked child, automatic
collection is off, and what is alive when the loop starts (the scenario, the reference run,
imported modules) moves to the permanent generation; every run starts with ``collect_if_due``
(``sim.run.runner.run_scenario`` calls it), which collects once the objects allocated since the
last collection pass ``COLLECT_AFTER_OBJECTS``. One call site: every loop, every single re-run
and both fuzzers collect between their runs without a call of their own. Memory stays
bounded by that many objects of garbage; a collection scans only what the recent runs left.
Collection timing cannot change a verdict: no code path the simulator drives has a finaliser
that touches the simulated world, and the record memos are identity-keyed with a check of the
object itself (``durable.events.Memo``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Objects allocated (net of those freed) after which ``collect_if_due`` collects: a few tens
#: of MB. Read at each call (a test lowers it).
COLLECT_AFTER_OBJECTS = 200_000


def collect_if_due(*, collect_after_objects: int | None = None) -> bool:
    """Before a run: collect if enough objects were allocated since the last collection
    (default ``COLLECT_AFTER_OBJECTS``). That happens only while automatic collection is off
    (``between_runs``, a parallel worker, a forked child); with it on, the count never gets that
    high, so this does nothing. Returns whether it collected."""
    limit = COLLECT_AFTER_OBJECTS if collect_after_objects is None else collect_after_objects
    if limit < 1:
        raise ValueError(f"collect_after_objects must be >= 1, not {limit}")
    if gc.get_count()[0] < limit:
        return False
    gc.collect()
    return True


@contextmanager
def between_runs() -> Iterator[None]:
    """Collect only between runs for the duration of the block (see the module docstring);
    the collector's previous state (enabled or not) is restored on exit, and what the block
    froze is unfrozen -- unless objects were already frozen on entry (a forking sweep in
    progress), whose own unfreeze then releases both: the gc module cannot unfreeze a part."""
    was_enabled = gc.isenabled()
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        if frozen_before == 0:
            gc.unfreeze()
