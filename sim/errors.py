"""The one root of the errors ``sim`` raises for bad input, and the exit status each gets.

Why one root: a command line (``sim.outputs.cli.main``) and a test plugin must tell *bad input*
-- a scenario, a crash schedule, an option, a store kind, user code plugged in at a seam -- from
a safety violation (exit 1) and from a bug of the harness (a traceback). With every such error a
``UserError``, the command line catches it once and prints one line, and a library caller can
catch ``UserError`` instead of a list of classes from five modules. (``ScenarioError`` lives with
the scenarios, ``sim.world.scenario``, which makes its message one printable line.)

This module is layer 0 of ``sim`` (``tests/project/test_layers.py``): every layer may raise these,
so it imports nothing of ``sim``. Each class keeps ``ValueError`` among its bases where it had it
before, so callers that caught ``ValueError`` still do.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input: printed as one line; the command exits with the status ``status`` names."""

    #: Which of the command line's exit statuses this error gets (a key of
    #: ``sim.outputs.cli.common.EXIT``, where the numbers live): bad input is a usage error.
    status = "usage"


class UsageError(UserError):
    """A command-line or plugin option that cannot be used (``sim.outputs.options``)."""


class ScheduleError(UserError, ValueError):
    """A crash schedule or crash point that cannot exist: malformed text, an unknown crash kind
    or side of a boundary, a bad index or tear (``sim.world.faults``)."""


class StoreKindError(UserError, ValueError):
    """A store kind that does not exist (``sim.world.stores.StoreKind``)."""


class SeamError(UserError, ValueError):
    """A seam that cannot be used: its SPEC does not import, names nothing callable, or what it
    builds is not what the seam must return (``sim.world.seams``)."""


class SeamFailed(UserError):
    """User code at a seam raised while the simulator was running it (building a store,
    opening a runtime). Not the runtime's behaviour under test -- that is judged -- but code the
    harness could not run: the harness's exit status, never a safety violation's."""

    status = "error"


def user_error(exc: BaseException) -> UserError | None:
    """The bad input ``exc`` reports: itself, or the first of an exception group (trio's
    nurseries wrap what a simulated process raised) that holds nothing else; None otherwise."""
    if isinstance(exc, UserError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [user_error(inner) for inner in exc.exceptions]
        return found[0] if all(found) else None
    return None
