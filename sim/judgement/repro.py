"""The one-line repro of a failure: the command that runs the same schedule the same way.

A repro line that replays something else than what failed is worse than none, so it carries
every input of the run: scenario (name or file path), seed, store kind, schedule, and the seams
that were swapped (see ``sim.world.seams``). When a swapped seam cannot be named on a command line
the line says so instead of printing a command that would replay the reference runtime.
"""

from __future__ import annotations

import os
import shlex

from sim.world import seams as seams_module


def replay_command(
    scenario_ref: str,
    *,
    seed: int,
    store: str,
    schedule: str,
    seams: seams_module.Seams | None = None,
) -> str:
    """``durable-sim replay ...`` for a schedule in replay form (``14:after:power,...``)."""
    arguments, missing = seams_module.repro_arguments(seams)
    if missing is not None:
        node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        rerun = f"pytest {shlex.quote(node)}" if node else "re-run the code that swapped it"
        return f"{rerun}  # no durable-sim replay line: {missing}; schedule {schedule}"
    words = [
        "durable-sim",
        "replay",
        "--scenario",
        scenario_ref,
        "--seed",
        str(seed),
        "--store",
        store,
        "--schedule",
        schedule or "''",
        *arguments,
    ]
    return " ".join(w if w == "''" else shlex.quote(w) for w in words)
