"""The fast tier's share of a parametrized family (the tiers: tests/conftest.py).

A family of parameters -- a sweep per scenario, a check per store -- keeps its cheapest members
in the fast tier (``make test``) and moves the rest to the slow tier (``make check``), so every
property the family checks is still checked on every run, once, and a member added later (a new
bundled scenario) starts in the slow tier until someone decides otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from typing import Any

import pytest


def _itself(value: Any) -> Any:
    return value


def tiered(
    values: Iterable[Any], *, fast: Collection[Any], key: Callable[[Any], Any] = _itself
) -> list[Any]:
    """``values`` for ``pytest.mark.parametrize``, each one whose ``key`` is not in ``fast``
    marked slow. A tuple is one set of arguments, as in parametrize itself; test ids are
    unchanged. A ``fast`` member that names no value (renamed, or misspelt) is an error, not an
    empty fast tier."""
    values = list(values)
    keys = [key(value) for value in values]
    missing = [member for member in fast if member not in keys]
    if missing:
        raise ValueError(f"fast members that are not parameters: {missing}")
    out: list[Any] = []
    for value, name in zip(values, keys, strict=True):
        if name in fast:
            out.append(value)
        else:
            args = value if isinstance(value, tuple) else (value,)
            out.append(pytest.param(*args, marks=pytest.mark.slow))
    return out


#: The switch that runs every member of a sampled family (``sampled``): a release check's run.
RELEASE_ENV = "DURABLE_SIM_RELEASE"


def release() -> bool:
    """Whether this run is a release check (every member of every sampled family runs)."""
    return os.environ.get(RELEASE_ENV, "") == "1"


def sampled(
    values: Iterable[Any],
    *,
    fast: Collection[Any],
    every: int | None,
    keep: Collection[Any] = (),
    key: Callable[[Any], Any] = _itself,
) -> list[Any]:
    """``tiered``, for a family whose members repeat one property (the pruned sweep's agreement
    with the exact one, scenario by scenario): the ``fast`` members run in the fast tier; of the
    others, the ``keep`` members (those a claim names one by one) and one in ``every`` of the
    rest (none when ``every`` is None: a family whose fast member shows the property and whose
    others repeat it on costlier cases) -- the first, then every ``every``-th, in the family's
    own order, so the sample does not move -- run with ``--run-slow``, and the rest only in a
    release check (``DURABLE_SIM_RELEASE=1``), skipped with that reason otherwise, never
    dropped in silence.
    Never for a test that is the only check of a promise."""
    assert every is None or every >= 1, every
    values = list(values)
    out = tiered(values, fast=fast, key=key)
    keys = [key(value) for value in values]
    unknown = [member for member in keep if member not in keys]
    if unknown:
        raise ValueError(f"kept members that are not parameters: {unknown}")
    rest = 0
    for n, name in enumerate(keys):
        if name in fast or name in keep:
            continue
        if (every is None or rest % every) and not release():
            args = values[n] if isinstance(values[n], tuple) else (values[n],)
            reason = f"sampled: {RELEASE_ENV}=1 runs every member of this family"
            out[n] = pytest.param(*args, marks=[pytest.mark.slow, pytest.mark.skip(reason=reason)])
        rest += 1
    return out
