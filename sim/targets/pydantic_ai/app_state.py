"""A user's pydantic-ai agent's run, as its last process noted it in the trace
(``sim.targets.pydantic_ai.app``): read in the parent without importing pydantic_ai, dbos or the
user's code (a DBOS client would unpickle the run's result, which holds the user's types)."""

from __future__ import annotations

from pathlib import Path

from sim.targets.kit.landing import noted_state
from sim.targets.protocol import TargetOptions, TargetState
from sim.targets.shapes import as_text_or_none, as_texts

#: The trace note the last process writes.
STATE_NOTE = "pydantic_ai_app_state"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The last process's note of the agent's workflow (none: no process saw it end). H1 (the
    history hides a duplicate) is judged for each effect an agent's tool called, against that
    tool's results in the run's messages (``effect_results``)."""
    del options
    last, state = noted_state(point_dir, STATE_NOTE, never="the agent's workflow never ended")
    if last is None:
        return state
    state.finished = last["status"] == "SUCCESS"
    state.pending = [] if state.finished else [f"{last['status']}: {last['error']}"]
    state.inputs = as_texts(last["inputs"])
    state.answer = as_text_or_none(last["answer"]) if state.finished else None
    state.history = as_texts(last["history"])
    return state
