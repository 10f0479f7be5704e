"""What the ADK session holds, read as a fresh reader would: a new ``SqliteSessionService`` on
the point's file (ADK's own reader), under the target's environment (``sim.targets.reader``).

The events give the history (one comparable row each: who, and the call, result or text, with
no ADK id in it), the calls and results per tool, the user's texts and the answer.

The tool result ADK writes when a tool asks for a confirmation (an error, "requires
confirmation", its call id in the event's ``requested_tool_confirmations``) is neither a result
of the tool nor a row of the history: it is ADK's placeholder, not a message. When every
response awaits confirmation, ADK 2.13.0's ``postprocess_handle_function_calls_async`` yields the
``adk_request_confirmation`` call first and the placeholder after it, each appended on its own
(when a response is settled it yields the responses first, "so callers stopping at" the request
"still persist them": a caller that stops at the request is expected, and persists no
placeholder). The confirmed tool's result replaces it in what the model is sent (the contents
keep a call's last response) and the confirmation processor does not count it. A kill between
the two appends leaves a session without it, from which the human is asked once, answers, and
the tool runs once, as in the fault-free run: the history the judge compares is the
conversation's, which such a session keeps whole (the request and the answer are rows of it).

Also measured, never judged: the session's size, per model turn -- the bytes of the events each
turn appended (ADK stores each event as one JSON row) and the session's total after it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from google.adk.events import Event
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from sim.targets.adk.agent import (
    APP_NAME,
    CONFIRMATION,
    DB_NAME,
    SESSION_ID,
    USER_ID,
    finished,
    parts_of,
)
from sim.targets.protocol import TargetOptions, TargetState


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    del options
    return read_session(point_dir / DB_NAME, APP_NAME, SESSION_ID)


def read_session(path: Path, app_name: str, session_id: str) -> TargetState:
    """The state of one session of the SQLite file at ``path`` (the bundled agent's, or a
    user's app's: ``sim.targets.adk.app_state``), read by a fresh ``SqliteSessionService``."""
    if not path.exists():
        return TargetState()
    events = asyncio.run(_events(path, app_name, session_id))
    if events is None:
        return TargetState()
    state = TargetState(exists=True)
    for event in events:
        _add(state, event)
    state.finished = finished(events)
    texts = [p.text for p in parts_of(events[-1]) if p.text] if events else []
    said = [p.text for e in events if e.author != "user" for p in parts_of(e) if p.text]
    if state.finished:
        state.answer = said[-1] if said else None
    elif events:
        state.pending = [f"after {events[-1].author}: {texts[0] if texts else 'no text'}"]
    else:
        state.pending = ["the user's message"]
    state.figures = session_sizes(path, session_id)
    return state


async def _events(path: Path, app_name: str, session_id: str) -> list[Event] | None:
    service = SqliteSessionService(str(path))
    session = await service.get_session(app_name=app_name, user_id=USER_ID, session_id=session_id)
    return None if session is None else list(session.events)


def _add(state: TargetState, event: Event) -> None:
    """One event into the state: its rows of history, its calls, results and user texts."""
    asking = set(event.actions.requested_tool_confirmations or {})
    for part in parts_of(event):
        call, response = part.function_call, part.function_response
        if call is not None and call.name == CONFIRMATION:
            state.history.append(f"{event.author}: asks the user to confirm")
        elif call is not None:
            state.calls.setdefault(str(call.name), []).append(str(call.id))
            state.history.append(f"{event.author}: calls {call.name} {call.args}")
        elif response is not None and response.name == CONFIRMATION:
            state.history.append(f"user: confirms {response.response}")
        elif response is not None and response.id in asking:
            continue  # ADK's placeholder while the human is asked: no message (see the module)
        elif response is not None:
            state.results.setdefault(str(response.name), []).append(str(response.id))
            state.history.append(f"{event.author}: {response.name} -> {response.response}")
        elif part.text:
            if event.author == "user":
                state.inputs.append(part.text)
            state.history.append(f"{event.author}: {part.text}")


def session_sizes(path: Path, session_id: str) -> dict[str, object]:
    """The session's size per model turn: a turn is a model event and the events after it up
    to the next one (its tools' results); the bytes are the JSON rows ADK stored."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT event_data FROM events WHERE session_id = ? ORDER BY timestamp, rowid",
            (session_id,),
        ).fetchall()
    finally:
        connection.close()
    turns: list[int] = []
    total = 0
    for (data,) in rows:
        size = len(data.encode("utf-8") if isinstance(data, str) else data)
        total += size
        if '"role":"model"' in (data if isinstance(data, str) else data.decode()) or not turns:
            turns.append(0)
        turns[-1] += size
    running = [sum(turns[: i + 1]) for i in range(len(turns))]
    return {
        "session_events": len(rows),
        "session_bytes": total,
        "turn_bytes": turns,
        "session_bytes_after_turn": running,
    }
