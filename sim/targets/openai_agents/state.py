"""What the caller's durable state holds, read in the parent as a fresh reader would.

``session``: the conversation items of the ``SQLiteSession``, read by a new ``SQLiteSession`` on
the same file (the SDK's own reader; it recovers nothing). ``run_state``: the caller's saved
``RunState`` file, loaded with ``RunState.from_string`` (so a file the SDK cannot read is an
error here too), its history taken from the serialized original input and generated items.
Either way the items are Responses-format dicts, turned into one comparable row each, so the
two modes' histories read alike.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agents import RunState, SQLiteSession

from sim.targets.openai_agents.agent import DB_NAME, RUN_ID, STATE_NAME, build_agent
from sim.targets.protocol import TargetOptions, TargetState


def read_state(point_dir: Path, options: TargetOptions) -> TargetState:
    if options.durability == "run_state":
        return _read_run_state(point_dir)
    return _read_session(point_dir)


def _read_session(point_dir: Path) -> TargetState:
    path = point_dir / DB_NAME
    if not path.exists():
        return TargetState()
    session = SQLiteSession(RUN_ID, str(path))
    try:
        items: list[object] = list(asyncio.run(session.get_items()))
    finally:
        session.close()
    state = TargetState(exists=bool(items))
    _fill(state, items)
    return state


def _read_run_state(point_dir: Path) -> TargetState:
    path = point_dir / STATE_NAME
    if not path.exists():
        return TargetState()
    text = path.read_text(encoding="utf-8")
    # The SDK's own loader must accept the file (it needs the agent the caller built).
    agent = build_agent("reader", None, approval=True)
    loaded = asyncio.run(RunState.from_string(agent, text))
    data = json.loads(text)
    original = data["original_input"]
    items: list[object] = (
        [{"role": "user", "content": original}] if isinstance(original, str) else []
    )
    if not isinstance(original, str):
        items += list(original)
    items += [
        g["raw_item"]
        for g in data["generated_items"]
        if g.get("type") != "tool_approval_item"  # the call itself is its own item
    ]
    state = TargetState(exists=True)
    _fill(state, items)
    state.pending += [f"approve {i.tool_name}" for i in loaded.get_interruptions()]
    return state


def _fill(state: TargetState, items: list[object]) -> None:
    """History rows, inputs, calls and results per tool, and whether the last item answers."""
    names: dict[str, str] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        kind, role = item.get("type"), item.get("role")
        if role == "user":
            content = item.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            state.inputs.append(text)
            state.history.append(f"user: {text}")
        elif kind == "function_call":
            name, call_id = str(item["name"]), str(item["call_id"])
            names[call_id] = name
            state.calls.setdefault(name, []).append(call_id)
            state.history.append(f"model: calls {name}")
        elif kind == "function_call_output":
            call_id = str(item["call_id"])
            name = names.get(call_id, "?")
            state.results.setdefault(name, []).append(call_id)
            state.history.append(f"tool {name}: {item.get('output')}")
        elif role == "assistant" and kind in (None, "message"):
            text = "".join(str(c.get("text", "")) for c in item.get("content", []))
            state.history.append(f"model: {text}")
    last = items[-1] if items else None
    state.finished = isinstance(last, dict) and last.get("role") == "assistant"
    if state.finished:
        state.answer = state.history[-1].removeprefix("model: ")
    elif last is not None:
        kind = last.get("type") or last.get("role") if isinstance(last, dict) else None
        state.pending = ["model call" if kind in ("user", "function_call_output") else str(kind)]
