"""Shared helpers for the target tests: a user's app as the command line would give it, checked
by the kit (``sim.targets.kit``), so the tests build options the way users do."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from sim.targets.environments import ensure
from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import Target, TargetError, TargetOptions
from sim.targets.registry import get_target


def app_options(
    target: str,
    app: str,
    *,
    effects: Sequence[str] = (),
    http: Sequence[str] = (),
    durability: str = "",
    preempt_s: float = 0.0,
    **words: str | bool,
) -> TargetOptions:
    """``durable-sim target sweep TARGET --app APP --effect ... [--input ...]`` as checked
    options; a bad word raises the command line's ``TargetError``."""
    spec = parse_app(
        target,
        AppArgs(app=app, effects=tuple(effects), http=tuple(http), **words),  # type: ignore[arg-type]  # the AppArgs words of a flag
    )
    given = TargetOptions(durability=durability, app=spec, preempt_s=preempt_s)
    return check_options(get_target(target), given)


def installed(name: str) -> Target:
    """The target called ``name`` with its extra installed (else the test is skipped with the
    extra to install), its own environment not made: for checks that refuse options first."""
    target = get_target(name)
    missing = target.missing()
    if missing is not None:
        pytest.skip(missing)
    return target


def runnable(name: str) -> Target:
    """The target called ``name``, ready to run: its extra installed, its own environment made
    (``sim.targets.environments``: once, reused by every later test) -- else the test is
    skipped with the reason (the extra to install, or why pip could not make the venv)."""
    target = installed(name)
    if target.environment is not None:
        try:
            ensure(target.environment, say=lambda text: None)
        except TargetError as exc:
            pytest.skip(str(exc))
    return target


def applied_rows(witness: list[str]) -> list[str]:
    """The ledger rows a violation's witness shows applied, in the order they landed."""
    return [w for w in witness if w.startswith("ledger#") and w.endswith("[applied]")]


def just_after(*prefixes: str) -> Callable[[list[str]], list[tuple[int, str]]]:
    """A ``choose`` for ``sweep_target``: just after the first boundary whose label starts with
    each prefix (chosen by label, not by an index that moves when the trace does)."""

    def choose(labels: list[str]) -> list[tuple[int, str]]:
        return [
            (next(i for i, label in enumerate(labels) if label.startswith(p)), "after")
            for p in prefixes
        ]

    return choose
