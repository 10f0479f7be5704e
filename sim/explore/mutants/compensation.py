"""Mutants of compensation and sub-agents (docs/architecture.md, 1.5 "Compensation" and 1.9):
an abandoned run's undo plan and its keys, and the ids that tie a delegating call to one child
conversation across crashes."""

from __future__ import annotations

import dataclasses

from durable import runs as runs_mod
from durable import subagent as subagent_mod
from durable.state import State
from durable.state_model import Intent
from durable.tasks import TaskEnv
from durable.tasks import compensation as compensation_mod
from durable.tools import ToolContext
from sim.explore.mutants.core import Patcher, mutant
from sim.run.labels import LabelledCrash
from sim.world.faults import CrashKind, When


@mutant(
    name="compensate-forward-order",
    bug_class="an abandoned run's compensations applied in the original order, not the reverse",
    scenario="abandon_restores_files",
    caught_by=("I17",),
    witness=None,  # config.yaml, edited twice, is put back to its second edit's pre-image last
    first_kill="none",
)
def compensate_forward_order(mp: Patcher) -> None:
    """An abandoned run undoes its calls in the order they took effect, not the reverse: a file
    edited twice ends at its pre-image of the second edit, not its original content."""
    original = runs_mod.compensation_plan

    def compensation_plan(state: State, run_id: str) -> list[str]:
        return original(state, run_id)[::-1]

    mp.setattr(runs_mod, "compensation_plan", compensation_plan)


@mutant(
    name="compensation-key-per-attempt",
    bug_class="a compensation re-run after a crash under a new key (the service cannot dedupe it)",
    scenario="abandon_restores_files",
    caught_by=("I17",),
    witness=LabelledCrash(
        label="tool.effect:workspace.restore#call-4.undo", when=When.AFTER, kind=CrashKind.PROCESS
    ),
    first_kill="112:after:process",
)
def compensation_key_per_attempt(mp: Patcher) -> None:
    """A compensation re-run after a crash carries a new key (one per attempt, not per call), so
    the service cannot dedupe it and applies it a second time."""
    original = compensation_mod.compensation_context

    def compensation_context(env: TaskEnv, intent: Intent, attempt: str) -> ToolContext:
        context = original(env, intent, attempt)
        if attempt == "first":
            return context
        key = f"{context.idempotency_key}:{attempt}"
        return dataclasses.replace(context, idempotency_key=key)

    mp.setattr(compensation_mod, "compensation_context", compensation_context)


@mutant(
    name="subagent-fresh-request-id",
    bug_class="a delegation re-run after a crash submits to its child under a new request id (a "
    "second task in the child)",
    scenario="delegate_to_subagent",
    caught_by=("I20",),
    # The first crash after the delegating call's intent: its recovery re-runs the delegation.
    witness=LabelledCrash(label="store.commit#5", when=When.AFTER, kind=CrashKind.PROCESS),
    first_kill="21:after:process",
)
def subagent_fresh_request_id(mp: Patcher) -> None:
    """A delegating call re-run after a crash submits its task to the child under a request id
    of its attempt, not of its call: the child's dedupe cannot see the first submission, so the
    recovered delegation starts a second task in the child."""
    original = subagent_mod.child_ids

    def child_ids(ctx: ToolContext) -> tuple[str, str]:
        conversation_id, request_id = original(ctx)
        if ctx.attempt == "first":
            return conversation_id, request_id
        return conversation_id, f"{request_id}:{ctx.attempt}"

    mp.setattr(subagent_mod, "child_ids", child_ids)
