"""External services: they live outside every process, survive every crash, and keep an effect
ledger — the ground truth the oracles read (docs/architecture.md, 2.3).

Each effect crosses a boundary labelled ``tool.effect:{service}.{op}#{call_id}``: a crash *before*
it means the effect did not happen; a crash *after* it means it happened but the process never saw
the result. Services:

- ``workspace``: files; ``read`` (naturally idempotent) and ``append_line`` (not idempotent: each
  call adds a line, so a re-run shows up as a duplicate line).
- ``payments``: ``charge`` dedupes by idempotency key and honours fencing tokens (refuses an epoch
  lower than the highest it has seen for the conversation).
- ``outbox``: ``send`` does not dedupe.
- ``counter``: ``increment``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from durable.tools import ToolContext, ToolError
from sim.world.process import SimProcess


@dataclass(frozen=True)
class Effect:
    """One ledger row. ``applied`` is False for a request the service refused or deduplicated."""

    service: str
    op: str
    call_id: str
    key: str
    epoch: int
    time_s: float
    boundary: int
    applied: bool
    note: str = ""


@dataclass
class Services:
    files: dict[str, str] = field(default_factory=dict)
    charges: dict[str, int] = field(default_factory=dict)
    fence_epoch: dict[str, int] = field(default_factory=dict)
    outbox: list[str] = field(default_factory=list)
    counter: int = 0
    ledger: list[Effect] = field(default_factory=list)

    def effects_of(self, call_id: str) -> list[Effect]:
        return [e for e in self.ledger if e.call_id == call_id and e.applied]

    def _effect(
        self,
        process: SimProcess,
        service: str,
        op: str,
        ctx: ToolContext,
        apply: object,
    ) -> str:
        """Cross the effect boundary around ``apply`` (which returns (applied, note, output))."""
        machine = process.machine
        label = f"tool.effect:{service}.{op}#{ctx.call_id}"
        index = machine.before(process, label)
        applied, note, output = apply()  # type: ignore[operator]
        self.ledger.append(
            Effect(
                service,
                op,
                ctx.call_id,
                ctx.idempotency_key,
                ctx.epoch,
                machine.world.now(),
                index,
                applied,
                note,
            )
        )
        machine.world.record("effect", service, op, ctx.call_id, applied, note)
        machine.after(process, index, label)
        if isinstance(output, ToolError):
            raise output
        return str(output)

    # -- workspace -----------------------------------------------------------------------------

    def read(self, process: SimProcess, ctx: ToolContext, path: str) -> str:
        def apply() -> tuple[bool, str, object]:
            if path not in self.files:
                return True, "missing", ToolError(f"no such file: {path}")
            return True, "", self.files[path]

        return self._effect(process, "workspace", "read", ctx, apply)

    def append_line(self, process: SimProcess, ctx: ToolContext, path: str, line: str) -> str:
        def apply() -> tuple[bool, str, object]:
            current = self.files.get(path, "")
            if current and not current.endswith("\n"):
                current += "\n"
            self.files[path] = current + line + "\n"
            return True, "", f"appended 1 line to {path}"

        return self._effect(process, "workspace", "append_line", ctx, apply)

    def has_line(self, path: str, line: str) -> bool:
        return line in self.files.get(path, "").splitlines()

    # -- payments ------------------------------------------------------------------------------

    def charge(self, process: SimProcess, ctx: ToolContext, amount: int) -> str:
        conversation = ctx.conversation_id

        def apply() -> tuple[bool, str, object]:
            highest = self.fence_epoch.get(conversation, 0)
            if ctx.epoch < highest:
                return False, "fenced", ToolError(f"stale fencing token {ctx.epoch} < {highest}")
            self.fence_epoch[conversation] = ctx.epoch
            if ctx.idempotency_key in self.charges:
                return False, "deduplicated", f"charged {self.charges[ctx.idempotency_key]}"
            self.charges[ctx.idempotency_key] = amount
            return True, "", f"charged {amount}"

        return self._effect(process, "payments", "charge", ctx, apply)

    # -- outbox and counter --------------------------------------------------------------------

    def send(self, process: SimProcess, ctx: ToolContext, to: str, subject: str) -> str:
        def apply() -> tuple[bool, str, object]:
            self.outbox.append(f"{to}: {subject}")
            return True, "", f"sent to {to}"

        return self._effect(process, "outbox", "send", ctx, apply)

    def increment(self, process: SimProcess, ctx: ToolContext) -> str:
        def apply() -> tuple[bool, str, object]:
            self.counter += 1
            return True, "", f"counter={self.counter}"

        return self._effect(process, "counter", "increment", ctx, apply)
