"""Reach: which recovery branches of ``durable/`` a measurement executes (coverage.py).

A crash-testing harness only finds bugs on the paths its scenarios reach. This package measures,
with coverage.py's branch coverage, which lines and branches (arcs) of ``durable/`` the default
sweep (every bundled scenario, both stores, process and power crashes) and the fuzzer execute,
and names the **recovery branches** that nothing reached.

Why coverage.py rather than a tracer of our own: it already does the hard parts -- which arcs a
Python function *can* take (its static analysis of the bytecode and AST, exits from nested
functions and lambdas included), a C tracer fast enough for a 10,000-schedule sweep, and data
that survives ``fork`` -- and its arcs are what a reviewer can check with ``coverage html``.

The pieces:

- ``RECOVERY_REGIONS`` (``regions.py``): the committed, explicit list of functions whose branches
  must all be reached (kept in code, beside the allowances, so a change to either is one reviewed
  diff). A region is ``path:qualified.name`` and includes the functions nested in it. The paths
  are relative to ``durable``'s parent, and ``durable``'s sources are found through the import
  system, so the measurement works on an installed package as well as in a checkout.
- ``ALLOWED_UNREACHED`` (``regions.py``): the few recovery branches nothing can reach in a
  simulated run, each with its one-line reason. Keyed by region and source text, not line
  numbers, so unrelated edits do not invalidate it; an allowance that matches no branch any more
  is reported as stale.
- The measurement (``measurement.py``) runs in a fresh interpreter (``python -m sim.explore.reach``)
  that starts coverage *before* ``durable`` is imported, so module-level lines count. The sweep
  forks a child per crash point and children leave with ``os._exit``: ``save_child_coverage``
  (called by ``sim.explore.forking`` just before that) writes the child's arcs, labelled with its
  schedule, to a small JSON file -- one per child rather than one SQLite data file each, which
  would take minutes to combine.
- The report and the **reach corpus** (``analysis.py``): a greedy set cover of the recovery
  branches by the sweep's schedules, written where ``--write-corpus`` says and replayed with
  ``--from-corpus``. This repository's is ``tests/reach_corpus.json``, replayed by
  ``tests/sim/explore/test_reach.py`` in under a minute, so CI notices a recovery branch that
  becomes unreached.

Attribution is exact without resetting anything in the child: the parent flushes its collector
before and after each scenario x store sweep, so a child's data is (the parent's arcs since the
flush, up to the fork) plus its own; subtracting everything the parent recorded during that sweep
(``P``) leaves arcs only the child's crash and recovery reached. A corpus case is credited with
those arcs only (a lower bound), and the fault-free runs behind ``P`` are corpus cases of their
own, so every arc the corpus claims is one its replay executes.
"""

from __future__ import annotations

from sim.explore.reach.analysis import Branch, analyze, build_corpus
from sim.explore.reach.measurement import (
    CORPUS_SCHEMA_VERSION,
    REGENERATE,
    Case,
    Options,
    Raw,
    ReachUnavailable,
    load_corpus,
    require_coverage,
    run_measurement,
    save_child_coverage,
)
from sim.explore.reach.regions import (
    ALLOWED_UNREACHED,
    RECOVERY_REGIONS,
    Allowance,
    Arc,
    ReachError,
    Region,
    find_regions,
    region_filter,
)

__all__ = [
    "ALLOWED_UNREACHED",
    "CORPUS_SCHEMA_VERSION",
    "RECOVERY_REGIONS",
    "REGENERATE",
    "Allowance",
    "Arc",
    "Branch",
    "Case",
    "Options",
    "Raw",
    "ReachError",
    "ReachUnavailable",
    "Region",
    "analyze",
    "build_corpus",
    "find_regions",
    "load_corpus",
    "region_filter",
    "require_coverage",
    "run_measurement",
    "save_child_coverage",
]
