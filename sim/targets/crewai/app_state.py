"""The persisted state of a user's CrewAI flow (``sim.targets.crewai.app``), read as the bundled
flow's is: CrewAI's own ``SQLiteFlowPersistence`` on the point's file, under the target's
environment -- never the user's code, which the reader does not import.

A flow's state is the user's own model, so the reader judges it by what ``@persist`` wrote:
one row per completed method. A method's rows are its results (``results``): a charge killed
after the provider took it and before its method's save left no row for that attempt, so the
card charged twice next to one saved ``charge`` is H1 (per effect, against the methods that
called it: ``effect_results``). A method run again after a restart saves again, so a count can
only over-state a method's results, never hide one. The run is finished when a process's
kickoff returned (``APP_NOTE``, noted by the child); the final state's fields are its history.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.crewai import DB_NAME
from sim.targets.kit.landing import effect_results
from sim.targets.protocol import TargetOptions, TargetState

#: The trace note a process writes when its kickoff returned.
APP_NOTE = "crewai_app_finished"
#: The flow id every process of a point kicks off (``kickoff(inputs={"id": ...})``).
APP_FLOW_ID = "durable-sim-flow"


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The flow's saves by method, each declared effect's results the saves of the methods that
    called it, and the latest state's fields as its history; no file: no method completed."""
    del options
    rows = read_trace(point_dir / TRACE_NAME)
    finished = bool(notes_of(rows, APP_NOTE))
    path = point_dir / DB_NAME
    saves = _saves(path) if path.exists() else []
    if not saves:
        pending = [] if finished else ["the flow's first method"]
        return TargetState(finished=finished, pending=pending)
    by_method: dict[str, list[str]] = {}
    for row_id, method, _ in saves:
        by_method.setdefault(method, []).append(f"save#{row_id}")
    results, judged = effect_results(rows, by_method)
    latest = json.loads(saves[-1][2])
    history = [f"{key}: {json.dumps(latest[key], sort_keys=True)}" for key in sorted(latest)]
    return TargetState(
        exists=True,
        finished=finished,
        pending=[] if finished else [f"the methods after {saves[-1][1]}"],
        results=results,
        hidden_judged=judged,
        history=history,
        figures={"state_saves": len(saves), "saved_after": [method for _, method, _ in saves]},
    )


def _saves(path: Path) -> list[tuple[int, str, str]]:
    """Every row ``@persist`` saved for the flow id: its row id, method and state JSON. Read
    with sqlite3, read-only: the table is CrewAI's (``SQLiteFlowPersistence.save_state``), and
    its own ``load_state`` gives the latest row only."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = connection.execute(
            "SELECT id, method_name, state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id",
            (APP_FLOW_ID,),
        ).fetchall()
    except sqlite3.OperationalError:  # the file exists, CrewAI's schema does not yet
        return []
    finally:
        connection.close()
    return [(int(i), str(m), str(s)) for i, m, s in found]
