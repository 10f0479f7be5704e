"""Canonical encoding, and the memos that keep the runtime from encoding the same thing twice.

**Canonical JSON** (sorted keys, no whitespace, ASCII with ``\\u`` escapes) is the only
serialisation checksums are computed over, so the same record, checkpoint or lease has the same
checksum in every process and under every ``PYTHONHASHSEED``; ``sha256_hex`` is the one digest.

**Memos.** Serialising a record to canonical JSON (for its checksum, its line, its verification)
costs more than anything else the runtime does per event, and a checkpoint serialises the whole
state. Everything serialised is frozen (records, checkpoints, leases, a state's messages and
results), so a value derived from one never goes stale: the memos only save the repeats, and
change no byte (tests/durable/test_events_memo.py, tests/sim/run/test_state_dump.py). They all
live here, with their sizes, so what the runtime caches is one list. Each is bounded, so a
long-lived process does not grow with its history; a miss only costs the computation it would
have cost anyway.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any, Generic, TypeVar

from pydantic import BaseModel


def canonical_json(value: Any) -> str:
    """The one serialisation checksums are computed over (stable across processes).

    ASCII-only: non-ASCII characters are ``\\u`` escapes, so any Python string — even one
    holding a lone surrogate from a model's or a tool's output — encodes to UTF-8 without error.
    """
    return _CANONICAL.encode(value)


# ``json.dumps`` with any option builds a new encoder per call; one shared encoder is the same
# serialisation without that cost (it keeps no state between calls).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_json(text: str | bytes) -> Any:
    """``json.loads``: unlike pydantic's JSON parser it accepts the lone-surrogate escapes that
    canonical JSON may contain (a model or tool can produce any Python string)."""
    return json.loads(text)


_K = TypeVar("_K")
_V = TypeVar("_V")


class Memo(Generic[_K, _V]):
    """A bounded memo of values derived from frozen objects, oldest entries evicted first.

    ``by_identity`` memos key on the object itself (a weak reference checked on every hit: an
    id reused by a later object never answers for the dead one); the others key on an immutable
    value (a line's bytes).
    """

    def __init__(self, limit: int, *, by_identity: bool) -> None:
        self._limit = limit
        self._by_identity = by_identity
        self._entries: dict[Any, Any] = {}

    def get(self, key: _K) -> _V | None:
        if not self._by_identity:
            return self._entries.get(key)
        entry = self._entries.get(id(key))
        if entry is None or entry[0]() is not key:
            return None
        return entry[1]  # type: ignore[no-any-return]  # by identity they hold (ref, _V)

    def put(self, key: _K, value: _V) -> None:
        entries = self._entries
        if len(entries) >= self._limit:
            del entries[next(iter(entries))]
        if self._by_identity:
            entries[id(key)] = (weakref.ref(key), value)
        else:
            entries[key] = value

    def clear(self) -> None:
        self._entries.clear()


# -- the memos -----------------------------------------------------------------------------------
# Typed by ``BaseModel``, not by the record, checkpoint and lease classes they hold: this module
# is the leaf every other one imports, so it names none of theirs (tests/project/test_layers.py
# checks ``durable/`` has no import cycle); each reader casts what it put in.

# Records (``durable.events.EventRecord``): the line of a sealed record, and records known to
# verify, by identity -- the same record used to be serialised up to four times (sealed, checked
# by the store, written, verified on every read). Sized for a few thousand records in flight (a
# conversation's recent log, a recovery's reads).
RECORD_LINES: Memo[BaseModel, str] = Memo(8192, by_identity=True)
RECORDS_VERIFIED: Memo[BaseModel, bool] = Memo(65536, by_identity=True)

# Lines already parsed, by their exact bytes (or text): parsing is a pure function of the line,
# and records are frozen, so the same line may share one record. A recovery re-reads the whole
# log; in a forked sweep child every line the parent read is parsed (and verified) already. A
# line that fails to parse is never remembered (``durable.events.parse_record``).
PARSED_LINES: Memo[str | bytes, BaseModel] = Memo(8192, by_identity=False)

# Checkpoints (``durable.store.base.Checkpoint``): a checkpoint is the whole reduced state, and
# serialising it twice (checksum, then write) was a fifth of a long run. By identity, as records.
CHECKPOINT_TEXTS: Memo[BaseModel, str] = Memo(64, by_identity=True)
CHECKPOINTS_VERIFIED: Memo[BaseModel, bool] = Memo(256, by_identity=True)

# Lease files read and verified, by their exact bytes (``durable.store.file.decode_lease``):
# every fenced operation reads the lease, and its bytes change only when it is renewed. A
# ``Lease`` is frozen, so equal bytes may share one; a file that fails is never remembered.
LEASE_FILES: Memo[bytes, BaseModel] = Memo(1024, by_identity=False)

# The JSON dump of each frozen part of a state (a message, a tool result, a pinned request, a
# tool call), by identity: a checkpoint dumps the whole state, and without this every checkpoint
# of a run dumped again every message and result since its start (a checkpoint's cost grew with
# the run: a third of a 200-turn run). Sized for a long conversation's frozen parts.
FROZEN_DUMPS: Memo[BaseModel, dict[str, Any]] = Memo(32768, by_identity=True)


def frozen_dump(part: BaseModel) -> dict[str, Any]:
    """``part.model_dump(mode="json")`` of a frozen model, computed once per object. The dict is
    shared by every caller: read it, never change it."""
    assert part.model_config.get("frozen"), type(part).__name__
    dumped = FROZEN_DUMPS.get(part)
    if dumped is None:
        dumped = part.model_dump(mode="json")
        FROZEN_DUMPS.put(part, dumped)
    return dumped
