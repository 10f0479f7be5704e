"""What a target is: the contract between the harness and one foreign durable runtime.

The harness knows nothing about a target's library. It hands a child process a ``ChildContext``
(the point directory, the process name, the boundary counter that kills, the ledger) and asks the
target to start or resume its run there; afterwards it asks the target, in the parent, what the
runtime's durable state holds (``TargetState``). Everything a target's tools do to the outside
world goes through the ledger, so the effects survive the kill and can be counted.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from sim.targets.kit.declarations import POLICIES as POLICIES
from sim.targets.kit.declarations import RECOVERY_GUARANTEES as RECOVERY_GUARANTEES
from sim.targets.kit.declarations import Policy as Policy
from sim.targets.kit.declarations import TargetError as TargetError
from sim.targets.kit.declarations import TargetTool as TargetTool
from sim.targets.kit.spec import AppSpec

if TYPE_CHECKING:
    from sim.targets.boundaries import Boundaries
    from sim.targets.environments import Environment
    from sim.targets.ledger import Ledger


def installed(module: str) -> bool:
    """Whether ``module`` (dotted or not) can be imported, looked up on the file system without
    importing it or its parents: ``find_spec`` of a dotted name imports the parent packages, so
    asking whether a framework is installed would load it into the asking process."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not rest:
        return spec is not None
    suffixes = importlib.machinery.all_suffixes()
    for folder in spec.submodule_search_locations or ():
        base = Path(folder, *rest)
        if base.is_dir() or any(base.with_name(base.name + s).is_file() for s in suffixes):
            return True
    return False


def missing_extra(target: str, modules: tuple[str, ...], extra: str) -> str | None:
    """Why ``target`` cannot run here (the first of its ``modules`` that is not installed, and
    the pip extra that installs it), or None. Looks the modules up without importing them."""
    for module in modules:
        if not installed(module):
            return (
                f"the {target} target needs {module.split('.')[0]}, which is not installed: "
                f"pip install 'durable-sim[{extra}]'"
            )
    return None


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


@dataclass(frozen=True, kw_only=True)
class TargetOptions:
    """How one target run is configured: the durability mode; the tool variant (``as_is``: the
    tools as a user writes them first; ``idempotent``: each effect carries a key derived from ids
    the runtime keeps, and the service deduplicates it); the checkpointer; the restart's resume
    rule; the user's own app, if any (``AppSpec``: the ``python`` target's program, or a graph,
    workflow or agent of the user's for a framework target); and how the crash is delivered.
    An empty word is the target's default, its first (``sim.targets.sweep.check_options``)."""

    durability: str = ""
    variant: str = ""
    saver: str = ""
    resume: str = ""
    app: AppSpec | None = None
    # 0: the crash is a kill (SIGKILL at the boundary). More: a preemption -- SIGTERM at the
    # boundary, whatever shutdown the process has, then SIGKILL this many seconds later.
    preempt_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "durability": self.durability,
            "variant": self.variant,
            "saver": self.saver,
            "resume": self.resume,
            "app": None if self.app is None else self.app.to_json(),
            "preempt_s": self.preempt_s,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TargetOptions:
        """The options a parent wrote (``to_json``), whole: nothing is parsed again."""
        app = doc.get("app")
        return cls(
            durability=doc["durability"],
            variant=doc["variant"],
            saver=doc["saver"],
            resume=doc["resume"],
            app=None if app is None else AppSpec.from_json(app),
            preempt_s=float(doc["preempt_s"]),
        )


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
    # Measured, never judged: figures the runtime's state shows (an ADK session's bytes per
    # turn), which a sweep reports from its fault-free run.
    figures: dict[str, object] = field(default_factory=dict)

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


@dataclass(frozen=True, kw_only=True)
class AppShape:
    """What a target's ``--app`` names and which of the kit's app flags it takes (beyond
    ``--app``, ``--effect``, ``--effect-http`` and ``--http-stub``, which every app target
    takes), and the modules that run an app in a child and read its state in the parent."""

    names: str  # "a build_graph(model) factory returning a StateGraph", for help and errors
    takes: frozenset[str] = frozenset()  # "--input", "--model-script", "--deps", ...
    requires: frozenset[str] = frozenset()  # of those, the ones an app must be given
    input_kinds: tuple[type, ...] = (str, dict, list)  # the JSON kinds --input may hold
    child_module: str = ""  # has ``run_child(ctx)``
    state_module: str = ""  # has ``read_state(point_dir, options)``


@dataclass(frozen=True, kw_only=True)
class Demo:
    """A target's worked finding, next to the code it describes: the options of its as-is and
    fixed variants, and where the as-is one shows its finding -- boundaries named by the start
    of their label and the side, so the points survive a trace that grows. The conformance
    test (``tests/sim/targets/test_conformance.py``) runs every registered target through it."""

    as_is: TargetOptions
    fixed: TargetOptions
    points: tuple[tuple[str, str], ...]  # (label prefix, "before"|"after")
    invariant: str = "I1"
    #: Seconds one point of this target takes, roughly, on the 2-core machine: the
    #: conformance test samples the slowest ones in the fast tier.
    point_s: float = 5.0

    def choose(self, labels: list[str]) -> list[tuple[int, str]]:
        """The demo's points in a fault-free trace: the first boundary whose label starts with
        each prefix, on its side."""
        chosen: list[tuple[int, str]] = []
        for prefix, when in self.points:
            index = next((i for i, label in enumerate(labels) if label.startswith(prefix)), None)
            if index is None:
                raise TargetError(f"no boundary {prefix}* in the fault-free trace: {labels}")
            chosen.append((index, when))
        return chosen


@dataclass(frozen=True, kw_only=True)
class BundleCase:
    """What a repro bundle reproduces (``durable-sim target bundle``): the kill -- the harness's
    ``label`` and side, and the same instant as the bundle counts it, the ``n``-th crossing of
    the label's ``kind`` (``effect:payments.charge``, ``saver.put_writes``) in the fault-free
    run, which a program without the harness can count where a call id cannot be known -- and
    what the fault-free run applied: each tool's applied effects and its declared guarantee."""

    label: str
    when: str  # "before" | "after"
    kind: str
    n: int
    expected: dict[str, tuple[int, Policy]]


@dataclass(frozen=True, kw_only=True)
class Bundle:
    """A standalone program that reproduces one point without durable-sim, and what its
    ``ISSUE.md`` (written in the style an upstream bug report is filed in) says about it."""

    program: str  # repro.py: the framework's agent or workflow, the kill, the ledger, the check
    files: dict[str, str] = field(default_factory=dict)  # beside it (an app's copy), by path
    distributions: tuple[str, ...] = ()  # what requirements.txt pins, at the versions here
    framework: str  # "LangGraph": how the issue names the framework
    setup: str  # what runs: the agent or workflow and its durability, one sentence
    kill: str  # where repro.py kills its first process, in the framework's own words
    resume: str  # what the fresh process does, in the framework's words
    expected: str  # the behaviour the report asks for
    notes: tuple[str, ...] = ()  # what someone running it must know (a server it starts)
    run_s: float = 300.0  # how long one run of repro.py may take, all processes together


#: A target's bundle maker for one set of options: a ``BundleCase`` in, its ``Bundle`` out (a
#: ``TargetError`` line for a point the bundle cannot kill at).
BundleMaker: TypeAlias = Callable[[BundleCase], Bundle]


class Target(Protocol):
    """A foreign durable runtime the harness can crash-test (see the module docstring). Every
    hook is declared here and implemented by every target (``sim.targets.kit.base.TargetBase``
    gives the defaults), so the harness never probes for one."""

    name: str
    description: str
    extra: str  # the pip extra that installs its library: pip install 'durable-sim[EXTRA]'
    distributions: tuple[str, ...]  # its library's distributions, whose versions reports show
    durabilities: tuple[str, ...]
    variants: tuple[str, ...]
    savers: tuple[str, ...]  # the first is the default
    resumes: tuple[str, ...]
    app_shape: AppShape | None  # None: its agent is bundled, it takes no --app
    timed_durabilities: tuple[str, ...]  # on engines of their own: the bench times them too
    snapshot_refusal: str | None  # why not --recovery-only (``no_snapshots``); None: it may
    # None: its children run under this interpreter (its library an extra of this environment).
    # Else the venv of its own they run under, and its state reader (a framework whose pins
    # cannot be installed beside the other targets': ``sim.targets.environments``).
    environment: Environment | None

    def missing(self) -> str | None:
        """Why the target cannot run here (its library is not installed), or None."""
        ...

    def validate(self, options: TargetOptions) -> TargetOptions:
        """The target's own checks of ``options`` (the kit has checked the app's flags against
        ``app_shape``); a ``TargetError`` line if it cannot run them."""
        ...

    def service(self, options: TargetOptions) -> contextlib.AbstractContextManager[object]:
        """The durable service the children and the reader need alive (a server the crash never
        kills), entered around a point's children and by a sweep around all of its points."""
        ...

    def point_env(self, options: TargetOptions, point_dir: Path) -> dict[str, str]:
        """What one point's children find in their environment on top of the parent's (a
        fresh database of the service for this point, say), made in the parent inside
        ``service`` before the point's first child starts."""
        ...

    def preload(self, options: TargetOptions) -> tuple[str, ...]:
        """The modules a warm zygote imports once before it forks the children of a sweep
        (``sim.targets.zygote``): the child module and the framework it imports, and an app's
        libraries; empty for a target whose children must start fresh (a runtime that starts
        threads or servers when imported)."""
        ...

    def no_snapshots(self, options: TargetOptions) -> str | None:
        """Why a sweep of ``options`` cannot start its points from snapshots of the fault-free
        run's files (``target sweep --recovery-only``, ``sim.targets.recovery_only``): a
        durable state kept outside the point's directory, a prefix timed by threads; None: it
        can."""
        ...

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        """The agent's tools and the policy declared for each (an app's: its declared effects)."""
        ...

    def run_child(self, ctx: ChildContext) -> str:
        """In a child process: start the run, or resume it from the runtime's durable state, and
        run it to its end. Returns what was done (``start``, ``resume`` or ``none``)."""
        ...

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        """In the parent, after the last child: the runtime's durable state."""
        ...

    def demo(self) -> Demo:
        """The target's worked finding (``Demo``)."""
        ...

    def bundle(self, options: TargetOptions) -> BundleMaker:
        """The maker of repro bundles for ``options`` (``Bundle``), checked before any child
        runs: a ``TargetError`` line if the target has no bundle for these options."""
        ...
