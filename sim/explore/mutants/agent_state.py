"""Mutants of agent state and compaction (docs/architecture.md, 1.7 and 1.8): the mutation
revision, the provider cursor, and which summaries a compaction may apply."""

from __future__ import annotations

from durable import scheduler as scheduler_mod
from durable import state as state_mod
from durable.events import CompactionApplied, Event, FileChanged
from durable.model import ModelError
from durable.state import State
from durable.state_model import Intent
from durable.tasks import TaskEnv, live_task
from durable.tasks import compaction as compaction_task_mod
from durable.tasks import tool as tool_mod
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When


@mutant(
    name="revision-bumped-on-replay",
    bug_class="a re-verified edit bumps the mutation revision again",
    scenario="plan_edit_validate",
    caught_by=("I18",),
    # The verified edit moves the mutation revision from 0 to 2.
    witness=LabelledCrash(
        label="tool.effect:workspace.replace#call-1", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="24:after:process",
)
def revision_bumped_on_replay(mp: Patcher) -> None:
    """An edit its verifier finds applied after a crash bumps the mutation revision twice (once
    for the execution the crash hid, once for the verification), so a validation of the files
    as they are looks stale and revisions no longer count applied edits."""
    original = tool_mod.verified_events

    def verified_events(state: State, intent: Intent, output: str) -> list[Event]:
        return [
            e.model_copy(update={"revision": e.revision + 1}) if isinstance(e, FileChanged) else e
            for e in original(state, intent, output)
        ]

    mp.setattr(tool_mod, "verified_events", verified_events)


@mutant(
    name="cursor-reused-without-resume",
    bug_class="a provider cursor sent although the model said it cannot resume from it",
    scenario="plan_edit_validate",
    caught_by=("I18",),
    witness=None,  # the second request continues from resp-1-0, declared not resumable
    first_kill="none",
)
def cursor_reused_without_resume(mp: Patcher) -> None:
    """A request continues from the latest provider cursor whether or not the model said it can
    resume from it (the reducer, patched alike, accepts the pin: the log is consistent with the
    bug, only the model's declaration contradicts it)."""

    def resumable_cursor(self: State) -> str | None:
        return self.cursor.cursor if self.cursor is not None else None

    mp.setattr(state_mod.State, "resumable_cursor", resumable_cursor)


def _unchecked_compaction_applied(state: State, event: CompactionApplied, sequence: int) -> None:
    """The reducer's compaction application without its freshness and boundary guards (a
    runtime whose reducer trusts the writer): the summary stands in wherever the event says."""
    compaction = state.compactions[event.compaction_id]
    compaction.status, compaction.summary = "applied", event.summary
    state.window = event.compaction_id


@mutant(
    name="stale-summary-applied",
    bug_class="a compaction whose intent predates the crash applied on recovery (not settled "
    "stale)",
    scenario="compaction_mid_conversation",
    caught_by=("I19",),
    # Between the first compaction's intent and its application.
    witness=LabelledCrash(label="store.commit#16", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="88:after:process",
)
def stale_summary_applied(mp: Patcher) -> None:
    """A compaction task resumed after a crash does not settle its intent stale: it sends the
    summarisation request the dead process pinned again and applies the answer, without
    checking that the intent predates the crash (so a summary the dead incarnation asked for is
    applied by the next one). The reducer's guard is patched away too."""

    async def run_compaction(env: TaskEnv, task_id: str) -> None:
        task = live_task(env.journal.state, task_id)
        if task is None:
            return
        compaction_id = str(task.data["compaction_id"])
        summary = await compaction_task_mod._summarise(env, task_id)
        assert not isinstance(summary, ModelError), "the fake model always summarises"
        await env.journal.commit(lambda s: compaction_task_mod._apply(s, compaction_id, summary))

    mp.setitem(scheduler_mod._HANDLERS, "compaction", run_compaction)
    mp.setitem(state_mod._APPLY, CompactionApplied, _unchecked_compaction_applied)
