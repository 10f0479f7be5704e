"""A user's DBOS workflow's final status, as its last process noted it in the trace
(``sim.targets.dbos.app``): read in the parent without importing dbos or the user's code, whose
steps and arguments a DBOS client could deserialize only by importing it."""

from __future__ import annotations

from pathlib import Path

from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.protocol import TargetOptions, TargetState
from sim.targets.shapes import as_text_or_none, as_texts

#: The trace note the last process writes.
STATE_NOTE = "dbos_app_state"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The last process's note of the workflow (none: no process saw it end). The effects are
    the app's service clients, not its steps, so H1 (the history hides a duplicate) is not
    judged here: ``exists`` stays False."""
    del options
    notes = notes_of(read_trace(point_dir / TRACE_NAME), STATE_NOTE)
    if not notes:
        return TargetState(pending=["the workflow never ended"])
    last = notes[-1]
    finished = last["status"] == "SUCCESS"
    pending = [] if finished else [f"{last['status']}: {last['error']}"]
    return TargetState(
        finished=finished,
        pending=pending,
        inputs=as_texts(last["inputs"]),
        answer=as_text_or_none(last["output"]) if finished else None,
        history=as_texts(last["history"]),
    )
