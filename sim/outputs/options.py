"""The options every front end of the simulator shares, parsed in one place: stores, crash kinds,
scenarios, seeds, jobs, bounded numbers and non-empty text, with one set of defaults.

Why one parser: each ``durable-sim`` command (``sim.outputs.cli``) and the pytest plugin
(``sim.outputs.pytest_plugin``) used to spell ``--store`` its own way (six vocabularies: ``both``
here, a single kind there, Postgres taken by one and refused by the next) and default the crash
kinds differently, so a sweep in CI and one on the command line could run different schedules.
Here a ``--store`` is always a comma list like ``--crash`` (``file,sqlite``; ``both`` is the
documented alias of ``file,sqlite``, so ``make sweep`` and users' scripts keep working; Postgres
only when asked for by name), each command states which kinds it supports (``SWEEP_STORES`` ...)
and is refused the others in one line, and a command that runs one store says so.

Each parser is a plain function from the text typed to the value, raising ``UsageError`` (a
``sim.errors.UserError``) whose message names the bad value; the caller names the option:
``arg_type`` adapts a parser to argparse (whose one-line error starts ``argument --store:``), the
plugin prefixes its own option (``--sim-stores: ...``).

Defaults: today's command-line defaults (``DEFAULT_*``). One changed for the pytest plugin:
``--sim-crash`` defaulted to ``process,power,storage`` and is now ``process,power``, like ``sweep
--crash`` -- a pytest sweep item and ``durable-sim sweep`` of the same scenario now run the same
schedules by default; storage faults stay one option away (``--sim-crash
process,power,storage``, as ``make sweep`` adds them).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sim.errors import UsageError, UserError
from sim.world.faults import CrashKind, Schedule, parse_schedule
from sim.world.scenario import Scenario, bundled_names, load_scenario
from sim.world.seeded import SEED_MAX
from sim.world.stores import FILE_KINDS, StoreKind

T = TypeVar("T")

#: ``both``: the two stores that need no server. Postgres is never part of an alias or a default.
BOTH: tuple[StoreKind, ...] = (StoreKind.FILE, StoreKind.SQLITE)
#: What each kind of command supports. A sweep of any store; a command whose store lives in files
#: (``realcrash``: beside a real process; the fuzzer and the coverage measurement: on the
#: simulated disk, forked freely) the file kinds only.
SWEEP_STORES: tuple[StoreKind, ...] = tuple(StoreKind)
FILE_STORES: tuple[StoreKind, ...] = FILE_KINDS

DEFAULT_STORES: tuple[StoreKind, ...] = BOTH  # commands that sweep several stores
DEFAULT_STORE = StoreKind.FILE  # commands that run one store
#: A pause is tried only where a scenario has a standby (``Scenario.standby_at_s``): a few
#: schedules per such scenario (docs/crash-model.md, "Crash kinds").
DEFAULT_CRASH_KINDS: tuple[CrashKind, ...] = (CrashKind.PROCESS, CrashKind.POWER, CrashKind.PAUSE)
DEFAULT_SEED = 0
#: ``--jobs`` is at most this many times the machine's cores: more workers than that only queue
#: for the cores (and each sweep worker forks children of its own).
JOBS_PER_CORE = 4
MAX_EXAMPLES = 100_000  # fuzzer examples per fuzzer and scenario


def text(value: str) -> str:
    """Text that must not be empty (a path, a name, a spec): ``''`` is a typo, never a choice."""
    if not value.strip():
        raise UsageError("an empty value (give one, or leave the option out)")
    return value


def items(value: str) -> list[str]:
    """A comma list's items, stripped; an empty list or an empty item (``process,,power``) is
    refused, not skipped."""
    parts = [part.strip() for part in value.split(",")]
    if not value.strip() or not all(parts):
        raise UsageError(f"an empty item in {value!r} (items are comma-separated, none empty)")
    return parts


def _unique(values: Iterable[T]) -> tuple[T, ...]:
    """``values`` without repeats, in their first order."""
    return tuple(dict.fromkeys(values))


def stores(
    value: str, *, command: str, supported: tuple[StoreKind, ...] = SWEEP_STORES
) -> tuple[StoreKind, ...]:
    """``file,sqlite`` (or the alias ``both``) as store kinds, each one ``command`` supports."""
    chosen: list[StoreKind] = []
    for item in items(value):
        chosen += BOTH if item == "both" else [StoreKind(item)]  # StoreKindError if unknown
    refused = [kind for kind in chosen if kind not in supported]
    if refused:
        raise UsageError(
            f"{command} does not take the {refused[0]} store (it takes {', '.join(supported)})"
        )
    return _unique(chosen)


def store(
    value: str, *, command: str, supported: tuple[StoreKind, ...] = SWEEP_STORES
) -> StoreKind:
    """One store kind ``command`` supports (a command that runs one store at a time)."""
    chosen = stores(value, command=command, supported=supported)
    if len(chosen) > 1:
        raise UsageError(f"{command} runs one store at a time, not {value!r}")
    return chosen[0]


def crash_kinds(value: str) -> tuple[CrashKind, ...]:
    """``process,power,storage``: crash kinds (``ScheduleError`` names an unknown one)."""
    return _unique(CrashKind(item) for item in items(value))


def scenario_refs(value: str) -> tuple[str, ...]:
    """``read_edit_answer,path/to/x.json``: scenario names or files (see ``load_scenarios``)."""
    return _unique(items(value))


def load_scenarios(refs: Iterable[str]) -> list[tuple[str, Scenario]]:
    """The scenarios a command runs, each with how a repro line names it: the given names or
    files (a repeat once; ``ScenarioError`` names one that does not load), or, when none is
    given, every bundled scenario in name order."""
    chosen = _unique(refs) or tuple(bundled_names())
    return [(ref, load_scenario(ref)) for ref in chosen]


def schedule(value: str) -> Schedule:
    """A crash schedule in replay form (``14:after:power,20:before:process``, or ``none``), its
    points in the order they happen. Points given out of order are refused, never sorted: a
    schedule is its points in boundary order, and ``20:...,14:...`` run as ``14:...,20:...``
    would replay another schedule than the one written, without a word (a typo in an index,
    or points pasted from two repro lines)."""
    parsed = parse_schedule(text(value))
    if not parsed.points:
        return parsed
    given = [parse_schedule(part).points[0] for part in value.split(",")]
    if given != list(parsed.points):
        raise UsageError(
            f"crash points out of order in {value.strip()!r}: a schedule lists its points in "
            f"boundary order ({parsed.text()})"
        )
    return parsed


def seed(value: str) -> int:
    """A world seed: an integer in ``0..SEED_MAX`` (``sim.world.seeded``)."""
    return integer(value, 0, SEED_MAX)


def integer(value: str, low: int, high: int) -> int:
    """An integer in ``low..high``."""
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise UsageError(f"not an integer: {value[:40]!r}") from None
    if not low <= number <= high:
        raise UsageError(f"{value[:40]} is outside {low}..{high}")
    return number


def number(value: str, low: float, high: float) -> float:
    """A number in ``low < x <= high`` (a duration, a factor: zero is never meant)."""
    try:
        result = float(value)
    except ValueError:
        raise UsageError(f"not a number: {value[:40]!r}") from None
    if not low < result <= high:
        raise UsageError(f"{value[:40]} is outside ({low:g}, {high:g}]")
    return result


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?$")
MAX_DURATION_S = 7 * 24 * 3600  # a week: a longer budget is a typo, not a campaign


def duration_s(value: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1h30m``: seconds, positive and at most a week."""
    match = _DURATION.match(value.strip())
    if not value.strip() or match is None:
        raise UsageError(f"a duration like 90s, 15m or 1h30m, not {value[:40]!r}")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if not 0 < total <= MAX_DURATION_S:
        raise UsageError(f"{value[:40]} is outside (0s, {MAX_DURATION_S}s]")
    return float(total)


def integers(value: str, low: int, high: int) -> tuple[int, ...]:
    """A comma list of integers in ``low..high``."""
    return tuple(integer(item, low, high) for item in items(value))


def max_jobs() -> int:
    """The most ``--jobs`` takes: ``JOBS_PER_CORE`` times the machine's cores."""
    return JOBS_PER_CORE * max(1, os.cpu_count() or 1)


def jobs(value: str) -> int:
    """``--jobs``: worker processes, ``1..max_jobs()``."""
    return integer(value, 1, max_jobs())


def arg_type(parse: Callable[..., T], *bounds: Any, **keywords: Any) -> Callable[[str], T]:
    """``parse`` as an argparse ``type=``: its ``UserError`` becomes argparse's one-line usage
    error (``argument --store: ...``), its result the option's value."""

    def convert(value: str) -> T:
        try:
            return parse(value, *bounds, **keywords)
        except UserError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__  # what argparse names the type in its other errors
    return convert


def store_help(supported: tuple[StoreKind, ...], default: Iterable[StoreKind] | StoreKind) -> str:
    """The ``--store`` help of a command: what it takes, the alias, the default."""
    shown = default if isinstance(default, StoreKind) else ",".join(default)
    alias = f"; both = {','.join(BOTH)}" if all(kind in supported for kind in BOTH) else ""
    return f"{', '.join(supported)}{alias}; default {shown}"


def jobs_help(what: str) -> str:
    """The ``--jobs`` help: ``what`` runs at once, the default and the bound."""
    return (
        f"{what} (default: the machine's cores; at most {JOBS_PER_CORE} x the cores, here "
        f"{max_jobs()})"
    )
