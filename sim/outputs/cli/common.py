"""What every command shares: the exit statuses, the argument parser whose usage error is one
line, the seam options, the single-run options, the wide console for tables. The options
themselves (stores, crash kinds, seeds, jobs, bounds) are parsed by ``sim.outputs.options``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from sim.errors import UsageError
from sim.judgement.invariants import INVARIANTS
from sim.outputs import options
from sim.world.pgserver import CONNINFO_ENV, server_conninfo
from sim.world.seams import load
from sim.world.seeded import SEED_MAX
from sim.world.stores import StoreKind

EXIT = {"pass": 0, "safety": 1, "usage": 2, "liveness": 3, "nondeterminism": 4, "error": 5}

#: ``--seed`` of every command (``sim.outputs.options.seed``), as an argparse type.
seed_arg = options.arg_type(options.seed)
#: ``--jobs`` of every command that runs workers (``sim.outputs.options.jobs``).
jobs_arg = options.arg_type(options.jobs)
#: Text that must not be empty (a path, a name, a SPEC): ``--out ''`` is refused.
text_arg = options.arg_type(options.text)
SEED_HELP = f"world seed, 0..{SEED_MAX} (default {options.DEFAULT_SEED})"


def judged_invariants() -> str:
    """``21 invariants (I0-I20)``: what a run of the reference runtime is judged on, read from
    the invariant registry (its order: the runtime's codes first, in sequence), so no help text
    carries a count that goes stale."""
    codes = [record.code for record in INVARIANTS if record.scope != "target"]
    return f"{len(codes)} invariants ({codes[0]}-{codes[-1]})"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is the one line the exit-status contract promises (plus a
    pointer to ``--help``), not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT["usage"], f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_seam_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "your own runtime or store (see sim.world.seams; repro lines of a failure found with "
        "swapped seams carry these options)"
    )
    group.add_argument(
        "--open-runtime",
        type=text_arg,
        metavar="SPEC",
        help="FILE.py:NAME or MODULE:NAME of a callable with durable.Runtime.open's keywords",
    )
    group.add_argument(
        "--file-store",
        type=text_arg,
        metavar="SPEC",
        help="FILE.py:NAME or MODULE:NAME of a callable (root, fs, fsync) -> store",
    )


def swapped_seams(args: argparse.Namespace) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    for name in ("open_runtime", "file_store"):
        spec = getattr(args, name, None)
        if spec:
            chosen[name] = load(spec)
    return chosen


def add_stores_option(
    p: argparse.ArgumentParser, *, command: str, supported: tuple[StoreKind, ...], note: str
) -> None:
    """``--store`` of a command that runs several stores: a comma list of ``supported`` kinds
    (``both`` an alias), by default both file kinds; ``note`` says what each store means to
    ``command``."""
    p.add_argument(
        "--store",
        type=options.arg_type(options.stores, command=command, supported=supported),
        default=options.DEFAULT_STORES,
        metavar="STORES",
        help=f"comma-separated: {options.store_help(supported, options.DEFAULT_STORES)}. {note}",
    )


def add_crash_option(p: argparse.ArgumentParser, *, note: str) -> None:
    """``--crash``: the crash kinds swept, a comma list, by default process and power."""
    p.add_argument(
        "--crash",
        type=options.arg_type(options.crash_kinds),
        default=options.DEFAULT_CRASH_KINDS,
        metavar="KINDS",
        help=f"crash kinds, comma-separated: process, power, storage (default "
        f"{','.join(options.DEFAULT_CRASH_KINDS)}). {note}",
    )


def add_single_run_options(p: argparse.ArgumentParser, *, command: str) -> None:
    """``--seed``, ``--store`` (one store: a single run) and ``--json`` of ``run`` and
    ``replay``."""
    p.add_argument("--seed", type=seed_arg, default=options.DEFAULT_SEED, help=SEED_HELP)
    p.add_argument(
        "--store",
        type=options.arg_type(options.store, command=command),
        default=options.DEFAULT_STORE,
        help=(
            f"{options.store_help(options.SWEEP_STORES, options.DEFAULT_STORE)} (one store); "
            f"postgres runs on the server named by ${CONNINFO_ENV}"
        ),
    )
    p.add_argument("--json", action="store_true", help="print JSON on stdout")


def check_stores(stores: Iterable[StoreKind]) -> None:
    """Fail at once, in one line, if a store asked for cannot run here (Postgres: the server
    named by ``DURABLE_SIM_PG_CONNINFO`` unset, its driver missing or the server unreachable),
    before any run rather than in the middle of a sweep."""
    if StoreKind.POSTGRES not in stores:
        return

    server_conninfo()


def wide_console() -> Any:
    """A console for tables: the terminal's width, or a wide one when output is redirected (a
    CI log should not wrap a summary table into an unreadable column of fragments)."""
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


def check_out_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write to {path}: {exc.strerror}") from exc


def exit_for(verdicts: dict[str, int], *, refused: bool = False) -> int:
    """The exit status of a sweep: a refused scenario (its fault-free run fails, so its crash
    schedules were not run) is bad input, and says so whatever the other verdicts are."""
    from sim.judgement.oracles import worst_verdict  # lazily, like every heavy import of the CLI

    if refused:
        return EXIT["usage"]
    worst = worst_verdict(verdicts)
    return 0 if worst == "pass" else EXIT[worst]


def determinism_of(args: argparse.Namespace) -> str:
    return "off" if args.no_determinism_check else str(args.determinism)
