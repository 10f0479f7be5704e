"""What Prefect's durable state of the pydantic-ai agent's flow holds, read in the parent as a
fresh reader: the point's Prefect database (read-only, with ``sqlite3``: no API server is
started in the parent) for the flow runs of the payment, their parameters and final states,
and the result records Prefect persisted (``prefect.results.ResultRecord``, deserialized from
the point's result storage) for what the model asked and the run's messages.

Which result records count: a completed flow run's state points (through its result artifact,
which holds the record's metadata) at the flow's persisted result -- the agent's
``AgentRunResult``: the history, the answer, and each tool result it holds; the tool calls the
model asked for are in the persisted model responses (task results, each a whole record in one
file, the capability wrote), whatever the flow run reached.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

from sim.targets.protocol import TargetOptions, TargetState
from sim.targets.pydantic_ai.prefect_env import DB_NAME, RESULTS_DIR

FLOW_RUN_NAME = "pay-INV-42"  # sim.targets.pydantic_ai.prefect_agent.FLOW_RUN_NAME


class _FlowRun(TypedDict):
    """A flow run's row in the Prefect API's database, with its state's result artifact."""

    state_type: str | None
    state_name: str | None
    parameters: str | None
    data: str | None


def _flow_runs(db: Path) -> list[_FlowRun]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT fr.state_type, fr.state_name, fr.parameters, a.data FROM flow_run fr "
            "LEFT JOIN flow_run_state s ON s.id = fr.state_id "
            "LEFT JOIN artifact a ON a.id = s.result_artifact_id "
            "WHERE fr.name = ? ORDER BY fr.created",
            (FLOW_RUN_NAME,),
        ).fetchall()
        return [
            {
                "state_type": row["state_type"],
                "state_name": row["state_name"],
                "parameters": row["parameters"],
                "data": row["data"],
            }
            for row in rows
        ]
    finally:
        conn.close()


def _task_results(results: Path) -> list[object]:
    """Every task result persisted in the point's storage (a file that holds a whole record; a
    flow's result file holds the value alone, its metadata being in the API's database)."""
    # Prefect reads its settings when imported: only where a point's state is read
    from prefect._internal.result_records import ResultRecord

    out: list[object] = []
    for path in sorted(results.iterdir()) if results.is_dir() else []:
        try:
            out.append(ResultRecord.deserialize(path.read_bytes()).result)
        except ValueError:  # pydantic's ValidationError: not a whole record
            continue
    return out


def _flow_result(metadata: str | None) -> Any:
    """A completed flow run's persisted result, by the metadata its result artifact holds."""
    # Prefect reads its settings when imported: only where a point's state is read
    from prefect._internal.result_records import ResultRecord

    if not metadata:
        raise ValueError("the completed flow run has no result artifact (was it persisted?)")
    key = json.loads(metadata)["storage_key"]
    data = Path(key).read_bytes()
    return ResultRecord.deserialize_from_result_and_metadata(data, metadata.encode()).result


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    """The flow runs' inputs and states, the calls the model's persisted responses asked for,
    and, once a flow run completed, the messages of its persisted result."""
    del options
    # pydantic-ai (its extra), imported where a point's state is read, not with the registry
    from sim.targets.pydantic_ai.script import history, record_calls

    db = point_dir / DB_NAME
    runs = _flow_runs(db) if db.exists() else []
    if not runs:
        return TargetState()
    state = TargetState(exists=True)
    for run in runs:
        state.inputs.append(str(json.loads(run["parameters"] or "{}").get("prompt")))
    for value in _task_results(point_dir / RESULTS_DIR):
        record_calls(value, state)
    done = [run for run in runs if run["state_type"] == "COMPLETED"]
    if not done:
        state.pending = [str(run["state_name"]) for run in runs[-1:]]
        return state
    state.finished = True
    result = _flow_result(done[-1]["data"])
    history(result.all_messages(), state)
    state.answer = str(result.output)
    return state
