"""Fake tools: scenario tool definitions bound to the world's external services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable.tools import (
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolSpec,
    Verification,
    VerifierFn,
)
from sim.world.process import SimProcess
from sim.world.scenario import VERIFIABLE_OPERATIONS, Scenario, ToolDef, VerifierMode
from sim.world.services import Services


def marked_line(arguments: dict[str, Any], ctx: ToolContext) -> str:
    """The line an append writes: tagged with the call's key so a verifier can find it."""
    return f"{arguments.get('line', 'edit')}  # {ctx.idempotency_key}"


def build_tools(scenario: Scenario, services: Services, process: SimProcess) -> ToolRegistry:
    return ToolRegistry([_spec(tool, services, process) for tool in scenario.tools])


def _spec(tool: ToolDef, services: Services, process: SimProcess) -> ToolSpec:
    op = tool.operation

    async def fn(arguments: dict[str, Any], ctx: ToolContext) -> str:
        if tool.latency_s:
            await process.sleep_until(process.now() + tool.latency_s)
        if op == "workspace.read":
            return services.read(process, ctx, str(arguments.get("path", "")))
        if op == "workspace.append_line":
            path = str(arguments.get("path", ""))
            return services.append_line(process, ctx, path, marked_line(arguments, ctx))
        if op == "payments.charge":
            return services.charge(process, ctx, int(arguments.get("amount", 0)))
        if op == "outbox.send":
            return services.send(
                process, ctx, str(arguments.get("to", "")), str(arguments.get("subject", ""))
            )
        assert op == "counter.increment", op
        return services.increment(process, ctx)

    verifier: VerifierFn | None = None
    if tool.policy == "verify_then_continue":
        verifier = _verifier(op, services, process, mode=tool.verifier)
    return ToolSpec(name=tool.name, fn=fn, policy=tool.policy, verifier=verifier)


def _appended(services: Services, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
    path = str(arguments.get("path", ""))
    if services.has_line(path, marked_line(arguments, ctx)):
        return Verification(status="applied", output=f"appended 1 line to {path}")
    return Verification(status="not_applied")


def _charged(services: Services, arguments: dict[str, Any], ctx: ToolContext) -> Verification:
    if ctx.idempotency_key in services.charges:
        return Verification(
            status="applied", output=f"charged {services.charges[ctx.idempotency_key]}"
        )
    return Verification(status="not_applied")


Check = Callable[[Services, dict[str, Any], ToolContext], Verification]
_CHECKS: dict[str, Check] = {"workspace.append_line": _appended, "payments.charge": _charged}


def _verifier(
    op: str, services: Services, process: SimProcess, *, mode: VerifierMode
) -> VerifierFn:
    """A ``verify_then_continue`` tool's verifier. Which operations can be verified is decided by
    ``sim.world.scenario.VERIFIABLE_OPERATIONS`` alone (scenario validation reads the same list):
    those get their check here (a KeyError when the tools are built if one has none), every other
    operation's verifier says "unknown". A scenario may make it answer "unknown" anyway, or fail
    (``ToolDef.verifier``): the recovery branches a real service's lost records or outage take."""
    check = _CHECKS[op] if op in VERIFIABLE_OPERATIONS else None

    async def verify(arguments: dict[str, Any], ctx: ToolContext) -> Verification:
        process.check_alive("tool.verify")
        if mode == "fails":
            raise ToolError(f"{op}: the service's verification endpoint is unavailable")
        if check is None or mode == "unknown":
            return Verification(status="unknown", output=f"{op} cannot be verified")
        return check(services, arguments, ctx)

    return verify
