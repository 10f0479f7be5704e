"""The thread's state of a user's LangGraph graph, as its last process noted it in the trace
(``sim.targets.langgraph.app``): read in the parent without importing langgraph or the user's
code."""

from __future__ import annotations

from pathlib import Path

from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.kit.landing import effect_results
from sim.targets.protocol import TargetOptions, TargetState

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
    rows = read_trace(point_dir / TRACE_NAME)
    notes = notes_of(rows, STATE_NOTE)
    if not notes:
        return TargetState(pending=["the graph never ended"])
    last = notes[-1]
    answer = last["answer"]
    results, judged = effect_results(rows, dict(last.get("results", {})))
    return TargetState(
        exists=True,
        results=results,
        hidden_judged=judged,
        finished=bool(last["finished"]),
        pending=list(last["pending"]),
        inputs=list(last["inputs"]),
        answer=answer,
        history=list(last["history"]),
    )
