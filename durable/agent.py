"""Pure builders of the agent-state events a tool call's outcome adds (docs/architecture.md,
1.7): a file edit whose effect is known changes the file and bumps the mutation revision once;
a validation records its verdict at the revision its call saw.

They go into the same commit as the call's result, so a crash either loses both (the call is
recovered by its policy, and the outcome recorded then) or keeps both: a call's revision bump
cannot be lost or repeated by a crash.
"""

from __future__ import annotations

from durable.events import Event, FileChanged, ValidationRecorded
from durable.state import Intent, State


def outcome_events(
    state: State, intent: Intent, *, ok: bool, known: bool = True, offset: int = 0
) -> list[Event]:
    """The agent-state events of ``intent``'s result: ``ok`` whether the call succeeded (its
    result is not an error); ``known`` False when nobody knows whether its effect landed (an
    operator's resolution, a run stopped with the call in flight). An edit that succeeded
    records its planned after-hash; one whose effect is unknown records no hash but still
    bumps the revision, so no earlier validation counts for the files it may have changed.
    ``offset``: revisions already taken by earlier events of the same commit."""
    events: list[Event] = []
    edit = intent.edit
    if edit is not None and (ok or not known):
        events.append(
            FileChanged(
                task_id=intent.task_id,
                call_id=intent.call_id,
                path=edit.path,
                before_hash=edit.before_hash,
                after_hash=edit.after_hash if known else None,
                revision=state.mutation_revision + 1 + offset,
            )
        )
    if intent.validates is not None and known:
        assert intent.revision is not None, f"validation intent {intent.call_id} has no revision"
        events.append(
            ValidationRecorded(
                task_id=intent.task_id,
                call_id=intent.call_id,
                criterion=intent.validates,
                passed=ok,
                revision=intent.revision,
            )
        )
    return events
