"""The fast tier's share of a parametrized family (the tiers: tests/conftest.py).

A family of parameters -- a sweep per scenario, a check per store -- keeps its cheapest members
in the fast tier (``make test``) and moves the rest to the slow tier (``make check``), so every
property the family checks is still checked on every run, once, and a member added later (a new
bundled scenario) starts in the slow tier until someone decides otherwise.
"""

from __future__ import annotations

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
