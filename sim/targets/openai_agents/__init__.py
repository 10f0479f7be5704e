"""The openai-agents target: an OpenAI Agents SDK agent run by ``Runner.run`` with a scripted
``Model`` subclass (no network, tracing disabled) and two function tools.

Asked to pay invoice INV-42 (42 EUR) and email the receipt to ada@example.com, the agent calls
``charge_card`` (payments, declared exactly once), then ``send_receipt`` (outbox, declared
exactly once), then answers. The SDK is not a durable-execution engine: what survives a crash is
what the caller persists with it. Two ways the SDK documents (``--durability``):

- ``session``: a ``SQLiteSession`` on a file in the point directory ("Sessions": the SDK stores
  the conversation's items and prepends them to the next run). A restart runs the agent again
  with the same session; ``--resume`` says how the caller re-enters an unfinished turn:
  ``continue`` (the default: the session already holds the user's message, so the caller passes
  no new input, ``Runner.run(agent, [], session=session)``) or ``resend`` (the caller repeats
  the request it was serving, ``Runner.run(agent, USER_INPUT, session=session)``, as the
  Sessions page's ``same session, next message`` pattern does);
- ``run_state``: human in the loop ("Human-in-the-loop": ``needs_approval=True`` on
  ``charge_card``): the first run stops with an interruption, the caller saves
  ``result.to_state().to_string()`` to a file, approves, resumes with ``Runner.run(agent,
  state)`` and saves the final state; a restart loads the saved file with
  ``RunState.from_string``, approves and resumes.

Variants: ``as_is``; ``call_id`` (each effect keyed by the run's id and the tool call id: the
other targets' fix, sound only where the runtime keeps the call id -- here it does not when the
model is asked again); ``idempotent`` (keyed by the run's id, the tool and its canonical
arguments: what the re-asked model repeats, so it is stable across a recovery).

Crash boundaries (in the child only): the scripted model's call (``model.call#n``), each tool's
effect (``effect:{service}.{op}#{call_id}``), ``SQLiteSession.add_items`` (``session``) and the
caller's save of the ``RunState`` file (``caller.save_state#n``, ``run_state``).

This module never imports the SDK: ``sim.targets.openai_agents.agent`` and ``.state`` do,
inside the child and when the state is read.
"""

from __future__ import annotations

from sim.targets.kit.base import TargetBase
from sim.targets.protocol import (
    TargetError,
    TargetOptions,
)

#: The modules the extra installs, checked before anything imports them.
REQUIRED = ("agents",)


class OpenAIAgentsTarget(TargetBase):
    name = "openai-agents"
    #: ``--recovery-only`` allowed: its session is a SQLite file in the point's directory,
    #: written from the run's own task (every point of its demo, as is and keyed, judged alike
    #: from snapshots and the real way).
    snapshot_refusal = None
    description = (
        "OpenAI Agents SDK Runner (scripted Model, two function tools), durable by a "
        "SQLiteSession or by the caller's saved RunState (human-in-the-loop approval)"
    )
    extra = "openai-agents"
    distributions = ("openai-agents",)
    durabilities = ("session", "run_state")
    variants = ("as_is", "idempotent", "call_id")
    savers = ("sqlite",)
    resumes = ("continue", "resend")
    required = REQUIRED
    child_module = "sim.targets.openai_agents.agent"
    state_module = "sim.targets.openai_agents.state"
    demo_point_s = 7.5

    def validate(self, options: TargetOptions) -> TargetOptions:
        """``--resume resend`` is a session's: a saved ``RunState`` already holds the input it
        resumes."""
        if options.resume == "resend" and options.durability == "run_state":
            raise TargetError(
                f"{self.name}: --resume resend needs --durability session "
                "(a saved RunState is resumed, never re-sent)"
            )
        return options


TARGET = OpenAIAgentsTarget()
