"""The session of a user's ADK app (``sim.targets.adk.app``), read as the bundled agent's is: a
fresh ``SqliteSessionService`` on the point's file (``sim.targets.adk.state.read_session``),
under the target's environment -- never the user's code, which the reader does not import.

The app's name, which keys its session, is the one thing the reader cannot know: each process
of the point notes it in the trace before its first append (``APP_NOTE``). The effects are the
user's declarations, not ADK's tools, so H1 is judged per effect against the results of the
tools that called it (``effect_results``, from the trace's notes of which tool made each
effect).
"""

from __future__ import annotations

from pathlib import Path

from sim.targets.adk.agent import DB_NAME
from sim.targets.adk.state import read_session
from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.kit.landing import effect_results
from sim.targets.protocol import TargetOptions, TargetState

#: The trace note naming the app whose session the point holds.
APP_NOTE = "adk_app"
#: The session a user's app runs in (the user id is the bundled agent's, ``USER_ID``).
APP_SESSION_ID = "durable-sim-session"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The app's session as ADK reads it, its tools' results mapped to the effects they made;
    no note of the app: no process built it, so there is no session to read."""
    del options
    rows = read_trace(point_dir / TRACE_NAME)
    notes = notes_of(rows, APP_NOTE)
    if not notes:
        return TargetState(pending=["the app was never built"])
    state = read_session(point_dir / DB_NAME, str(notes[-1]["app"]), APP_SESSION_ID)
    state.results, judged = effect_results(rows, state.results)
    state.hidden_judged = judged
    return state
