"""The reader of a target's durable state, run under its own environment's interpreter
(``sim.targets.environments``): the parent of a target whose framework it cannot import asks
this process, which reads the point as ``Target.read_state`` does in the parent of any other.

    python -m sim.targets.reader POINT_DIR

writes the ``TargetState`` as one JSON object to ``POINT_DIR/target_state.json`` (a file, so a
reader forked from the target's zygote, whose output goes nowhere the parent reads, answers as
a fresh one does); the point's ``point.json`` names the target and its options.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sim.targets.child import POINT_NAME
from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target

#: The file the reader writes its answer to, in the point's directory.
STATE_NAME = "target_state.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sim.targets.reader POINT_DIR", file=sys.stderr)
        return 2
    point_dir = Path(args[0])
    config = json.loads((point_dir / POINT_NAME).read_text(encoding="utf-8"))
    options = TargetOptions.from_json(config["options"])
    state = get_target(config["target"]).read_state(point_dir, options)
    (point_dir / STATE_NAME).write_text(json.dumps(state.to_json()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
