"""The thread's state of a user's LangGraph graph, as its last process noted it in the trace
(``sim.targets.langgraph.app``): read in the parent without importing langgraph or the user's
code."""

from __future__ import annotations

from pathlib import Path

from sim.targets.kit.landing import noted_state
from sim.targets.protocol import TargetOptions, TargetState
from sim.targets.shapes import as_text_or_none, as_texts

#: The trace note the last process writes.
STATE_NOTE = "app_state"
#: The trace note of an answer to an ``interrupt()``, written before it is sent: the
#: interrupt's id and the index k of its value in ``--answers`` (``sim.targets.langgraph.app``).
ANSWERED_NOTE = "answered"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The last process's note of the thread's state (None of it: the run never ended). Finished
    is the child's verdict on the thread (nothing next, no pending writes, no interrupt waiting):
    a graph may end on any state, so no shape of the values says it. H1 (the history hides a
    duplicate) is judged for each effect a graph's tool called, against that tool's results in
    the thread's history (``effect_results``)."""
    del options
    last, state = noted_state(point_dir, STATE_NOTE, never="the graph never ended")
    if last is None:
        return state
    state.finished = bool(last["finished"])
    state.pending = as_texts(last["pending"])
    state.inputs = as_texts(last["inputs"])
    state.answer = as_text_or_none(last["answer"])
    state.history = as_texts(last["history"])
    return state
