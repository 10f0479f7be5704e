"""The pydantic-ai target's repro bundle: the payment agent (``FunctionModel``, two function
tools) on pydantic-ai's DBOS integration -- ``DBOSAgent`` or the ``DBOSDurability`` capability
in the user's own workflow -- killed from inside its own tool and recovered by ``DBOS.launch()``
in a fresh process (``repro.tmpl`` beside this module).

Imports no pydantic_ai or dbos: it fills in a template. The Prefect durability has no bundle
yet (it serves Prefect's API in the process and retries the flow run: more than one small
program), nor the ``step`` and ``child_workflow`` variants.
"""

from __future__ import annotations

from sim.targets.kit.bundle import (
    Value,
    check_kind,
    describe_kill,
    option_refused,
    program,
    template,
)
from sim.targets.protocol import Bundle, BundleCase, BundleMaker, Target, TargetOptions

KINDS = ("effect:",)
INSTANTS = {
    "effect:payments.charge": "the `charge_card` tool charged the card",
    "effect:outbox.send": "the `send_receipt` tool emailed the receipt",
}
DURABILITIES = ("agent", "capability")
VARIANTS = ("as_is", "idempotent")


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundled agent on DBOS, either way, as is or keyed."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled agent)",))
    if options.durability not in DURABILITIES:
        raise option_refused(target.name, "--durability", options.durability, DURABILITIES)
    if options.variant not in VARIANTS:
        raise option_refused(target.name, "--variant", options.variant, VARIANTS)
    way = "DBOSAgent" if options.durability == "agent" else "the DBOSDurability capability"

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            f"A pydantic-ai agent made durable by {way} (DBOS, SQLite system database) is "
            f"killed with SIGKILL {kill}; a fresh process launches DBOS, which recovers the "
            "run. Does a tool run twice?\n\n"
            "    python repro.py    # exit 1: reproduced, 0: not"
        )
        constants: dict[str, Value] = {"DURABILITY": options.durability, "VARIANT": options.variant}
        return Bundle(
            program=program(
                docstring=docstring,
                own=template(__package__ or "", "repro.tmpl"),
                case=case,
                constants=constants,
            ),
            distributions=("pydantic-ai-slim", "dbos"),
            framework="pydantic-ai",
            setup=(
                "A pydantic-ai `Agent` with a `FunctionModel` (a scripted function: no network) "
                "and two async function tools (`charge_card`, then `send_receipt`), made durable "
                f"by {way} on DBOS with a SQLite system database"
            ),
            kill=kill,
            resume=(
                "launches DBOS on the same system database (`DBOS.launch()` recovers the pending "
                "workflow, replaying the recorded model requests) and waits for its result"
            ),
            expected=(
                "A tool whose effect happened is not called again when the workflow is "
                "recovered, or the tool can tell that it is a re-run (the run's messages show "
                "one `charge_card` call and one result, so nothing tells the user it ran twice)."
            ),
        )

    return make
