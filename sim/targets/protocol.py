"""What a target is: the contract between the harness and one foreign durable runtime.

The harness knows nothing about a target's library. It hands a child process a ``ChildContext``
(the point directory, the process name, the boundary counter that kills, the ledger) and asks the
target to start or resume its run there; afterwards it asks the target, in the parent, what the
runtime's durable state holds (``TargetState``). Everything a target's tools do to the outside
world goes through the ledger, so the effects survive the kill and can be counted.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from durable.tools import POLICIES as DURABLE_POLICIES

if TYPE_CHECKING:
    from sim.targets.boundaries import Boundaries
    from sim.targets.ledger import Ledger

#: What a user declares a tool may do to the outside world across crashes. ``exactly_once``:
#: as many applied effects as the fault-free run; ``at_most_once``: no more; ``at_least_once``:
#: no fewer.
Policy = Literal["exactly_once", "at_most_once", "at_least_once"]
POLICIES: tuple[Policy, ...] = ("exactly_once", "at_most_once", "at_least_once")

#: The reference runtime's recovery policies (``durable.tools.POLICIES``), which a user may
#: declare instead, as the guarantee each promises for the effect: ``replay_safe`` may run again
#: (none lost, repeats harmless); ``idempotent`` runs again with the same key, which the service
#: deduplicates (as many applied as the fault-free run); ``verify_then_continue`` asks the service
#: before running again (the same); ``unsafe`` and ``manual`` never run again by themselves (no
#: more than the fault-free run).
RECOVERY_GUARANTEES: dict[str, Policy] = {
    "replay_safe": "at_least_once",
    "idempotent": "exactly_once",
    "verify_then_continue": "exactly_once",
    "unsafe": "at_most_once",
    "manual": "at_most_once",
}
assert tuple(RECOVERY_GUARANTEES) == DURABLE_POLICIES, "one guarantee per recovery policy"


def missing_extra(target: str, modules: tuple[str, ...], extra: str) -> str | None:
    """Why ``target`` cannot run here (the first of its ``modules`` that is not installed, and
    the pip extra that installs it), or None. Looks the modules up without importing them."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a dotted name whose parent package is missing
            found = False
        if not found:
            return (
                f"the {target} target needs {module.split('.')[0]}, which is not installed: "
                f"pip install 'durable-sim[{extra}]'"
            )
    return None


class TargetError(ValueError):
    """A target or option the harness cannot run (one line: a usage error)."""


@dataclass(frozen=True)
class TargetTool:
    """One tool of a target's agent, the ledgered service it acts on, and the user's policy."""

    name: str
    service: str
    policy: Policy
    #: The word the user declared: ``policy`` itself, or a recovery policy of the reference
    #: runtime's (``RECOVERY_GUARANTEES``) that promises it.
    declared: str = ""

    def promise(self) -> str:
        """How reports name the declaration: ``idempotent (exactly_once)``, or ``exactly_once``."""
        if self.declared and self.declared != self.policy:
            return f"{self.declared} ({self.policy})"
        return self.policy


#: The tools every bundled target's agent has: the scenario of ``idempotent_payment`` (charge a
#: card, then send a receipt), each declared exactly once, as a user of any runtime would.
PAYMENT_AGENT_TOOLS = (
    TargetTool("charge_card", "payments", "exactly_once"),
    TargetTool("send_receipt", "outbox", "exactly_once"),
)
#: What the bundled agents' user asks, the model's script for it (one tool call per turn, in
#: this order), and the answer: one conversation, so the targets compare side by side.
PAYMENT_USER_INPUT = "Please pay invoice INV-42 (42 EUR) and email the receipt to ada@example.com."
PAYMENT_SCRIPT: tuple[tuple[str, dict[str, Any]], ...] = (
    ("charge_card", {"invoice": "INV-42", "amount_eur": 42}),
    ("send_receipt", {"to": "ada@example.com", "invoice": "INV-42"}),
)
PAYMENT_ANSWER = "Paid invoice INV-42 (42 EUR) and emailed the receipt to ada@example.com."


@dataclass(frozen=True)
class TargetOptions:
    """How one target run is configured: the durability mode; the tool variant (``as_is``: the
    tools as a user writes them first; ``idempotent``: each effect carries a key derived from the
    thread id and the tool call id, and the service deduplicates it); the checkpointer (a
    target's first saver is its default); the restart's resume rule (``tasks``: resume while
    the runtime has any task left; ``next``: only while it names a node to run next); and, for
    a user's own app (``--app``: the ``python`` target's program, or a graph of the user's for
    LangGraph) with its effect functions, input and model script."""

    durability: str = ""  # "": the target's default (its first), for each field
    variant: str = "as_is"
    saver: str = ""
    resume: str = ""
    # The user's own app (the python target's program; a framework target's graph factory):
    # FILE.py:FUNCTION or MODULE:FUNCTION, its effect functions NAME=POLICY,NAME=POLICY, and
    # for a framework target the input (a JSON file) and the model's script (a JSON file).
    app: str = ""
    effects: str = ""
    app_input: str = ""
    model_script: str = ""
    # 0: the crash is a kill (SIGKILL at the boundary). More: a preemption -- SIGTERM at the
    # boundary, whatever shutdown the process has, then SIGKILL this many seconds later.
    preempt_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class TargetState:
    """What the runtime's own durable state says after the last process, as a fresh reader sees
    it (for LangGraph: ``graph.get_state`` over the checkpointer file)."""

    exists: bool = False  # the thread has a checkpoint at all
    finished: bool = False  # the run reached its end (nothing scheduled next)
    pending: list[str] = field(default_factory=list)  # what the runtime would run next
    inputs: list[str] = field(default_factory=list)  # user messages, in order
    answer: str | None = None  # the final answer, if the last message is one
    results: dict[str, list[str]] = field(default_factory=dict)  # tool -> call ids with a result
    calls: dict[str, list[str]] = field(default_factory=dict)  # tool -> call ids requested
    history: list[str] = field(default_factory=list)  # one comparable row per message
    # The tools H1 judges (None: every tool). An app's effects are its service clients, not the
    # framework's tools: only those a tool called have results the history can record.
    hidden_judged: list[str] | None = None

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class ChildContext:
    """What a target's code gets inside a child process."""

    point_dir: Path
    process: str  # "p1", "p2", ...
    options: TargetOptions
    boundaries: Boundaries
    ledger: Ledger

    def effect(
        self, *, service: str, op: str, tool: str, call_id: str, key: str | None, detail: str
    ) -> None:
        """A tool's effect on a ledgered service, a crash boundary: ``key`` is the idempotency
        key the ``idempotent`` variant sends (the as-is tools send none)."""
        self.ledger.effect(
            self.boundaries,
            service=service,
            op=op,
            tool=tool,
            call_id=call_id,
            key=key if self.options.variant == "idempotent" else None,
            process=self.process,
            detail=detail,
        )


class Target(Protocol):
    """A foreign durable runtime the harness can crash-test (see the module docstring)."""

    name: str
    description: str
    extra: str  # the pip extra that installs its library: pip install 'durable-sim[EXTRA]'
    distributions: tuple[str, ...]  # its library's distributions, whose versions reports show
    durabilities: tuple[str, ...]
    variants: tuple[str, ...]
    savers: tuple[str, ...]  # the first is the default
    resumes: tuple[str, ...]

    def missing(self) -> str | None:
        """Why the target cannot run here (its library is not installed), or None."""
        ...

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        """The agent's tools and the policy declared for each (the ``python`` target's come
        from its options: the user's ``--effect NAME=POLICY``)."""
        ...

    def run_child(self, ctx: ChildContext) -> str:
        """In a child process: start the run, or resume it from the runtime's durable state, and
        run it to its end. Returns what was done (``start``, ``resume`` or ``none``)."""
        ...

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        """In the parent, after the last child: the runtime's durable state."""
        ...


class BundledAgentTarget:
    """The common part of a target whose agent is the bundled payment agent: its library's
    modules checked without importing them, the payment tools, and the child's run and the
    state reader in modules of their own (``child_module``, ``state_module``), imported only
    when called, since they import the runtime's library."""

    name: str
    extra: str
    required: tuple[str, ...]  # the modules the extra installs
    child_module: str  # has ``run_child(ctx)``
    state_module: str  # has ``read_state(point_dir, options)``

    def missing(self) -> str | None:
        return missing_extra(self.name, self.required, self.extra)

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        del options  # the same agent whatever the options
        return PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        action: str = importlib.import_module(self.child_module).run_child(ctx)
        return action

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        state: TargetState = importlib.import_module(self.state_module).read_state(
            point_dir, options
        )
        return state
