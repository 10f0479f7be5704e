"""``durable-sim scoreboard``: sweep every target x durability mode x variant and write the
generated scoreboard (``sim.outputs.scoreboard``; ``make scoreboard``)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from sim.errors import UsageError
from sim.outputs.cli.common import text_arg
from sim.targets.registry import target_names


def add_parsers(sub: Any) -> None:
    """``scoreboard``: the runtimes' generated table."""
    sb = sub.add_parser(
        "scoreboard",
        help="sweep every target x durability x variant; write docs/scoreboard.md and .json",
        description=(
            "Sweep every crash point of every registered target in each durability mode and "
            "variant (real processes: hours on 2 cores), and write the generated table "
            "(markdown) and its data (JSON). A progress line per combination on stderr."
        ),
    )
    sb.add_argument(
        "--targets", type=text_arg, default=None, metavar="NAME,...", help="default: every target"
    )
    sb.add_argument("--json", type=text_arg, default=None, metavar="FILE")
    sb.add_argument("--markdown", type=text_arg, default=None, metavar="FILE")
    sb.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows the JSON file holds already (same framework versions): finish an "
        "interrupted generation instead of starting over",
    )
    sb.set_defaults(handler=run_scoreboard)


def run_scoreboard(args: argparse.Namespace) -> int:
    # this command's own modules, imported when it runs (the CLI's start imports none)
    from sim.outputs.scoreboard import JSON_PATH, MARKDOWN_PATH, render, scoreboard

    names = [n for n in (args.targets or "").split(",") if n] or list(target_names())
    unknown = [n for n in names if n not in target_names()]
    if unknown:
        raise UsageError(
            f"unknown target(s) {', '.join(unknown)} (known: {', '.join(target_names())})"
        )
    json_path = Path(args.json) if args.json else JSON_PATH
    markdown_path = Path(args.markdown) if args.markdown else MARKDOWN_PATH
    done = _saved(json_path) if args.resume else None

    def save(doc: dict[str, Any]) -> None:
        # Written whole to a neighbour, then renamed: an interrupt never leaves half a file. Keys
        # in the generator's order (a framework's own distribution first), which render follows.
        part = json_path.with_name(json_path.name + ".part")
        part.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        os.replace(part, json_path)

    doc = scoreboard(names, done=done, save=save)
    save(doc)
    markdown_path.write_text(render(doc), encoding="utf-8")
    print(f"scoreboard: {len(doc['rows'])} rows to {json_path} and {markdown_path}")
    return 0


def _saved(path: Path) -> dict[str, Any] | None:
    """The document an earlier generation saved at ``path``, or None if there is none."""
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--resume: {path} is not a scoreboard document ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise UsageError(f"--resume: {path} is not a scoreboard document (no rows)")
    return doc
