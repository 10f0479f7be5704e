"""The llama-index target's repro bundle: the two-step ``Workflow`` with the checkpoint loop of
LlamaIndex's "Writing durable workflows" page (``ctx.to_dict()`` saved at each step's end,
``Context.from_dict`` on restart), killed from its own step or its own save, and resumed in a
fresh process (``repro.tmpl`` beside this module).

Imports no ``workflows``: it fills in a template. The call id is the run id and the step's name
(the harness's is the runtime's work item id, read through a context variable that is not the
package's public API): the same key for the fixed variant on every attempt of a step.
"""

from __future__ import annotations

from sim.targets.kit.bundle import check_kind, describe_kill, option_refused, program, template
from sim.targets.protocol import Bundle, BundleCase, BundleMaker, Target, TargetOptions

KINDS = ("effect:", "step.", "checkpoint.save")
INSTANTS = {
    "effect:payments.charge": "the `charge_card` step charged the card",
    "effect:outbox.send": "the `send_receipt` step emailed the receipt",
    "step.charge_card": "the `charge_card` step's body",
    "step.send_receipt": "the `send_receipt` step's body",
    "checkpoint.save": "the loop's save of `ctx.to_dict()`",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundled workflow, as is or fixed (keyed, behind a first step with no effect)."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled workflow)",))

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            "A LlamaIndex Workflow of two steps, made durable by the checkpoint loop of the "
            f"'Writing durable workflows' page, is killed with SIGKILL {kill}; a fresh process "
            "resumes from the last snapshot. Does a step's effect happen twice?\n\n"
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
            framework="LlamaIndex Workflows",
            setup=(
                "A `Workflow` of two `@step`s (`charge_card`, then `send_receipt`, each keeping "
                "its result in `ctx.store`) run with the checkpoint loop of the 'Writing durable "
                "workflows' page: `handler.stream_events(expose_internal=True)`, saving "
                "`handler.ctx.to_dict()` in SQLite whenever a `StepStateChanged` says "
                "`NOT_RUNNING`"
            ),
            kill=kill,
            resume=(
                "loads the last snapshot and, while it says `is_running`, calls "
                "`wf.run(ctx=Context.from_dict(wf, snapshot))` (no snapshot: it starts the run)"
            ),
            expected=(
                "The page says resume is at-least-once; what it does not give is a way to tell: "
                "the snapshot records one result of the step, so nothing tells the user its "
                "effect happened twice (and a first step killed before any save starts over)."
            ),
        )

    return make
