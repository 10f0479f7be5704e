"""What a user declares about an effect, and the one error a target raises for bad input.

Layer 0 of ``sim.targets``: the app spec (``sim.targets.kit.spec``) and the target protocol
(``sim.targets.protocol``) both build on it, so it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from durable.tools import POLICIES as DURABLE_POLICIES
from sim.errors import UserError

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


class TargetError(UserError, ValueError):
    """A target or option the harness cannot run (one line: a usage error, exit 2)."""


class AppError(UserError):
    """Inside a child: the user's app cannot be run as declared (it does not import, names no
    such function, an effect's path does not resolve). One line, which the fault-free run's
    refusal repeats in the parent."""


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
