"""Fake tools: one table of tool operations (``OPERATIONS``: the service and operation an effect
is booked under in the ledger, the effect, and its verifier's check), bound to a host's services.

An operation is written once, against ``ServiceState`` (the services' state as one effect sees
it). Each host's services implement that state and ``ServiceLedger.effect``, which crosses the
effect's boundary and books the ledger row: the simulator's in memory
(``sim.world.services.Services``), the real-process host's in a SQLite file that outlives its
killed processes (``sim.world.sqlite_services.SQLiteServices``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from durable.events import PlannedEdit
from durable.subagent import delegate
from durable.tools import (
    Compensation,
    EditPlanner,
    ToolContext,
    ToolError,
    ToolFn,
    ToolRegistry,
    ToolSpec,
    Verification,
    VerifierFn,
    content_hash,
)
from sim.world.process import SimProcess
from sim.world.scenario import (
    DELEGATE,
    VERIFIABLE_OPERATIONS,
    Scenario,
    ToolDef,
    VerifierMode,
)

#: What an effect returns: (applied, ledger note, the tool's output or the ``ToolError`` to raise).
EffectOutcome = tuple[bool, str, object]


class ServiceState(Protocol):
    """The external services' state, as an operation reads and changes it."""

    def file_content(self, path: str) -> str | None: ...

    def put_file(self, path: str, content: str) -> None: ...

    def delete_file(self, path: str) -> None: ...

    def compensated(self, key: str) -> bool: ...

    def put_compensated(self, key: str) -> None: ...

    def charged(self, key: str) -> int | None: ...

    def put_charge(self, key: str, amount: int) -> None: ...

    def refunded(self, key: str) -> int | None: ...

    def put_refund(self, key: str, amount: int) -> None: ...

    def fence_of(self, conversation_id: str) -> int: ...

    def put_fence(self, conversation_id: str, epoch: int) -> None: ...

    def send_line(self, line: str) -> None: ...

    def increment_counter(self) -> int: ...


Apply = Callable[[ServiceState], EffectOutcome]
#: An operation's effect, prepared from the call's arguments before its boundary is crossed.
Effect = Callable[[dict[str, Any], ToolContext], Apply]
#: What a compensable operation records before its intent (the pre-image its undo restores).
Capture = Callable[[ServiceState, dict[str, Any], ToolContext], dict[str, Any]]
#: A compensating effect, from the call's arguments and recorded pre-image; ``ctx`` carries the
#: compensation's own call id and key.
Undo = Callable[[dict[str, Any], dict[str, Any], ToolContext], Apply]


class ServiceLedger(Protocol):
    """A host's services: effects cross ``tool.effect:{service}.{op}#{call_id}`` and are booked
    with their ledger row; ``view`` is the state a verifier or the operator reads."""

    def effect(
        self,
        process: SimProcess,
        service: str,
        op: str,
        ctx: ToolContext,
        apply: Apply,
    ) -> str: ...

    def view(self) -> ServiceState: ...

    def effects_of(self, call_id: str) -> list[Any]: ...


Check = Callable[[ServiceState, dict[str, Any], ToolContext], Verification]


def marked_line(arguments: dict[str, Any], ctx: ToolContext) -> str:
    """The line an append writes: tagged with the call's key so a verifier can find it."""
    return f"{arguments.get('line', 'edit')}  # {ctx.idempotency_key}"


def _read(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    """``workspace.read``: naturally idempotent."""
    path = str(arguments.get("path", ""))

    def apply(state: ServiceState) -> EffectOutcome:
        content = state.file_content(path)
        if content is None:
            return True, "missing", ToolError(f"no such file: {path}")
        return True, "", content

    return apply


def _append_line(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    """``workspace.append_line``: not idempotent (a re-run shows up as a duplicate line)."""
    path, line = str(arguments.get("path", "")), marked_line(arguments, ctx)

    def apply(state: ServiceState) -> EffectOutcome:
        current = state.file_content(path) or ""
        if current and not current.endswith("\n"):
            current += "\n"
        state.put_file(path, current + line + "\n")
        return True, "", f"appended 1 line to {path}"

    return apply


def _replaced(state: ServiceState, arguments: dict[str, Any]) -> PlannedEdit:
    """``workspace.replace``'s plan: the file's hash now and after replacing the first
    ``old`` with ``new`` (unchanged if ``old`` is not in it)."""
    path = str(arguments.get("path", ""))
    content = state.file_content(path)
    old, new = str(arguments.get("old", "")), str(arguments.get("new", ""))
    after = (content or "").replace(old, new, 1) if old else content
    return PlannedEdit(path=path, before_hash=content_hash(content), after_hash=content_hash(after))


def _replace(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    """``workspace.replace``: a file edit (replace the first ``old`` with ``new``). It applies
    only to the content it was planned against (``ctx.edit``): a replay after the edit landed
    finds another hash and fails instead of editing twice."""
    path = str(arguments.get("path", ""))
    old, new = str(arguments.get("old", "")), str(arguments.get("new", ""))
    planned = ctx.edit

    def apply(state: ServiceState) -> EffectOutcome:
        content = state.file_content(path)
        if planned is None or content_hash(content) != planned.before_hash:
            return False, "stale", ToolError(f"{path} changed since the edit was planned")
        if not old or content is None or old not in content:
            return False, "no match", ToolError(f"{old!r} not found in {path}")
        state.put_file(path, content.replace(old, new, 1))
        return True, "", f"replaced 1 occurrence in {path}"

    return apply


def _check(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    """``workspace.check``: a validation (like running the tests): passes if the file holds
    ``expect``; a read, so naturally idempotent."""
    path, expect = str(arguments.get("path", "")), str(arguments.get("expect", ""))

    def apply(state: ServiceState) -> EffectOutcome:
        content = state.file_content(path) or ""
        if expect not in content:
            return True, "failed", ToolError(f"check failed: {expect!r} not in {path}")
        return True, "", f"check passed: {path}"

    return apply


def _charge(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    """``payments.charge``: dedupes by idempotency key and refuses a fencing epoch lower than
    the highest it has seen for the conversation."""
    amount = int(arguments.get("amount", 0))

    def apply(state: ServiceState) -> EffectOutcome:
        highest = state.fence_of(ctx.conversation_id)
        if ctx.epoch < highest:
            return False, "fenced", ToolError(f"stale fencing token {ctx.epoch} < {highest}")
        state.put_fence(ctx.conversation_id, ctx.epoch)
        known = state.charged(ctx.idempotency_key)
        if known is not None:
            return False, "deduplicated", f"charged {known}"
        state.put_charge(ctx.idempotency_key, amount)
        return True, "", f"charged {amount}"

    return apply


def _send(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    """``outbox.send``: does not dedupe."""
    to, subject = str(arguments.get("to", "")), str(arguments.get("subject", ""))

    def apply(state: ServiceState) -> EffectOutcome:
        state.send_line(f"{to}: {subject}")
        return True, "", f"sent to {to}"

    return apply


def _increment(arguments: dict[str, Any], ctx: ToolContext) -> Apply:
    def apply(state: ServiceState) -> EffectOutcome:
        return True, "", f"counter={state.increment_counter()}"

    return apply


def _appended(state: ServiceState, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
    path = str(arguments.get("path", ""))
    content = state.file_content(path) or ""
    if marked_line(arguments, ctx) in content.splitlines():
        return Verification(status="applied", output=f"appended 1 line to {path}")
    return Verification(status="not_applied")


def _edited(state: ServiceState, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
    """An interrupted edit, judged by the hashes its intent recorded: the file's current hash
    is the planned after-hash (it landed), the before-hash (it did not), or neither (something
    else changed the file: nobody can tell)."""
    planned = ctx.edit
    if planned is None:
        return Verification(status="unknown", output="no planned edit recorded")
    current = content_hash(state.file_content(planned.path))
    if planned.after_hash == planned.before_hash:
        return Verification(status="not_applied")  # a no-op edit: running it again is harmless
    if current == planned.after_hash:
        return Verification(status="applied", output=f"replaced 1 occurrence in {planned.path}")
    if current == planned.before_hash:
        return Verification(status="not_applied")
    return Verification(status="unknown", output=f"{planned.path} holds neither planned hash")


def _charged(state: ServiceState, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
    amount = state.charged(ctx.idempotency_key)
    if amount is not None:
        return Verification(status="applied", output=f"charged {amount}")
    return Verification(status="not_applied")


def _file_pre_image(
    state: ServiceState, arguments: dict[str, Any], ctx: ToolContext
) -> dict[str, Any]:
    """An edit's pre-image: the file's content before it (None: there was no such file)."""
    path = str(arguments.get("path", ""))
    return {"path": path, "content": state.file_content(path)}


def _restore(arguments: dict[str, Any], pre_image: dict[str, Any], ctx: ToolContext) -> Apply:
    """``workspace.restore``: put a file back to its recorded pre-image (delete it if it did not
    exist). Dedupes by the compensation's key, so a re-run after a crash changes nothing (and
    the ledger books one applied restore per compensation)."""
    path = str(pre_image.get("path", arguments.get("path", "")))
    content = pre_image.get("content")

    def apply(state: ServiceState) -> EffectOutcome:
        if state.compensated(ctx.idempotency_key):
            return False, "deduplicated", f"{path} already restored"
        state.put_compensated(ctx.idempotency_key)
        if content is None:
            state.delete_file(path)
        else:
            state.put_file(path, str(content))
        return True, "", f"restored {path}"

    return apply


def _charge_pre_image(
    state: ServiceState, arguments: dict[str, Any], ctx: ToolContext
) -> dict[str, Any]:
    """A charge's pre-image: the key it is booked under (what its refund names)."""
    return {"charge_key": ctx.idempotency_key}


def _refund(arguments: dict[str, Any], pre_image: dict[str, Any], ctx: ToolContext) -> Apply:
    """``payments.refund``: refunds the charge booked under the pre-image's key, in full. Like a
    charge it dedupes by its own key (the compensation's) and refuses a stale fencing token; a
    charge that never landed (an interrupted call) has nothing to refund."""
    charge_key = str(pre_image.get("charge_key", ""))

    def apply(state: ServiceState) -> EffectOutcome:
        highest = state.fence_of(ctx.conversation_id)
        if ctx.epoch < highest:
            return False, "fenced", ToolError(f"stale fencing token {ctx.epoch} < {highest}")
        state.put_fence(ctx.conversation_id, ctx.epoch)
        if state.compensated(ctx.idempotency_key):
            return False, "deduplicated", f"{charge_key} already refunded"
        state.put_compensated(ctx.idempotency_key)
        amount = state.charged(charge_key)
        if amount is None:
            return False, "nothing charged", f"nothing charged under {charge_key}"
        state.put_refund(charge_key, amount)
        return True, "", f"refunded {amount}"

    return apply


@dataclass(frozen=True)
class Undoing:
    """A compensable operation's compensation: the ledger ``op`` its effect is booked under (in
    the operation's service), what it captures before the call's intent, and the undo."""

    op: str
    capture: Capture
    undo: Undo


@dataclass(frozen=True)
class Operation:
    """One tool operation: the ledger's ``service`` and ``op``, the effect (its arguments are
    read before the boundary, the state changed inside it), the check a
    ``verify_then_continue`` verifier runs (None: the service cannot tell), and its
    compensation (None: it cannot be undone)."""

    service: str
    op: str
    effect: Effect
    check: Check | None = None
    undoing: Undoing | None = None
    plan: Callable[[ServiceState, dict[str, Any]], PlannedEdit] | None = None


OPERATIONS: dict[str, Operation] = {
    "workspace.read": Operation("workspace", "read", _read),
    "workspace.append_line": Operation(
        "workspace",
        "append_line",
        _append_line,
        _appended,
        Undoing("restore", _file_pre_image, _restore),
    ),
    "workspace.replace": Operation("workspace", "replace", _replace, _edited, plan=_replaced),
    "workspace.check": Operation("workspace", "check", _check),
    "payments.charge": Operation(
        "payments", "charge", _charge, _charged, Undoing("refund", _charge_pre_image, _refund)
    ),
    "outbox.send": Operation("outbox", "send", _send),
    "counter.increment": Operation("counter", "increment", _increment),
}


def build_tools(scenario: Scenario, services: ServiceLedger, process: SimProcess) -> ToolRegistry:
    return ToolRegistry([_spec(tool, services, process) for tool in scenario.tools])


def _spec(tool: ToolDef, services: ServiceLedger, process: SimProcess) -> ToolSpec:
    if tool.operation == DELEGATE:
        return ToolSpec(name=tool.name, fn=_delegate_fn(tool, process), policy=tool.policy)
    operation = OPERATIONS[tool.operation]

    async def fn(arguments: dict[str, Any], ctx: ToolContext) -> str:
        if tool.latency_s:
            await process.sleep_until(process.now() + tool.latency_s)
        apply = operation.effect(arguments, ctx)
        return services.effect(process, operation.service, operation.op, ctx, apply)

    verifier: VerifierFn | None = None
    if tool.policy == "verify_then_continue":
        verifier = _verifier(tool.operation, services, process, mode=tool.verifier)
    compensation = _compensation(tool, services, process) if tool.compensate else None
    return ToolSpec(
        name=tool.name,
        fn=fn,
        policy=tool.policy,
        verifier=verifier,
        compensation=compensation,
        plan_edit=_planner(operation, services, process),
        validates=tool.validates,
    )


def _delegate_fn(tool: ToolDef, process: SimProcess) -> ToolFn:
    """A sub-agent tool (``agent.delegate``, not in ``OPERATIONS``: it has no service of its
    own): its ``task`` argument runs in the call's child conversation on the process's runtime;
    the child's own calls are the effects, each booked under its own call."""

    async def fn(arguments: dict[str, Any], ctx: ToolContext) -> str:
        if tool.latency_s:
            await process.sleep_until(process.now() + tool.latency_s)
        process.check_alive("tool.delegate")
        runtime = process.runtime
        assert runtime is not None, "a tool ran before its process opened the runtime"
        return await delegate(runtime, str(arguments.get("task", "")), ctx)

    return fn


def _compensation(tool: ToolDef, services: ServiceLedger, process: SimProcess) -> Compensation:
    """A compensable tool's compensation: the capture reads the services (no effect, so no
    boundary; a dead process cannot read), the undo is an effect under its own boundary
    ``tool.effect:{service}.{undo op}#{call_id}.undo``. Which operations can be undone is
    ``sim.world.scenario.COMPENSABLE_OPERATIONS`` (scenario validation reads the same list)."""
    operation = OPERATIONS[tool.operation]
    undoing = operation.undoing
    if undoing is None:
        raise ValueError(f"{tool.operation} is compensable but has no undo in OPERATIONS")

    async def capture(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        process.check_alive("tool.capture")
        return undoing.capture(services.view(), arguments, ctx)

    async def undo(arguments: dict[str, Any], pre_image: dict[str, Any], ctx: ToolContext) -> str:
        apply = undoing.undo(arguments, pre_image, ctx)
        return services.effect(process, operation.service, undoing.op, ctx, apply)

    return Compensation(undo=undo, capture=capture)


def _planner(
    operation: Operation, services: ServiceLedger, process: SimProcess
) -> EditPlanner | None:
    """A file-edit operation's planner: it reads the file (no effect, so no boundary)."""
    plan = operation.plan
    if plan is None:
        return None

    async def planner(arguments: dict[str, Any]) -> PlannedEdit:
        process.check_alive("tool.plan")
        return plan(services.view(), arguments)

    return planner


def _verifier(
    op: str, services: ServiceLedger, process: SimProcess, *, mode: VerifierMode
) -> VerifierFn:
    """A ``verify_then_continue`` tool's verifier. Which operations can be verified is decided by
    ``sim.world.scenario.VERIFIABLE_OPERATIONS`` alone (scenario validation reads the same list):
    those must have a check in ``OPERATIONS`` (a ``ValueError`` when the tools are built if one
    has none), every other operation's verifier says "unknown". A scenario may make it answer
    "unknown" anyway, or fail (``ToolDef.verifier``): the recovery branches a real service's lost
    records or outage take."""
    check = OPERATIONS[op].check if op in VERIFIABLE_OPERATIONS else None
    if op in VERIFIABLE_OPERATIONS and check is None:
        raise ValueError(f"{op} is verifiable but has no check in OPERATIONS")

    async def verify(arguments: dict[str, Any], ctx: ToolContext) -> Verification:
        process.check_alive("tool.verify")
        if mode == "fails":
            raise ToolError(f"{op}: the service's verification endpoint is unavailable")
        if check is None or mode == "unknown":
            return Verification(status="unknown", output=f"{op} cannot be verified")
        return check(services.view(), arguments, ctx)

    return verify
