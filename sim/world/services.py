"""External services: they live outside every process, survive every crash, and keep an effect
ledger — the ground truth the oracles read (docs/architecture.md, 2.3). The operations are
written once, in ``sim.world.tools.OPERATIONS``; this module holds the simulator's state and
ledger for them (the real-process host's are in ``sim.world.sqlite_services``).

Each effect crosses a boundary labelled ``tool.effect:{service}.{op}#{call_id}``: a crash *before*
it means the effect did not happen; a crash *after* it means it happened but the process never saw
the result. Services:

- ``workspace``: files; ``read`` (naturally idempotent) and ``append_line`` (not idempotent: each
  call adds a line, so a re-run shows up as a duplicate line); ``restore`` (a compensation: puts
  a file back to a recorded pre-image, deduped by the compensation's key, booked under the
  compensation's call id ``{call_id}.undo``); ``replace`` (a file edit applied only to the
  content its intent's hashes were planned against) and ``check`` (a validation: a read that
  fails unless the file holds the expected text).
- ``payments``: ``charge`` dedupes by idempotency key and honours fencing tokens (refuses an epoch
  lower than the highest it has seen for the conversation); ``refund`` (a compensation: refunds
  a charge in full, deduped by the compensation's key, fenced like a charge).
- ``outbox``: ``send`` does not dedupe.
- ``counter``: ``increment``.
"""

from __future__ import annotations

from collections.abc import Callable
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
    """The simulator's services, in memory (they live outside every process). The operations
    themselves are the table in ``sim.world.tools``; this is their state and their ledger."""

    files: dict[str, str] = field(default_factory=dict)
    charges: dict[str, int] = field(default_factory=dict)
    fence_epoch: dict[str, int] = field(default_factory=dict)
    outbox: list[str] = field(default_factory=list)
    counter: int = 0
    ledger: list[Effect] = field(default_factory=list)
    compensated_keys: list[str] = field(default_factory=list)
    refunds: dict[str, int] = field(default_factory=dict)  # charge key -> amount refunded
    # The workspace after each applied workspace effect, by the effect's boundary index (I17
    # reads what the files were when a run started).
    workspace_history: list[tuple[int, dict[str, str]]] = field(default_factory=list)

    def effects_of(self, call_id: str) -> list[Effect]:
        return [e for e in self.ledger if e.call_id == call_id and e.applied]

    def view(self) -> Services:
        return self

    def effect(
        self,
        process: SimProcess,
        service: str,
        op: str,
        ctx: ToolContext,
        apply: Callable[[Services], tuple[bool, str, object]],
    ) -> str:
        """Cross the effect boundary around ``apply`` (which returns (applied, note, output))."""
        machine = process.machine
        label = f"tool.effect:{service}.{op}#{ctx.call_id}"
        index = machine.before(process, label)
        applied, note, output = apply(self)
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
        if applied and service == "workspace" and op != "read":
            self.workspace_history.append((index, dict(self.files)))
        machine.world.record("effect", service, op, ctx.call_id, applied, note)
        machine.after(process, index, label)
        if isinstance(output, ToolError):
            raise output
        return str(output)

    # -- the state an operation reads and changes (``sim.world.tools.ServiceState``) -----------

    def file_content(self, path: str) -> str | None:
        return self.files.get(path)

    def put_file(self, path: str, content: str) -> None:
        self.files[path] = content

    def delete_file(self, path: str) -> None:
        self.files.pop(path, None)

    def compensated(self, key: str) -> bool:
        return key in self.compensated_keys

    def put_compensated(self, key: str) -> None:
        self.compensated_keys.append(key)

    def charged(self, key: str) -> int | None:
        return self.charges.get(key)

    def put_charge(self, key: str, amount: int) -> None:
        self.charges[key] = amount

    def refunded(self, key: str) -> int | None:
        return self.refunds.get(key)

    def put_refund(self, key: str, amount: int) -> None:
        self.refunds[key] = amount

    def fence_of(self, conversation_id: str) -> int:
        return self.fence_epoch.get(conversation_id, 0)

    def put_fence(self, conversation_id: str, epoch: int) -> None:
        self.fence_epoch[conversation_id] = epoch

    def send_line(self, line: str) -> None:
        self.outbox.append(line)

    def increment_counter(self) -> int:
        self.counter += 1
        return self.counter
