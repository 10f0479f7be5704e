"""The record of one real-process run (``durable-sim realcrash``): what outlives a killed process
besides the store and the services, kept in an append-only file beside them.

Every record the simulator keeps in memory across its processes (the machine's boundaries,
crashes, commits and lease grants; the client's view; the model's calls; the ids issued) is, in
the real host, a named container of this module: a list, dict or set whose every change is
also written to the file as one JSON line (the value pickled: parent and children run the same
code), one ``os.write`` each, so a SIGKILL never leaves half of one (and the page cache keeps
it). A restarted process replays the file into the same containers and carries on where the
killed one stopped; the parent replays it into a ``RunResult``.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path
from typing import Any


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every complete entry of a record file (a line cut short by a kill is not one)."""
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_bytes().split(b"\n"):
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _encode(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def _decode(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


def replay(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The containers the entries built, by name (a list, a dict or a set)."""
    state: dict[str, Any] = {}
    for entry in entries:
        name, op, value = entry["n"], entry["op"], _decode(entry["v"])
        if op == "append":
            state.setdefault(name, []).append(value)
        elif op == "set":
            state.setdefault(name, {})[value[0]] = value[1]
        else:
            state.setdefault(name, set()).add(value)
    return state


class PointLog:
    """One record file: its entries so far (replayed), and new named containers on it."""

    def __init__(self, path: Path) -> None:
        self.state = replay(read_entries(path))
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, name: str, op: str, value: Any) -> None:
        line = json.dumps({"n": name, "op": op, "v": _encode(value)}, separators=(",", ":"))
        os.write(self._fd, (line + "\n").encode("ascii"))

    def list(self, name: str) -> LoggedList:
        return LoggedList(self, name, self.state.get(name, []))

    def dict(self, name: str) -> LoggedDict:
        return LoggedDict(self, name, self.state.get(name, {}))

    def set(self, name: str) -> LoggedSet:
        return LoggedSet(self, name, self.state.get(name, set()))


class LoggedList(list[Any]):
    """A list whose appends are written to the record."""

    def __init__(self, log: PointLog, name: str, items: list[Any]) -> None:
        super().__init__(items)
        self._log, self._name = log, name

    def append(self, item: Any) -> None:
        super().append(item)
        self._log.write(self._name, "append", item)


class LoggedDict(dict[Any, Any]):
    """A dict whose assignments are written to the record."""

    def __init__(self, log: PointLog, name: str, items: dict[Any, Any]) -> None:
        super().__init__(items)
        self._log, self._name = log, name

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self._log.write(self._name, "set", (key, value))


class LoggedSet(set[Any]):
    """A set whose additions are written to the record."""

    def __init__(self, log: PointLog, name: str, items: set[Any]) -> None:
        super().__init__(items)
        self._log, self._name = log, name

    def add(self, item: Any) -> None:
        super().add(item)
        self._log.write(self._name, "add", item)
