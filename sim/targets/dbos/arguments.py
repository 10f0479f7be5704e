"""A DBOS ``--app`` run's ``--input``: the workflow's arguments, read the same way in the parent
(checked before any child starts) and in each child (``sim.targets.dbos.app``). Never imports
dbos."""

from __future__ import annotations

from sim.targets.shapes import Json


def workflow_arguments(given: Json) -> tuple[list[Json], dict[str, Json]]:
    """``--input``'s JSON as the workflow's arguments: a list is its positional arguments; an
    object ``{"args": [...], "kwargs": {...}}`` (either key optional) both. Anything else is a
    ``ValueError`` naming the shape: checked in the parent, without dbos, before any child
    starts, and read again in each child (``sim.targets.dbos.app``)."""
    if isinstance(given, list):
        return given, {}
    if isinstance(given, dict) and set(given) <= {"args", "kwargs"}:
        args, kwargs = given.get("args", []), given.get("kwargs", {})
        if isinstance(args, list) and isinstance(kwargs, dict):
            return args, kwargs
    raise ValueError('expected a JSON list of arguments, or {"args": [...], "kwargs": {...}}')
