"""The langgraph target's repro bundle: the tutorial-shaped agent (``StateGraph``, ``ToolNode``,
a scripted chat model) on ``SqliteSaver``, killed from its own tool or from a ``SqliteSaver``
subclass -- the checkpointer interface LangGraph documents for custom savers -- and resumed with
``graph.invoke(None, config)`` on the same thread (``repro.tmpl`` beside this module).

Imports no langgraph: it fills in a template.
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

#: Where the bundle can kill: the agent node, each tool's effect, the checkpointer's writes.
KINDS = ("node:agent", "effect:", "saver.put", "saver.put_writes")
INSTANTS = {
    "node:agent": "the agent node's model call",
    "effect:payments.charge": "the `charge_card` tool charged the card",
    "effect:outbox.send": "the `send_receipt` tool emailed the receipt",
    "saver.put_writes": "the checkpointer's `put_writes` (a task's writes saved)",
    "saver.put": "the checkpointer's `put` (a checkpoint saved)",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The bundle covers the bundled agent on ``SqliteSaver``, every durability mode, variant
    and restart rule of the sweep."""
    if options.app is not None:
        raise option_refused(target.name, "--app", options.app.entry, ("(the bundled agent)",))
    if options.saver != "sqlite":
        raise option_refused(target.name, "--saver", options.saver, ("sqlite",))

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        docstring = (
            "A LangGraph agent (StateGraph + ToolNode, SqliteSaver, durability="
            f'"{options.durability}") is killed with SIGKILL {kill};\n'
            "a fresh process resumes the thread. Does a tool run twice?\n\n"
            "    python repro.py    # exit 1: reproduced, 0: not"
        )
        constants: dict[str, Value] = {
            "DURABILITY": options.durability,
            "VARIANT": options.variant,
            "RESUME": options.resume,
        }
        return Bundle(
            program=program(
                docstring=docstring,
                own=template(__package__ or "", "repro.tmpl"),
                case=case,
                constants=constants,
            ),
            distributions=target.distributions,
            framework="LangGraph",
            setup=(
                "A tool-calling agent shaped like LangGraph's tutorial (`StateGraph`, an agent "
                "node with a scripted chat model, `ToolNode`, `tools_condition`) checkpointed by "
                f'`SqliteSaver`, run with `durability="{options.durability}"`'
            ),
            kill=kill,
            resume=(
                "calls `graph.invoke(None, config)` on the same thread, as a restarted service "
                "does for a thread whose latest checkpoint has tasks left"
            ),
            expected=(
                "Each tool's side effect happens once: a tool whose effect already happened is "
                "not run again, or LangGraph's state says it may have run (its history shows "
                "one call and one result, so nothing tells the user it ran twice)."
            ),
        )

    return make
