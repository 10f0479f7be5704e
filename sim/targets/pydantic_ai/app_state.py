"""A user's pydantic-ai agent's run, as its last process noted it in the trace
(``sim.targets.pydantic_ai.app``): read in the parent without importing pydantic_ai, dbos or the
user's code (a DBOS client would unpickle the run's result, which holds the user's types)."""

from __future__ import annotations

from pathlib import Path

from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.kit.landing import effect_results
from sim.targets.protocol import TargetOptions, TargetState

#: The trace note the last process writes.
STATE_NOTE = "pydantic_ai_app_state"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The last process's note of the agent's workflow (none: no process saw it end). H1 (the
    history hides a duplicate) is judged for each effect an agent's tool called, against that
    tool's results in the run's messages (``effect_results``)."""
    del options
    rows = read_trace(point_dir / TRACE_NAME)
    notes = notes_of(rows, STATE_NOTE)
    if not notes:
        return TargetState(pending=["the agent's workflow never ended"])
    last = notes[-1]
    finished = last["status"] == "SUCCESS"
    results, judged = effect_results(rows, dict(last.get("results", {})))
    return TargetState(
        exists=True,
        results=results,
        hidden_judged=judged,
        finished=finished,
        pending=[] if finished else [f"{last['status']}: {last['error']}"],
        inputs=list(last["inputs"]),
        answer=last["answer"] if finished else None,
        history=list(last["history"]),
    )
