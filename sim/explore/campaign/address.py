"""Content addresses: what identifies a unit of work and the code that computed its result.

A unit's address is the sha256 of the canonical JSON of its specification: for a sweep unit, its
``SweepPlan`` (``to_json``: the scenario's content, store, seed, crash kinds, range of crash
points, determinism mode, ...) and the project version (``sweep_spec``). The project
version is the installed package's version plus a digest of every Python source of ``durable``
and ``sim`` as imported: a result computed by other code -- an edited oracle, another runtime --
has another address and is never reused. What the digest leaves out (the Python interpreter,
trio, SQLite) is checked instead by the merge: units of one sweep that disagree about its traced
run are reported as nondeterminism (docs/campaigns.md).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import durable
import sim
from durable.codec import canonical_json
from sim.explore.plan import SweepPlan
from sim.explore.results import tool_version


def digest(value: Any) -> str:
    """The sha256 (hex) of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode("ascii")).hexdigest()


@functools.cache
def project_version() -> str:
    """``0.1.0+src.<16 hex>``: the package version and a digest of the sources that run a unit.
    Computed once per process (the sources of a running process do not change under it)."""
    h = hashlib.sha256()
    for package in (durable, sim):
        assert package.__file__ is not None, "durable and sim are regular packages"
        root = Path(package.__file__).resolve().parent
        for path in sorted(root.rglob("*.py")):
            name = f"{package.__name__}/{path.relative_to(root).as_posix()}"
            h.update(name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return f"{tool_version()}+src.{h.hexdigest()[:16]}"


def sweep_spec(plan: SweepPlan, *, version: str) -> dict[str, Any]:
    """A sweep unit's specification: its plan and the code it must run on. Its digest (the
    unit's address) is a function of ``plan.digest()`` and ``version`` alone: the same plan on
    other code is another unit, and a unit's result is filed under the plan that made it."""
    return {"kind": "sweep", "plan": plan.to_json(), "version": version}
