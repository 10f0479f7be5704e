"""Compaction: summarise a prefix of the conversation when its context grows too large
(docs/architecture.md, 1.8).

A generation turn's ``prepare`` starts a compaction, instead of pinning its request, when the
context it would send passes ``RuntimeConfig.context_budget_tokens`` or when the model refused the
turn's last request as too long ("context exceeded"). One commit writes the intent
(``compaction_started``: the prefix -- the first ``through`` messages as seen through the current
window -- and its digest), creates the compaction task and makes the turn wait on it. The task
sends the summarisation request and applies the summary (``compaction_applied``) in the commit
after the response: a turn boundary, since the only other live task of the run is the waiting
turn. From then on every request's context is the summary followed by the messages after
``through``.

Freshness: a summary is applied only by the incarnation (lease epoch) that wrote its intent, and
only while the prefix still has the digest the intent recorded. A recovered process that finds an
open intent settles it ``stale`` and, if the context is still too large, starts a new compaction
over the current prefix. It does not re-send the old request: the summary lived only in the dead
process's memory, a re-send costs the same one model call as a new compaction, and a new intent
covers what the conversation has become (the prefix may have grown), so freshness needs no
comparison across a crash.

The token estimate is deterministic and model-independent: the length of the context's canonical
JSON divided by four, rounded up (``estimate_tokens``).
"""

from __future__ import annotations

from typing import Any

from durable.codec import canonical_json
from durable.codec import sha256_hex as _sha256_hex
from durable.config import RuntimeConfig
from durable.events import CompactionStarted, Event, TaskCreated, TaskWaiting
from durable.ports import Ids
from durable.state import State, Task

CHARS_PER_TOKEN = 4


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """The context's size in tokens: characters of its canonical JSON / 4, rounded up."""
    return -(-len(canonical_json(messages)) // CHARS_PER_TOKEN)


def context_digest(messages: list[dict[str, Any]]) -> str:
    """The digest an intent records of its prefix (and ``reduce`` checks again when applying)."""
    return _sha256_hex(canonical_json(messages))


def summary_message(summary: str) -> dict[str, Any]:
    """How a summary stands in the context: the first message, role ``summary``."""
    return {"role": "summary", "content": summary}


def start_compaction(
    state: State, task: Task, config: RuntimeConfig, ids: Ids, *, forced: bool
) -> list[Event]:
    """The events that start a compaction for generation turn ``task`` in ``prepare``, or [] if
    none is due: the context is within budget (and the model did not refuse it), or the turn's
    last compaction failed (it proceeds uncompacted), or nothing past the current window can be
    compacted. The prefix keeps the latest message (the turn's input or last tool round) out."""
    budget = config.context_budget_tokens
    if not forced and budget is None:
        # Decided before the context is built: measuring it serialises every message, on every
        # turn of every run without a budget (a sixth of a 200-turn run).
        return []
    window = state.window
    context = state.context(len(state.messages), window)
    tokens = estimate_tokens(context)
    if not forced and budget is not None and tokens <= budget:
        return []
    mine = [c for c in state.compactions.values() if c.requested_by == task.id]
    if mine and mine[-1].status == "failed":
        return []
    through = len(state.messages) - 1
    floor = state.compactions[window].through if window else 0
    if through <= floor:
        return []
    compaction_id = ids.new("compaction")
    task_id = ids.new("task")
    return [
        TaskCreated(
            task_id=task_id,
            kind="compaction",
            run_id=task.run_id,
            phase="summarise",
            data={"compaction_id": compaction_id},
        ),
        CompactionStarted(
            compaction_id=compaction_id,
            task_id=task_id,
            requested_by=task.id,
            run_id=task.run_id,
            model=config.model_name,
            through=through,
            window=window,
            prefix_digest=context_digest(state.context(through, window)),
            tokens=tokens,
            reason="context_exceeded" if forced else "budget",
        ),
        TaskWaiting(task_id=task.id, on=[task_id]),
    ]
