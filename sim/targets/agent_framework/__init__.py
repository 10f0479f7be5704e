"""The agent-framework target: a Microsoft Agent Framework workflow (``WorkflowBuilder``) of
plain executors with a fan-out and a fan-in, checkpointed by ``FileCheckpointStorage``.

The workflow pays invoice INV-42: ``dispatcher`` fans out to ``charge`` (``charge_card`` on
payments, declared exactly once) and ``prepare_receipt``; a fan-in joins them into
``send_receipt`` (``send_receipt`` on the outbox, declared exactly once), which yields the
answer as the workflow's output. No LLM agent executor: nothing in the payment needs a model
decision (``sim.targets.agent_framework.workflow`` says why). The framework checkpoints at the
end of each superstep (and an entry checkpoint holding the input); a restart resumes the latest
checkpoint with ``workflow.run(checkpoint_id=..., checkpoint_storage=...)``, as the framework's
checkpoint docs show.

Variants: ``as_is``; ``idempotent`` (each effect keyed by the workflow name and the call id the
dispatcher put in the checkpointed message, which a restored superstep gets back unchanged);
``unregistered`` (the storage is not given the workflow's message types in
``allowed_checkpoint_types``: its restricted unpickler would refuse them, so ``save`` refuses
every checkpoint that holds one, and the framework only logs a warning and runs on).

Crash boundaries (wrapped in the child only): each executor's run (``executor:{id}#n``), each
effect (``effect:{service}.{op}#{call_id}``), the fan-in's delivery of each source's message
(``fan_in:{source}#n``), and ``FileCheckpointStorage.save`` (``checkpoint.save#n``).

This module never imports agent_framework: only ``sim.targets.agent_framework.workflow`` and
``sim.targets.agent_framework.state`` do, in the child and when the state is read.
"""

from __future__ import annotations

from sim.targets.kit.base import TargetBase


class AgentFrameworkTarget(TargetBase):
    name = "agent-framework"
    #: ``--recovery-only`` allowed: its checkpoints are files in the point's directory, written
    #: from the workflow's own task (every point of its demo, as is and keyed, judged alike from
    #: snapshots and the real way).
    snapshot_refusal = None
    description = (
        "Microsoft Agent Framework workflow (executors, fan-out, fan-in) checkpointed by "
        "FileCheckpointStorage, resumed from the latest checkpoint"
    )
    extra = "agent-framework"
    distributions = ("agent-framework-core",)
    durabilities = ("superstep",)
    variants = ("as_is", "idempotent", "unregistered")
    savers = ("file",)
    resumes = ("latest",)
    required = ("agent_framework",)
    child_module = "sim.targets.agent_framework.workflow"
    state_module = "sim.targets.agent_framework.state"
    demo_point_s = 1.0


TARGET = AgentFrameworkTarget()
