"""The verdict on a fleet, from what outlives its processes: the store's logs (read by a fresh
store object, verified), the services' ledger and the workers' traces.

- I7 (liveness): every conversation's input settled before the deadline, no worker left running;
- I5 (inputs): one submission per request id, settled ``done``;
- I1 (effects): ``charge_card`` applied exactly once per conversation (idempotent: the service
  deduplicates by the runtime's key), ``send_receipt`` at most once (unsafe: never re-run);
- I8 (fencing): in every log, ``lease_acquired`` epochs strictly increase and every record
  carries the epoch and owner of the latest acquisition before it (an append accepted from a
  fenced owner breaks this); no epoch of a conversation was granted to two owners; no renewal
  that started after a newer epoch was granted succeeded (two live leases); no record of an
  older epoch lies beyond what a new owner's first read after its grant saw (an append accepted
  after a newer epoch was granted: a fence checked outside the append's transaction);
- E: a worker raised something other than a lost race (its trace's ``error`` row).
"""

from __future__ import annotations

import json
import signal
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import trio

from durable.events import LeaseAcquired
from durable.state import State, new_state, reduce
from durable.store.base import CorruptStore, Store
from sim.targets.boundaries import read_trace
from sim.targets.ledger import LEDGER_NAME, Ledger, LedgerRow
from sim.targets.workers.child import CONFIG_NAME, open_fleet_store, request_id, trace_name
from sim.targets.workers.fleet import FleetRun


@dataclass(frozen=True)
class FleetViolation:
    invariant: str
    explanation: str
    witness: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "explanation": self.explanation,
            "witness": list(self.witness),
        }


def judge_fleet(run: FleetRun) -> list[FleetViolation]:
    """Every violation the fleet's remains show (empty: the fleet passed)."""
    config = json.loads((run.fleet_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    conversations: list[str] = list(config["conversations"])
    traces = {i.name: read_trace(run.fleet_dir / trace_name(i.name)) for i in run.incarnations}
    out = _worker_errors(traces)
    store = open_fleet_store(config)
    logs, log_violations = trio.run(_read_logs, store, conversations)
    # Each conversation's state, reduced once: liveness, inputs and effects all read it.
    states = {cid: reduce(new_state(cid), records) for cid, records in logs.items()}
    out += log_violations
    out += _liveness(run, states)
    out += _inputs(states)
    out += _fencing_in_logs(logs)
    out += _grants_and_renewals(traces)
    out += _appends_after_a_grant(logs, traces)
    ledger = Ledger(run.fleet_dir / LEDGER_NAME)
    try:
        out += _effects(ledger.rows(), states)
    finally:
        ledger.close()
    return out


async def _read_logs(
    store: Store, conversations: list[str]
) -> tuple[dict[str, list[Any]], list[FleetViolation]]:
    logs: dict[str, list[Any]] = {}
    bad: list[FleetViolation] = []
    for conversation_id in conversations:
        try:
            logs[conversation_id] = await store.read_records(conversation_id)
        except CorruptStore as exc:
            bad.append(
                FleetViolation("I8", f"{conversation_id}: the store is corrupt", (str(exc),))
            )
            logs[conversation_id] = []
    return logs, bad


def _worker_errors(traces: dict[str, list[dict[str, Any]]]) -> list[FleetViolation]:
    return [
        FleetViolation("E", f"worker {row['p']} raised {row['error']}", tuple(row["trace"][-6:]))
        for rows in traces.values()
        for row in rows
        if row.get("t") == "error"
    ]


def _liveness(run: FleetRun, states: dict[str, State]) -> list[FleetViolation]:
    out: list[FleetViolation] = []
    if run.timed_out:
        out.append(FleetViolation("I7", "workers were still running at the fleet's deadline"))
    for conversation_id, state in states.items():
        sid = state.request_ids.get(request_id(conversation_id))
        status = state.submissions[sid].status if sid else "never accepted"
        if status not in ("done", "unanswered"):
            out.append(FleetViolation("I7", f"{conversation_id}: its input is {status}"))
    return out


def _inputs(states: dict[str, State]) -> list[FleetViolation]:
    out: list[FleetViolation] = []
    for conversation_id, state in states.items():
        subs = list(state.submissions.values())
        if len(subs) > 1:
            ids = tuple(f"{s.id} request {s.request_id}" for s in subs)
            out.append(FleetViolation("I5", f"{conversation_id}: {len(subs)} submissions", ids))
        for sub in subs:
            if sub.status == "unanswered":
                out.append(
                    FleetViolation("I5", f"{conversation_id}: {sub.id} unanswered ({sub.reason})")
                )
    return out


def _fencing_in_logs(logs: dict[str, list[Any]]) -> list[FleetViolation]:
    out: list[FleetViolation] = []
    for conversation_id, records in logs.items():
        epoch, owner = 0, ""
        for record in records:
            event = record.event
            if isinstance(event, LeaseAcquired):
                if event.epoch <= epoch:
                    out.append(
                        FleetViolation(
                            "I8",
                            f"{conversation_id}: epoch {event.epoch} acquired after epoch {epoch}",
                            (f"#{record.sequence} lease_acquired by {event.owner_id}",),
                        )
                    )
                epoch, owner = event.epoch, event.owner_id
            if (record.epoch, record.owner_id) != (epoch, owner):
                out.append(
                    FleetViolation(
                        "I8",
                        f"{conversation_id}: an append from a fenced owner was accepted",
                        (
                            f"#{record.sequence} {event.type} by {record.owner_id} epoch "
                            f"{record.epoch}",
                            f"the lease then: {owner} epoch {epoch}",
                        ),
                    )
                )
                break
    return out


def _grants_and_renewals(traces: dict[str, list[dict[str, Any]]]) -> list[FleetViolation]:
    notes = [r for rows in traces.values() for r in rows if r.get("t") == "note"]
    grants: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for note in notes:
        if note.get("kind") == "grant":
            grants[(note["conversation"], int(note["epoch"]))].append(note)
    out: list[FleetViolation] = []
    for (conversation_id, epoch), rows in sorted(grants.items()):
        owners = sorted({r["owner"] for r in rows})
        if len(owners) > 1:
            out.append(
                FleetViolation(
                    "I8",
                    f"{conversation_id}: epoch {epoch} was granted to {len(owners)} owners",
                    tuple(f"granted to {o}" for o in owners),
                )
            )
    for note in notes:
        if note.get("kind") != "renew":
            continue
        newer = [
            g
            for (cid, epoch), rows in grants.items()
            if cid == note["conversation"] and epoch > int(note["epoch"])
            for g in rows
            if g["done_s"] < note["started_s"]
        ]
        if newer:
            out.append(
                FleetViolation(
                    "I8",
                    f"{note['conversation']}: a renewal of epoch {note['epoch']} succeeded after "
                    f"epoch {newer[0]['epoch']} was granted (two live leases)",
                    (f"renewed by {note['owner']}", f"granted to {newer[0]['owner']}"),
                )
            )
    return out


def _appends_after_a_grant(
    logs: dict[str, list[Any]], traces: dict[str, list[dict[str, Any]]]
) -> list[FleetViolation]:
    """Each worker notes, for every lease it was granted, where the log ended at its first read
    after the grant (``recovered``). A correct store accepts an append of an older epoch only
    before the grant -- the fence and the write are one transaction, and the grant waits for it
    -- so such a record is at or before that point; one beyond it was accepted under a
    superseded lease. (The log alone cannot show it: the new owner's own append is then refused
    by sequence, and the next owner's acquisition follows the stale records.)"""
    out: list[FleetViolation] = []
    for rows in traces.values():
        for note in rows:
            if note.get("t") != "note" or note.get("kind") != "recovered":
                continue
            conversation_id, epoch = note["conversation"], int(note["epoch"])
            stale = [
                r
                for r in logs.get(conversation_id, [])
                if r.sequence > int(note["through"]) and r.epoch < epoch
            ]
            if stale:
                out.append(
                    FleetViolation(
                        "I8",
                        f"{conversation_id}: an append of epoch {stale[0].epoch} was accepted "
                        f"after epoch {epoch} was granted",
                        (
                            f"{note['p']} was granted epoch {epoch}; its first read of the log "
                            f"ended at #{note['through']}",
                            *(
                                f"#{r.sequence} {r.event.type} by {r.owner_id} epoch {r.epoch}"
                                for r in stale[:3]
                            ),
                        ),
                    )
                )
    return out


def _effects(rows: list[LedgerRow], states: dict[str, State]) -> list[FleetViolation]:
    applied: dict[tuple[str, str], list[LedgerRow]] = defaultdict(list)
    for row in rows:
        if row.applied:
            applied[(row.call_id.split("/", 1)[0], row.tool)].append(row)
    out: list[FleetViolation] = []
    for conversation_id, state in states.items():
        answered = any(sub.status == "done" for sub in state.submissions.values())
        charges = applied.get((conversation_id, "charge_card"), [])
        receipts = applied.get((conversation_id, "send_receipt"), [])
        if len(charges) > 1 or (answered and not charges):
            out.append(
                FleetViolation(
                    "I1",
                    f"{conversation_id}: charge_card (idempotent: exactly once) applied "
                    f"{len(charges)} times",
                    tuple(r.text() for r in charges),
                )
            )
        if len(receipts) > 1:
            out.append(
                FleetViolation(
                    "I1",
                    f"{conversation_id}: send_receipt (unsafe: at most once) applied "
                    f"{len(receipts)} times",
                    tuple(r.text() for r in receipts),
                )
            )
    return out


def fleet_document(run: FleetRun, violations: list[FleetViolation]) -> dict[str, Any]:
    """The JSON document of a fleet (``durable-sim workers --json``)."""
    killed = [i for i in run.incarnations if i.status == -signal.SIGKILL and i.crash is not None]
    return {
        "options": run.options.__dict__,
        "fleet_dir": str(run.fleet_dir),
        "processes": [i.to_json() for i in run.incarnations],
        "kills": len(killed),
        "pauses": run.pauses,
        "missed_pauses": run.missed_pauses,
        "fenced": run.fenced,
        "timed_out": run.timed_out,
        "wall_s": round(run.wall_s, 3),
        "verdict": "fail" if violations else "pass",
        "violations": [v.to_json() for v in violations],
    }
