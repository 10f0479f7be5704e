"""What CrewAI's persisted flow state holds, read as a restart would find it: the newest row
``@persist`` saved for the flow id, by ``SQLiteFlowPersistence.load_state``'s own query (what
``kickoff(inputs={"id": ...})`` restores), on a read-only connection, under the target's
environment (``sim.targets.reader``).

The state's conversation gives the history (one comparable row per message: who, and the call,
result or text, with no call id in it), the calls and results per tool, the user's text and the
answer. Also measured, never judged: what ``@persist`` stored -- one row per completed method,
each the whole state as JSON (``save_state`` inserts and never prunes), so the file grows with
the square of the conversation: the rows, their bytes, and the method each was saved after.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sim.targets.crewai import DB_NAME, FLOW_ID
from sim.targets.crewai.conversation import Message, answer, calls, row, tool_name
from sim.targets.protocol import TargetOptions, TargetState


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    del options
    path = point_dir / DB_NAME
    if not path.exists():  # no process got as far as CrewAI's schema: nothing to open
        return TargetState()
    saved = _load(path)
    if saved is None:
        return TargetState()
    messages: list[Message] = list(saved.get("messages") or [])
    state = TargetState(exists=True)
    for message in messages:
        _add(state, messages, message)
    state.answer = answer(messages)
    state.finished = state.answer is not None
    if not state.finished:
        state.pending = [f"after {row(messages, messages[-1])}" if messages else "the request"]
    state.figures = saves(path)
    return state


def _load(path: Path) -> dict[str, Any] | None:
    """The flow's latest saved state, read as CrewAI's ``SQLiteFlowPersistence.load_state``
    reads it (the newest row of the flow's id), on a read-only connection: constructing CrewAI's
    class would set the file's journal mode and create its table, writing to what is judged."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'flow_states'"
        if connection.execute(table).fetchone() is None:  # killed before CrewAI's schema
            return None
        found = connection.execute(
            "SELECT state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id DESC LIMIT 1",
            (FLOW_ID,),
        ).fetchone()
    finally:
        connection.close()
    loaded: dict[str, Any] | None = None if found is None else json.loads(found[0])
    return loaded


def _add(state: TargetState, messages: list[Message], message: Message) -> None:
    """One message into the state: its history row, its calls, its result, the user's text."""
    role = message.get("role")
    if role == "user":
        state.inputs.append(str(message.get("content")))
    for call in calls([message]):
        state.calls.setdefault(str(call["function"]["name"]), []).append(str(call["id"]))
    if role == "tool":
        call_id = str(message["tool_call_id"])
        state.results.setdefault(tool_name(messages, call_id), []).append(call_id)
    state.history.append(row(messages, message))


def saves(path: Path) -> dict[str, object]:
    """What ``@persist`` stored for the flow: a row per completed method, each the whole state."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT method_name, state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id",
            (FLOW_ID,),
        ).fetchall()
    finally:
        connection.close()
    sizes = [len(str(data).encode("utf-8")) for _, data in rows]
    return {
        "state_saves": len(rows),
        "state_bytes": sum(sizes),
        "saved_after": [str(method) for method, _ in rows],
        "save_bytes": sizes,
    }
