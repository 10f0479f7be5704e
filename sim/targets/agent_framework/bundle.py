"""The agent-framework target's repro bundle: the fan-out/fan-in workflow of plain executors,
checkpointed by a ``FileCheckpointStorage`` subclass (whose ``save`` is a kill point), killed
from its own executor or its storage, and resumed from the storage's latest checkpoint in a
fresh process, as the framework's checkpoint docs show (``repro.tmpl`` beside this module).

Imports no agent_framework: it fills in a template. The executors' runs and the fan-in's
deliveries are the framework's internals (``Executor.execute``, the edge runner): a bundle
kills at the effects and the checkpoint saves.
"""

from __future__ import annotations

from sim.targets.kit.bundle import check_kind, describe_kill, option_refused, program, template
from sim.targets.protocol import Bundle, BundleCase, BundleMaker, Target, TargetOptions

KINDS = ("effect:", "checkpoint.save")
INSTANTS = {
    "effect:payments.charge": "the `charge` executor charged the card",
    "effect:outbox.send": "the `send_receipt` executor emailed the receipt",
    "checkpoint.save": "`FileCheckpointStorage.save` (a superstep's checkpoint)",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundled workflow in each variant: as is, keyed, or its message types unregistered."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled workflow)",))

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            "A Microsoft Agent Framework workflow (executors, fan-out, fan-in) checkpointed by "
            f"FileCheckpointStorage is killed with SIGKILL {kill}; a fresh process resumes the "
            "latest checkpoint. Does an executor's effect happen twice?\n\n"
            "    python repro.py    # exit 1: reproduced, 0: not"
        )
        return Bundle(
            program=program(
                docstring=docstring,
                own=template(__package__ or "", "repro.tmpl"),
                case=case,
                constants={"VARIANT": options.variant},
            ),
            distributions=target.distributions,
            framework="Agent Framework",
            setup=(
                "A `WorkflowBuilder` workflow of plain executors -- `dispatcher` fans out to "
                "`charge` (charges the card) and `prepare_receipt`, a fan-in joins them into "
                "`send_receipt` (emails the receipt) -- checkpointed by `FileCheckpointStorage` "
                "at each superstep's end"
            ),
            kill=kill,
            resume=(
                "builds the workflow again, takes `storage.get_latest(workflow_name=...)` and, "
                "while it has messages pending, calls `workflow.run(checkpoint_id=..., "
                "checkpoint_storage=...)`"
            ),
            expected=(
                "An executor that finished its effect before the kill is not run again when its "
                "superstep is restored, or the checkpoint tells that it may have run (the "
                "lineage holds one superstep and one result, so nothing tells the user)."
            ),
        )

    return make
