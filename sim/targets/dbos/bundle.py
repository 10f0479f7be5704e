"""The dbos target's repro bundle: the two-step workflow on a SQLite system database, killed from
inside its own step right before or after the step's effect, and recovered by ``DBOS.launch()``
in a fresh process (``repro.tmpl`` beside this module).

Imports no dbos: it fills in a template. The system database's own writes
(``record_operation_result`` and the rest) are DBOS's private module (``dbos._sys_db``), not
its public API, so a bundle kills at the effects only.
"""

from __future__ import annotations

from sim.targets.kit.bundle import check_kind, describe_kill, option_refused, program, template
from sim.targets.protocol import Bundle, BundleCase, BundleMaker, Target, TargetOptions

KINDS = ("effect:",)
INSTANTS = {
    "effect:payments.charge": "the `charge_card` step charged the card",
    "effect:outbox.send": "the `send_receipt` step emailed the receipt",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundled workflow, as is or keyed (``--variant idempotent``)."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled workflow)",))

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            "A DBOS workflow of two steps (SQLite system database) is killed with SIGKILL "
            f"{kill}, before DBOS recorded the step's output; a fresh process launches DBOS, "
            "which recovers the workflow. Does a step's effect happen twice?\n\n"
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
            framework="DBOS",
            setup=(
                "A `@DBOS.workflow()` of two `@DBOS.step()`s (`charge_card`, then "
                "`send_receipt`) on a SQLite system database, started under a fixed workflow id"
            ),
            kill=kill,
            resume=(
                "launches DBOS on the same system database (`DBOS.launch()` recovers the pending "
                "workflow) and waits for the workflow's result"
            ),
            expected=(
                "A step that completed its effect is not run again after a crash, or DBOS tells "
                "the step it is a retry of an attempt that may have acted (its recorded steps "
                "show one `charge_card` with one output, so nothing tells the user it ran twice)."
            ),
        )

    return make
