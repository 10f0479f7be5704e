"""I8, fencing: one owner writes at a time. Lease epochs strictly increase in the log and every
record carries the lease acquired before it; every append a store accepted carried the lease
granted last; no lease is granted while another owner's is live, nor an epoch skipped; a renewal
only extends the lease its caller holds; a fenced service never applies a stale token; a process
that released its lease does no more work.

It leaves what an unfenced service does with a zombie's call already on its way: I4 excuses it
(no runtime can take back a request in flight), I1 counts its effects.
"""

from __future__ import annotations

from durable.events import EventRecord, LeaseAcquired
from sim.judgement.oracles.facts import row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_fencing(result: RunResult) -> list[Violation]:
    out = _work_after_release(result)
    return out + _check_fencing(result)


def _work_after_release(result: RunResult) -> list[Violation]:
    """I8: a process that released its lease (a graceful shutdown) must have stopped all its
    work first: a commit, tool effect or model call after the release races the next owner,
    who may already hold the lease (the store would even accept a commit: the released lease
    keeps its owner and epoch until another owner takes it)."""
    if not result.leases.after_release:
        return []
    return [
        Violation(
            "I8",
            "a process went on working after it released its lease",
            tuple(result.leases.after_release[:3]),
        )
    ]


def _check_fencing(result: RunResult) -> list[Violation]:
    epoch, owner = 0, None
    last_lease: EventRecord | None = None
    for record in result.durable.records:
        event = record.event
        if isinstance(event, LeaseAcquired):
            if event.epoch <= epoch:
                return [
                    Violation(
                        "I8",
                        "lease epochs do not strictly increase",
                        tuple(row(r) for r in (last_lease, record) if r is not None),
                    )
                ]
            epoch, owner, last_lease = event.epoch, event.owner_id, record
            continue
        if record.epoch != epoch or record.owner_id != owner:
            return [
                Violation(
                    "I8",
                    "a record was appended under a lease that was not the current one",
                    tuple(row(r) for r in (last_lease, record) if r is not None),
                    expected=f"owner {owner} epoch {epoch}",
                    actual=f"owner {record.owner_id} epoch {record.epoch}",
                )
            ]
    for grant in result.leases.grants:
        previous, granted = grant.previous, grant.granted
        expected_epoch = (previous.epoch if previous else 0) + 1
        live_other = (
            previous is not None
            and previous.owner_id != granted.owner_id
            and previous.expires_at_s > grant.time_s
        )
        if live_other or granted.epoch != expected_epoch:
            assert previous is not None or not live_other
            return [
                Violation(
                    "I8",
                    "a lease was granted while another owner's was live, or epochs skipped",
                    (f"stored before: {previous}", f"granted at {grant.time_s:.3f}s: {granted}"),
                    expected=f"epoch {expected_epoch} after expiry",
                    actual=f"epoch {granted.epoch}",
                )
            ]
    for renewal in result.leases.renewals:
        previous, renewed = renewal.previous, renewal.granted
        held = previous is not None and (previous.owner_id, previous.epoch) == (
            renewed.owner_id,
            renewed.epoch,
        )
        if not held:
            return [
                Violation(
                    "I8",
                    "a lease renewal changed the stored lease's owner or epoch (a renewal may "
                    "only extend the lease its caller holds)",
                    (f"stored before: {previous}", f"renewed at {renewal.time_s:.3f}s: {renewed}"),
                    expected=f"owner {previous.owner_id} epoch {previous.epoch}"
                    if previous is not None
                    else "no renewal of a missing lease",
                    actual=f"owner {renewed.owner_id} epoch {renewed.epoch}",
                )
            ]
    return stale_appends(result) or out_of_fence_effects(result)


def stale_appends(result: RunResult) -> list[Violation]:
    """Every append a store *accepted* must carry the lease granted last before it: a zombie's
    append that a later reader happens to drop is still a fencing failure."""
    grants = sorted(result.leases.grants, key=lambda g: g.boundary)
    for append in result.leases.accepted:
        current = None
        for grant in grants:
            if grant.boundary < append.boundary:
                current = grant.granted
        if current is None:
            continue
        if (append.owner_id, append.epoch) != (current.owner_id, current.epoch):
            return [
                Violation(
                    "I8",
                    "the store accepted an append from a stale lease (a zombie writer)",
                    (
                        f"append of #{append.sequences[0]}..#{append.sequences[-1]} at boundary "
                        f"{append.boundary} by {append.owner_id} epoch {append.epoch}",
                        f"lease then: {current.owner_id} epoch {current.epoch}",
                    ),
                    expected=f"epoch {current.epoch}",
                    actual=f"epoch {append.epoch}",
                )
            ]
    return []


def out_of_fence_effects(result: RunResult) -> list[Violation]:
    """A fenced service must never apply a request whose token is older than one it has seen."""
    highest = 0
    for effect in result.outside.ledger:
        if effect.service != "payments" or not effect.applied:
            continue
        if effect.epoch < highest:
            return [Violation("I8", "a fenced service applied a stale token", (str(effect),))]
        highest = max(highest, effect.epoch)
    return []
