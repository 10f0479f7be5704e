"""Mutants of the model calls and their retries (docs/architecture.md, 1.3 and 1.5): a pinned
request re-sent byte for byte after a crash, a retry sent at its committed deadline, and no
request after the run has stopped."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from durable import scheduler as scheduler_mod
from durable.events import ModelRequested, TaskCheckpoint
from durable.model import ModelDriver, ModelError, ModelRequest, ModelResponse
from durable.tasks import TaskEnv, live_task
from durable.tasks import generation as generation_mod
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When


@mutant(
    name="stale-window",
    bug_class="a settled exit leaves resumable state: the next message is displaced by the old "
    "window",
    scenario="model_error_then_message",
    caught_by=("I4",),
    witness=None,  # the second run's request lacks its own input
    first_kill="none",
)
def stale_context_window(mp: Patcher) -> None:
    """The pinned request keeps the first run's window (cutoff 1), so the next run's request
    does not contain its own input."""
    original = ModelRequested  # the class generation builds its requests with

    def model_requested(**fields: Any) -> ModelRequested:
        return original(**{**fields, "cutoff": min(fields["cutoff"], 1)})

    mp.setattr(generation_mod, "ModelRequested", model_requested)


@mutant(
    name="retry-after-fatal",
    bug_class="a fatal model error settles the run, then the request is sent again",
    scenario="model_error_then_message",
    caught_by=("I4",),
    witness=None,  # a model call for the first run after it stopped
    first_kill="none",
)
def retry_after_fatal_error(mp: Patcher) -> None:
    """After a fatal model error settled the run, the task sends the request once more."""
    original = generation_mod._model_failed

    async def _model_failed(env: TaskEnv, task_id: str, attempt: int, error: ModelError) -> bool:
        out = await original(env, task_id, attempt, error)
        if not error.retryable:
            state = env.journal.state
            request = ModelRequest(
                conversation_id=state.conversation_id,
                task_id=task_id,
                model=env.config.model_name,
                messages=state.context(len(state.messages)),
                attempt=attempt + 1,
            )
            assert env.model is not None, "a task that sent a request has a model"
            try:
                await env.model.complete(request)
            except ModelError:
                pass
        return out

    mp.setattr(generation_mod, "_model_failed", _model_failed)


@mutant(
    name="resend-twice",
    bug_class="the pinned request re-sent twice on recovery",
    scenario="read_edit_answer",
    caught_by=("I11",),
    witness=LabelledCrash(label="store.commit#3", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="14:after:process",
)
def resend_twice_on_recovery(mp: Patcher) -> None:
    """A generation task resumed in phase ``request`` sends its pinned request twice."""
    original = generation_mod.run_generation

    async def run_generation(env: TaskEnv, task_id: str) -> None:
        state = env.journal.state
        task = live_task(state, task_id)
        if task is not None and task.phase == "request":
            pinned = state.pinned[task_id]
            request = ModelRequest(
                conversation_id=state.conversation_id,
                task_id=task_id,
                model=pinned.model,
                options=pinned.options,
                messages=state.context(pinned.cutoff),
                attempt=pinned.attempt,
            )
            assert env.model is not None, "a task that sent a request has a model"
            try:
                await env.model.complete(request)
            except ModelError:
                pass
        await original(env, task_id)

    mp.setitem(scheduler_mod._HANDLERS, "generation", run_generation)


@mutant(
    name="resend-differs",
    bug_class="the request re-sent on recovery differs from the pinned one",
    scenario="read_edit_answer",
    caught_by=("I11",),
    witness=LabelledCrash(label="model.call#1", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="17:after:process",
)
def resend_differs_on_recovery(mp: Patcher) -> None:
    """A generation task resumed in phase ``request`` re-sends a request rebuilt with a marker in
    its options (as runtimes that add retry hints or timestamps to a resumed prompt do): the
    model sees a different request than the one that was in flight."""
    original = generation_mod.run_generation

    class _Marking:
        def __init__(self, model: ModelDriver) -> None:
            self._model = model

        async def complete(self, request: ModelRequest) -> ModelResponse:
            options = {**request.options, "resumed": True}
            return await self._model.complete(request.model_copy(update={"options": options}))

    async def run_generation(env: TaskEnv, task_id: str) -> None:
        task = live_task(env.journal.state, task_id)
        if task is not None and task.phase == "request" and env.model is not None:
            env = dataclasses.replace(env, model=_Marking(env.model))
        await original(env, task_id)

    mp.setitem(scheduler_mod._HANDLERS, "generation", run_generation)


def _inline_retries(mp: Patcher) -> Callable[[TaskEnv], set[str]]:
    """Patch ``_model_failed`` to remember, per process (per journal), the retries the process
    entered itself, so a mutant can tell them from the retries it resumes after a crash."""
    failed = generation_mod._model_failed

    def inline(env: TaskEnv) -> set[str]:
        retries: set[str] = env.journal.__dict__.setdefault("_mutant_inline_retries", set())
        return retries

    async def _model_failed(env: TaskEnv, task_id: str, attempt: int, error: ModelError) -> bool:
        inline(env).add(task_id)
        return await failed(env, task_id, attempt, error)

    mp.setattr(generation_mod, "_model_failed", _model_failed)
    return inline


@mutant(
    name="retry-deadline-reset",
    bug_class="retry backoff deadline recomputed from now on resume",
    scenario="retry_backoff",
    caught_by=("I11",),
    witness=LabelledCrash(label="store.commit#4", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="18:after:process",
)
def retry_deadline_from_now(mp: Patcher) -> None:
    """A retry resumed after a crash does not wait for its committed deadline (the backoff is
    recomputed from "now" as already elapsed): a crash loop never waits."""
    original = generation_mod._retry
    inline = _inline_retries(mp)

    async def _retry(env: TaskEnv, task_id: str) -> bool:
        if task_id in inline(env):
            return await original(env, task_id)
        task = live_task(env.journal.state, task_id)
        assert task is not None
        prepare = TaskCheckpoint(
            task_id=task_id, phase="prepare", data={"attempt": int(task.data["attempt"])}
        )
        await env.journal.commit(lambda s: [prepare] if live_task(s, task_id) else [])
        return True

    mp.setitem(generation_mod._PHASES, "retry", _retry)


@mutant(
    name="retry-waits-again",
    bug_class="a resumed retry waits its whole backoff again from the restart",
    scenario="retry_backoff",
    caught_by=("I11",),
    # In the backoff: the restarted process waits a whole backoff again instead of retrying
    # at the committed deadline.
    witness=LabelledCrash(label="store.lease.renew#6", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="51:after:process",
)
def retry_waits_again(mp: Patcher) -> None:
    """A retry resumed after a crash waits its whole backoff again from the restart, ignoring
    the committed deadline (harmless-looking; a crash loop never gets its retry out)."""
    original = generation_mod._retry
    inline = _inline_retries(mp)

    async def _retry(env: TaskEnv, task_id: str) -> bool:
        if task_id not in inline(env):
            task = live_task(env.journal.state, task_id)
            assert task is not None
            attempt = int(task.data["attempt"])
            backoff = min(env.config.backoff_base_s * 2 ** (attempt - 2), env.config.backoff_max_s)
            await env.ports.clock.sleep_until(env.ports.clock.now() + backoff)
        return await original(env, task_id)

    mp.setitem(generation_mod._PHASES, "retry", _retry)
