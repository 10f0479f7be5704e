"""The JSON shapes that cross a target's process boundary, and the narrowing they need.

A point's children write their trace rows and notes as JSON lines (``sim.targets.boundaries``)
and the parent reads them back with ``json.loads``: what comes back is a JSON value, not the
Python object the child had, so a reader narrows each field it uses. ``Json`` is that value;
the helpers below narrow it the way the readers did before the rows were typed (``int(...)``
on a field the writer stored as a number), raising the same ``TypeError`` on anything else.
"""

from __future__ import annotations

from typing import TypeAlias, TypedDict

#: A JSON document as the standard library reads it.
Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None

#: One row of a trace file as read back (``read_trace``): a boundary (``"t": "b"``), a crash
#: or a note, each a JSON object whose fields the writer chose.
TraceRow: TypeAlias = dict[str, Json]


class ScriptCall(TypedDict):
    """A tool call of a model's turn, as ``target record`` writes it (and ``--model-script``
    reads it back): the tool's name and its arguments."""

    name: str
    args: dict[str, object]


class ScriptTurn(TypedDict):
    """One model turn of a recorded script: the text it said and the tools it called. The
    recording child writes these as JSON; the parent reads them back and checks them."""

    content: str
    tool_calls: list[ScriptCall]


def as_int(value: Json) -> int:
    """``int(value)`` for a JSON number or numeric string (a trace's index, a line number);
    ``TypeError`` for a list, an object or null, as ``int`` itself raises."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"int() argument must be a string or a number, not {type(value).__name__}")


def as_object(value: Json) -> dict[str, Json]:
    """``value`` when it is a JSON object (a note's nested document); ``TypeError`` otherwise,
    where a reader indexing it would have failed."""
    if isinstance(value, dict):
        return value
    raise TypeError(f"expected a JSON object, not {type(value).__name__}")


def as_texts(value: Json) -> list[str]:
    """``value`` when it is a JSON list of strings (a note's pending work, its history rows), as
    a new list; ``TypeError`` for anything else, which no writer of a note produces."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item for item in value if isinstance(item, str)]
    raise TypeError(f"expected a JSON list of strings, not {type(value).__name__}")


def as_text_or_none(value: Json) -> str | None:
    """``value`` when it is a JSON string or null (a note's answer); ``TypeError`` otherwise."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected a JSON string or null, not {type(value).__name__}")


def as_list(value: Json) -> list[Json]:
    """``value`` when it is a JSON list (a script turn's tool calls); ``TypeError`` otherwise,
    where a reader iterating it would have read something the kit's check refuses."""
    if isinstance(value, list):
        return value
    raise TypeError(f"expected a JSON list, not {type(value).__name__}")
