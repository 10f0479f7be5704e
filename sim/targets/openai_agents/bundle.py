"""The openai-agents target's repro bundle: the payment agent (a scripted ``Model`` subclass, two
function tools) run by ``Runner.run`` on a ``SQLiteSession`` subclass (whose ``add_items`` is a
kill point), killed from its own tool, model or session, and re-entered on the same session in a
fresh process (``repro.tmpl`` beside this module).

Imports no agents SDK: it fills in a template. The ``run_state`` durability (a saved
``RunState`` with a human's approval) has no bundle yet.
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

KINDS = ("effect:", "model.call", "session.add_items")
INSTANTS = {
    "effect:payments.charge": "the `charge_card` tool charged the card",
    "effect:outbox.send": "the `send_receipt` tool emailed the receipt",
    "model.call": "the model's response",
    "session.add_items": "`SQLiteSession.add_items`",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundled agent on a session, each variant and restart rule."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled agent)",))
    if options.durability != "session":
        raise option_refused(target.name, "--durability", options.durability, ("session",))
    again = "with no new input" if options.resume == "continue" else "with the request again"

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            "An OpenAI Agents SDK agent run by Runner.run on a SQLiteSession is killed with "
            f"SIGKILL {kill}; a fresh process runs the agent on the same session {again}. Does "
            "a tool run twice?\n\n"
            "    python repro.py    # exit 1: reproduced, 0: not"
        )
        constants: dict[str, Value] = {"VARIANT": options.variant, "RESUME": options.resume}
        return Bundle(
            program=program(
                docstring=docstring,
                own=template(__package__ or "", "repro.tmpl"),
                case=case,
                constants=constants,
            ),
            distributions=target.distributions,
            framework="OpenAI Agents SDK",
            setup=(
                "An `Agent` with a scripted `Model` (no network, tracing disabled) and two "
                "function tools (`charge_card`, then `send_receipt`), run by `Runner.run` with a "
                "`SQLiteSession` on a file, as the Sessions page shows"
            ),
            kill=kill,
            resume=(
                f"runs the agent again on the same session {again} (`Runner.run(agent, "
                f"{'[]' if options.resume == 'continue' else 'request'}, session=session)`)"
            ),
            expected=(
                "A tool call whose effect happened is kept with the conversation, so that the "
                "re-entered run does not make it again, or the session says a call was in "
                "flight (it holds one `charge_card` call and one output, so nothing tells the "
                "user the card was charged twice)."
            ),
        )

    return make
