"""``python -m durable``: command line tools for the runtime's stores.

    python -m durable inspect PATH [--json]

See ``durable.inspect`` (and ``python -m durable inspect --help``) for what is checked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from durable import inspect as inspect_cmd


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and where to find the usage), as every other
    error of ``inspect`` is (``durable.inspect``: exit 2, one line, never a traceback): a usage
    block and a second line were easy to mistake for the tool's report in a script's log."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m durable", description="Tools for durable's stores.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    inspect_parser = commands.add_parser(
        "inspect",
        help="read-only health report of a store",
        description=inspect_cmd.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect_cmd.add_arguments(inspect_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 on usage errors)."""
    args = build_parser().parse_args(argv)
    if args.command == "inspect":
        return inspect_cmd.run(args.path, as_json=args.json)
    raise AssertionError(f"unknown command {args.command}")  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
