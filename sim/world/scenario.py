"""Scenario files: what the simulator runs. Schema, validation and loading.

A scenario is a JSON file: a bundled one (``sim/scenarios/``, installed with the package and read
through ``importlib.resources``, so a wheel needs no checkout) or any file given by path. It names
the tools (each bound to an external-service operation with a recovery policy), the client's
inputs (with request ids and virtual arrival times), and the model's script: for the k-th user
input, the list of turns the model takes (tool calls, then an answer), optionally failing the
first attempts.
The model answers as a function of the conversation so far, never of a call counter, so a request
re-sent after a crash gets the same answer.
"""

from __future__ import annotations

import json
import math
import os
import stat
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from durable.events import Budget, InboxMode, Policy
from sim.errors import UserError

#: The bundled scenarios: package data of ``sim`` (pyproject's package-data), found through the
#: import system rather than a path into a checkout, so an installed wheel has them too.
SCENARIO_DIR: Traversable = resources.files("sim") / "scenarios"

#: The operations of the external services (``sim.world.tools.OPERATIONS``, effect ledgers).
Operation = Literal[
    "workspace.read",
    "workspace.append_line",
    "workspace.replace",
    "workspace.check",
    "payments.charge",
    "outbox.send",
    "counter.increment",
]

#: File-edit operations: their tools plan the edit's content hashes before the intent
#: (``durable.tools.ToolSpec.plan_edit``) and must have the ``verify_then_continue`` policy.
EDIT_OPERATIONS: frozenset[Operation] = frozenset({"workspace.replace"})

#: The operation of a sub-agent tool (``durable.subagent``), which has no service of its own: its
#: call's ``task`` argument runs in a child conversation, scripted by ``Scenario.sub_script``,
#: whose answer is the call's result. Only a re-run resumes the child after a crash, so the
#: tool's policy must re-run its call.
Delegate = Literal["agent.delegate"]
DELEGATE: Delegate = "agent.delegate"
DELEGATE_POLICIES: frozenset[Policy] = frozenset({"replay_safe", "idempotent"})

#: The operations whose service can tell, after a crash, whether an interrupted call's effect
#: landed (``append_line``: the line tagged with the call's key is in the file; ``replace``: the
#: file's hash is the one the intent recorded for after the edit; ``charge``: a charge is
#: recorded under the call's key). The one list of them: ``sim.world.tools`` gives a
#: ``verify_then_continue`` tool a verifier that answers only for these (any other operation's
#: verifier says "unknown", which sends the call to manual reconciliation), and ``Scenario``
#: refuses, without an operator, a ``verify_then_continue`` tool bound to any other operation.
VERIFIABLE_OPERATIONS: frozenset[Operation] = frozenset(
    {"workspace.append_line", "workspace.replace", "payments.charge"}
)

#: The operations a tool may declare compensable (``ToolDef.compensate``): those with an undo in
#: ``sim.world.tools.OPERATIONS`` (``append_line``: restore the file's recorded pre-image;
#: ``charge``: refund it). An abandoned run undoes its completed compensable calls (docs/runtime.md,
#: "Compensation").
COMPENSABLE_OPERATIONS: frozenset[Operation] = frozenset(
    {"workspace.append_line", "payments.charge"}
)

#: Limits on a scenario file, so that no input reaches the parser or the runtime in a shape they
#: fail on with a traceback. The biggest bundled scenario is under 7 KiB and 7 levels deep (a
#: corpus case, which wraps its scenario, 8); a nested tool argument deeper than about 250 levels
#: cannot even be serialised into an event record, so such a run would never settle.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_INT_DIGITS = 100
MAX_MESSAGE_CHARS = 1000


# The client's steps are numbered in one space (what a world records as done): inputs from 0,
# actions from ACTION_STEP_BASE, re-sends from RESEND_STEP_BASE.
ACTION_STEP_BASE = 1000
RESEND_STEP_BASE = 2000


class ScenarioError(UserError, ValueError):
    """A scenario that does not exist or fails validation (one line, names the problem).

    The command line prints the message as is, so it is made one printable line here, whatever
    the file put in it (a key with a newline, a control character, a megabyte-long name).
    """

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


def _one_line(text: str) -> str:
    """``text`` with every non-printable character escaped, clipped to ``MAX_MESSAGE_CHARS``."""
    shown = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    if len(shown) > MAX_MESSAGE_CHARS:
        shown = shown[: MAX_MESSAGE_CHARS - 3] + "..."
    return shown


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: How a ``verify_then_continue`` tool's verifier behaves on recovery (``sim.world.tools``):
#: ``check``
#: asks the service (an answer for ``VERIFIABLE_OPERATIONS``, "unknown" for the others);
#: ``unknown`` always says it cannot tell (a service that lost track of the call); ``fails`` raises
#: (the service is down), which the runtime treats as "unknown". Both send the call to manual
#: reconciliation, so a scenario using them needs an operator.
VerifierMode = Literal["check", "unknown", "fails"]


class ToolDef(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")
    operation: Operation | Delegate
    policy: Policy = "unsafe"
    latency_s: float = Field(default=0.0, ge=0, le=3600)
    verifier: VerifierMode = "check"
    compensate: bool = False
    #: A validation tool: the criterion its calls check (a call without error passes).
    validates: str | None = Field(default=None, min_length=1, max_length=100)

    @model_validator(mode="after")
    def _verifier_needs_its_policy(self) -> ToolDef:
        if self.operation == DELEGATE and self.policy not in DELEGATE_POLICIES:
            raise ValueError(
                f"tool {self.name!r}: a sub-agent's child resumes only when its call is re-run "
                f"after a crash, so its policy must be replay_safe or idempotent, "
                f"not {self.policy}"
            )
        if self.compensate and self.operation not in COMPENSABLE_OPERATIONS:
            undoable = ", ".join(sorted(COMPENSABLE_OPERATIONS))
            raise ValueError(
                f"tool {self.name!r}: {self.operation} has no compensating action "
                f"(compensable: {undoable})"
            )
        if self.verifier != "check" and self.policy != "verify_then_continue":
            raise ValueError(
                f"tool {self.name!r}: verifier {self.verifier!r} needs the verify_then_continue "
                f"policy (only that policy asks a verifier), not {self.policy}"
            )
        if self.operation in EDIT_OPERATIONS and self.policy != "verify_then_continue":
            raise ValueError(
                f"tool {self.name!r}: the file edit {self.operation} needs the "
                f"verify_then_continue policy, not {self.policy}"
            )
        if self.validates is not None and self.operation in EDIT_OPERATIONS:
            raise ValueError(f"tool {self.name!r}: a tool edits files or validates, not both")
        return self


class CallDef(_Model):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Turn(_Model):
    """One model turn: tool calls, or (no calls) the final answer. ``fail_attempts`` makes the
    first attempts of this turn fail (retryable or fatal) before it succeeds. ``plan`` (not
    None) replaces the agent's plan; ``cursor`` makes the response carry a provider cursor,
    ``resumable`` whether the model says a later request may continue from it."""

    calls: list[CallDef] = Field(default_factory=list, max_length=16)
    answer: str = ""
    fail_attempts: int = Field(default=0, ge=0, le=16)
    fail_retryable: bool = True
    retry_after_s: float | None = Field(default=None, ge=0, le=3600)
    plan: list[str] | None = Field(default=None, max_length=32)
    cursor: bool = False
    resumable: bool = False

    @model_validator(mode="after")
    def _resumable_needs_a_cursor(self) -> Turn:
        if self.resumable and not self.cursor:
            raise ValueError("a turn is resumable only with a cursor")
        return self


class InputDef(_Model):
    """A client input. ``mode`` is its inbox mode (``Conversation.submit``): while a run is
    active a ``follow_up`` waits for the next run, a ``steer`` is placed into the running run at
    its next post-tools boundary, a ``reject`` is refused (the client records the rejection as
    the input's answer; a ``resends`` entry may send it again later)."""

    content: str = Field(min_length=1, max_length=10_000)
    request_id: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    at_s: float = Field(default=0.0, ge=0, le=86_400)
    mode: InboxMode = "follow_up"


class ActionDef(_Model):
    """A client action at a virtual time: ``abort`` the conversation's active run, or
    ``abandon`` it (abort and undo its compensable calls: docs/runtime.md, "Compensation")."""

    kind: Literal["abort", "abandon"]
    at_s: float = Field(ge=0, le=86_400)


class OperatorDef(_Model):
    """How the operator resolves calls waiting for manual reconciliation: ``check_ledger`` looks
    at the external service (the truth) and records what really happened; ``assume_failed``
    records an error result without looking; ``reject`` rejects the call, abandoning its run
    with compensation (``Conversation.reject``, docs/runtime.md "Compensation")."""

    decision: Literal["check_ledger", "assume_failed", "reject"] = "check_ledger"
    delay_s: float = Field(default=5.0, ge=0, le=86_400)


class ShutdownDef(_Model):
    """The first worker is shut down gracefully at ``at_s`` (its runtime exits normally: work
    stopped, lease released, nothing settled) while a second worker, started at
    ``second_worker_at_s`` and waiting for the lease, takes over and finishes the work."""

    at_s: float = Field(gt=0, le=86_400)
    second_worker_at_s: float = Field(ge=0, le=86_400)


class TakeoverDef(_Model):
    """A second worker starts at ``second_worker_at_s``; the first process is paused (a GC pause,
    a stopped VM) from ``pause_at_s`` for ``pause_for_s`` seconds, past its lease."""

    pause_at_s: float = Field(ge=0, le=86_400)
    pause_for_s: float = Field(gt=0, le=86_400)
    second_worker_at_s: float = Field(ge=0, le=86_400)


class TimedCrashDef(_Model):
    """A crash at the first boundary reached at or after ``at_s`` of virtual time (the fuzzer's
    state machine writes these; the sweep's crash points come on top)."""

    at_s: float = Field(ge=0, le=86_400)
    kind: Literal["process", "power"] = "process"


class ResendDef(_Model):
    """The client sends request ``request_id`` again at ``at_s`` (e.g. after a lost response)."""

    request_id: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    at_s: float = Field(ge=0, le=86_400)


class BaseCrashDef(_Model):
    """A crash every run of the scenario suffers (the sweep adds its crash points after it): at
    the first boundary whose label starts with ``label_prefix``."""

    label_prefix: str = Field(min_length=1, max_length=200)
    when: Literal["before", "after"] = "after"
    kind: Literal["process", "power"] = "process"


class Scenario(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    description: str = Field(min_length=1, max_length=300)
    conversation_id: str = Field(default="c1", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    tools: list[ToolDef] = Field(default_factory=list, max_length=32)
    inputs: list[InputDef] = Field(min_length=1, max_length=64)
    script: list[list[Turn]] = Field(min_length=1, max_length=64)
    #: The sub-agents' scripts: a child conversation whose input is a key runs these turns
    #: (``sim.world.model``; a key must not be one of the inputs, whose turns are ``script``).
    sub_script: dict[str, list[Turn]] = Field(default_factory=dict, max_length=16)
    budget: Budget = Budget()
    checkpoint_every: int = Field(default=16, ge=1, le=10_000)
    checkpoint_every_tasks: int = Field(default=4, ge=1, le=10_000)
    lease_ttl_s: float = Field(default=30.0, gt=0, le=3600)
    heartbeat_s: float = Field(default=10.0, gt=0, le=3600)
    max_model_attempts: int = Field(default=4, ge=1, le=32)
    #: The runtime's compaction budget (``RuntimeConfig.context_budget_tokens``): a turn whose
    #: context is estimated above it (characters of its canonical JSON / 4) compacts first.
    context_budget_tokens: int | None = Field(default=None, ge=1, le=10**7)
    #: The fake model's context window, in the same estimate: a request above it fails with
    #: "context exceeded" (the runtime then compacts and tries again).
    model_context_tokens: int | None = Field(default=None, ge=1, le=10**7)
    fsync: bool = True
    liveness_bound_s: float = Field(default=7200.0, gt=0, le=10**7)
    files: dict[str, str] = Field(default_factory=dict)
    fake_files: int = Field(default=2, ge=0, le=32)
    actions: list[ActionDef] = Field(default_factory=list, max_length=16)
    operator: OperatorDef | None = None
    takeover: TakeoverDef | None = None
    shutdown: ShutdownDef | None = None
    client_resends: bool = False
    base_crash: BaseCrashDef | None = None
    timed_crashes: list[TimedCrashDef] = Field(default_factory=list, max_length=8)
    resends: list[ResendDef] = Field(default_factory=list, max_length=16)
    #: Criteria a run must have validated at the current mutation revision to complete.
    required_criteria: list[str] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError("tool names must be unique")
        if len(self.script) != len(self.inputs):
            raise ValueError(f"script has {len(self.script)} entries for {len(self.inputs)} inputs")
        rids = [i.request_id for i in self.inputs]
        if len(set(rids)) != len(rids):
            raise ValueError("request ids must be unique")
        scripts = [(f"script[{k}]", turns) for k, turns in enumerate(self.script)]
        scripts += [(f"sub_script[{task!r}]", turns) for task, turns in self.sub_script.items()]
        for where, turns in scripts:
            for turn in turns:
                for call in turn.calls:
                    if call.tool not in names:
                        raise ValueError(f"{where} calls undefined tool {call.tool!r}")
        checked = {t.validates for t in self.tools if t.validates is not None}
        unchecked = [c for c in self.required_criteria if c not in checked]
        if unchecked:
            raise ValueError(f"required criterion {unchecked[0]!r} is checked by no tool")
        clashing = sorted(set(self.sub_script) & {i.content for i in self.inputs})
        if clashing:
            raise ValueError(f"sub_script key {clashing[0]!r} is also a client input")
        if self.takeover is not None and self.shutdown is not None:
            raise ValueError("a scenario has a takeover or a shutdown, not both")
        if self.heartbeat_s >= self.lease_ttl_s:
            raise ValueError("heartbeat_s must be below lease_ttl_s")
        unknown = [r.request_id for r in self.resends if r.request_id not in rids]
        if unknown:
            raise ValueError(f"resend of unknown request id {unknown[0]!r}")
        if self.operator is None:
            for tool in self.tools:
                problem = needs_operator(tool)
                if problem is not None:
                    raise ValueError(problem)
        return self

    def without_faults(self) -> Scenario:
        """The fault-free reference of this scenario: its timed crashes removed (everything else,
        a takeover included, is part of the workload)."""
        return self.model_copy(update={"timed_crashes": []}) if self.timed_crashes else self

    def standby_at_s(self) -> float | None:
        """When a second worker starts to wait for the lease (a takeover's or a shutdown's), or
        None: a ``pause`` crash point needs it, to take the paused worker's lease over
        (docs/crash-model.md, "Crash kinds"); a scenario without one gets no pause points."""
        second = self.takeover or self.shutdown
        return None if second is None else second.second_worker_at_s

    def delegates(self) -> bool:
        """Whether the scenario has a sub-agent tool (its runs may have child conversations)."""
        return any(t.operation == DELEGATE for t in self.tools)

    def tool(self, name: str) -> ToolDef:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)


_VERIFIER_CANNOT = {"unknown": "always answers unknown", "fails": "always fails"}


def needs_operator(tool: ToolDef) -> str | None:
    """Why a scenario with ``tool`` needs an operator (a one-line message), or None if it does not.

    After a crash between a call's intent and its result, recovery applies the tool's policy
    (``durable.tasks.tool``): ``manual`` always asks for reconciliation; ``verify_then_continue``
    asks the verifier and falls back to reconciliation when it cannot tell, which is every time
    for an operation outside ``VERIFIABLE_OPERATIONS``. The other policies settle on their own
    (re-execute, or record the call as interrupted). Without an operator a call waiting for
    reconciliation never settles, and a sweep reports only a liveness failure (I7, "unsettled").
    """
    forever = "after a crash its call would wait for manual reconciliation forever"
    if tool.policy == "manual":
        return (
            f"tool {tool.name!r} has the manual policy and the scenario has no operator: "
            f"{forever}; add an operator"
        )
    if tool.policy == "verify_then_continue" and tool.verifier != "check":
        return (
            f"tool {tool.name!r} has a verifier that {_VERIFIER_CANNOT[tool.verifier]}, and the "
            f"scenario has no operator: {forever}; add an operator"
        )
    if tool.policy == "verify_then_continue" and tool.operation not in VERIFIABLE_OPERATIONS:
        verifiable = ", ".join(sorted(VERIFIABLE_OPERATIONS))
        return (
            f"tool {tool.name!r} has the verify_then_continue policy but its operation "
            f"{tool.operation} has no verifier, and the scenario has no operator: {forever}; "
            f"bind it to an operation with a verifier ({verifiable}) or add an operator"
        )
    return None


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "an unknown kind of file"


def _read_capped(path: Path) -> bytes:
    """The bytes of ``path``, refused with a ``ScenarioError`` unless it is a regular file of at
    most ``MAX_FILE_BYTES``.

    The file is opened non-blocking (a named pipe would otherwise block the open) and checked
    with ``fstat`` on the open descriptor, so what is checked is what is read; at most one byte
    past the cap is ever read, so ``/dev/zero`` or a growing file cannot exhaust memory.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc.strerror}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ScenarioError(
                f"cannot read scenario file {path}: not a regular file ({_file_kind(mode)})"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(
            f"{path}: larger than the {MAX_FILE_BYTES}-byte (1 MiB) cap on a scenario file"
        )
    return data


class _UnusableNumber(ValueError):
    """A number the parser would accept but the simulator cannot use (raised by the hooks of
    ``json.loads``, which propagate it)."""


def _parse_int(digits: str) -> int:
    """Refuse huge integers before ``int()`` does (Python raises ValueError past 4300 digits,
    deep inside the parser): no count, amount or time in a scenario needs more than a few."""
    count = len(digits.lstrip("-"))
    if count > MAX_INT_DIGITS:
        raise _UnusableNumber(f"an integer has {count} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


def _parse_float(text: str) -> float:
    """Refuse a float that overflows to infinity (``1e400``): event records must be JSON, and
    JSON has no infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise _UnusableNumber(f"the number {text[:40]} is out of range")
    return value


def _refuse_constant(name: str) -> NoReturn:
    """Python's parser accepts ``NaN`` and ``Infinity``; JSON does not, and a NaN argument would
    make a state differ from itself (its replay never equals its checkpoint)."""
    raise _UnusableNumber(f"{name} is not a JSON number")


def _too_deep(value: Any) -> bool:
    """Whether parsed JSON nests containers more than ``MAX_DEPTH`` levels (walked with an explicit
    stack: a check against deep nesting must not recurse)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def load_scenario_file(path: Path) -> Scenario:
    """A scenario file, or a regression-corpus case (which embeds its scenario).

    Every bad file ends in a one-line ``ScenarioError`` naming the file and the problem: one that
    cannot be read, is not a regular file or is over ``MAX_FILE_BYTES``; text that is not UTF-8,
    not JSON, has an unusable number or nests deeper than ``MAX_DEPTH``; a scenario that fails
    validation.
    """
    data = _read_capped(path)
    too_deep = f"{path}: nested more than {MAX_DEPTH} levels deep (the limit for a scenario file)"
    try:
        raw = json.loads(
            data.decode("utf-8"),
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except _UnusableNumber as exc:
        raise ScenarioError(f"{path}: unusable number: {exc}") from exc
    except RecursionError as exc:  # the parser recurses once per level: far past MAX_DEPTH
        raise ScenarioError(too_deep) from exc
    if _too_deep(raw):
        raise ScenarioError(too_deep)
    if isinstance(raw, dict) and "scenario" in raw and "schema_version" in raw:
        raw = raw["scenario"]  # a regression-corpus case embeds the scenario it ran
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ScenarioError(
            f"{path}: invalid scenario at {where}: {first['msg']} ({exc.error_count()} errors)"
        ) from exc


def bundled_names() -> list[str]:
    return sorted(p.name.removesuffix(".json") for p in SCENARIO_DIR.iterdir() if _is_json(p))


def _is_json(entry: Traversable) -> bool:
    return entry.name.endswith(".json") and entry.is_file()


def load_scenario(name_or_path: str) -> Scenario:
    """A bundled scenario by name, or a scenario file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or "/" in name_or_path:
        return load_scenario_file(path)
    candidate = SCENARIO_DIR / f"{name_or_path}.json"
    if not candidate.is_file():
        known = ", ".join(bundled_names())
        raise ScenarioError(f"unknown scenario {name_or_path!r} (known: {known})")
    # A real path for an ordinary install; a temporary copy if the package is zipped.
    with resources.as_file(candidate) as path:
        return load_scenario_file(path)
