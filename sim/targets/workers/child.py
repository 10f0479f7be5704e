"""One worker process of a fleet (``sim.targets.workers.fleet``).

    python -m sim.targets.workers.child FLEET_DIR PROCESS [LABEL WHEN]

The worker serves the fleet's conversations as a production worker would: in a seeded order it
tries each conversation that has not settled yet, takes its lease (or skips it while another
worker holds it), submits the conversation's one input with its request id (a re-send after a
crash maps to the same submission), waits for the answer, and leaves the runtime (releasing the
lease). It ends when every conversation has settled (exit 0) or at the fleet's deadline (exit 4).
With ``LABEL WHEN`` it SIGKILLs itself at that boundary (``sim.targets.boundaries``). While the
fleet's fence-pause tokens last, a worker stops itself on its seeded k-th append of work, between
the fence check and the write, for the parent to continue as a zombie
(``sim.targets.workers.takeover``).

Losing a race is normal and is not an error: ``LeaseHeld`` (another worker holds the lease),
``Fenced``/``StaleLease`` (this worker was paused past its lease), ``SequenceConflict`` (another
owner appended since this worker last read), ``StoreBusy`` (a worker stopped inside a SQLite
transaction held the database past the busy timeout). Anything else is one ``error`` row and
exit 3.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import trio

from durable.config import RuntimeConfig
from durable.errors import Fenced
from durable.ports import real_ports
from durable.runtime import Runtime
from durable.state import new_state, reduce
from durable.store.base import LeaseHeld, SequenceConflict, StaleLease, Store, StoreBusy
from sim.explore.mutants import Patches, fleet_mutant_named
from sim.targets.boundaries import Boundaries, TraceLog
from sim.targets.ledger import LEDGER_NAME, Ledger
from sim.targets.workers.agent import BoundaryStore, ScriptedModel, open_store, payment_tools
from sim.targets.workers.takeover import WorkerPauses, install_fence_hook

CONFIG_NAME = "fleet.json"
GO_NAME = "go"
EXIT_DONE = 0
EXIT_ERROR = 3
EXIT_DEADLINE = 4
#: A worker waits this many lease TTLs for one answer before it leaves the conversation to
#: another pass (a bound, not a verdict: the fleet's deadline decides liveness).
WAIT_TTLS = 20
RACE_LOST = (LeaseHeld, Fenced, StaleLease, SequenceConflict, StoreBusy)


def trace_name(process: str) -> str:
    return f"trace-{process}.jsonl"


def open_fleet_store(config: dict[str, Any]) -> Store:
    """The fleet's store, for a worker or for the judge (a fresh store object on the same data)."""
    return open_store(
        config["store"],
        Path(config["fleet_dir"]) / config["store_path"],
        conninfo=config.get("conninfo", ""),
        namespace=config.get("namespace", ""),
    )


def request_id(conversation_id: str) -> str:
    return f"req-{conversation_id}"


async def settled(store: Store, conversation_id: str) -> bool:
    """Whether the conversation's one input has settled, as the store shows it now."""
    records = await store.read_records(conversation_id)
    state = reduce(new_state(conversation_id), records)
    sid = state.request_ids.get(request_id(conversation_id))
    return sid is not None and state.submissions[sid].status in ("done", "unanswered")


async def serve_one(
    store: Store, runtime_config: RuntimeConfig, tools: Any, process: str, conversation_id: str
) -> str:
    """One visit to one conversation: what happened (``served``, ``busy`` or ``lost``)."""
    wait_s = runtime_config.lease_ttl_s * WAIT_TTLS
    outcome = "served"
    try:
        async with Runtime.open(
            store=store,
            model=ScriptedModel(),
            tools=tools,
            ports=real_ports(),
            config=runtime_config,
            owner_id=process,
        ) as runtime:
            conversation = await runtime.conversation(conversation_id)
            handle = await conversation.submit(
                f"pay the invoice of {conversation_id}", request_id=request_id(conversation_id)
            )
            with trio.move_on_after(wait_s):
                await handle.wait()
    except* LeaseHeld:
        outcome = "busy"
    except* RACE_LOST:
        outcome = "lost"
    return outcome


async def serve(config: dict[str, Any], process: str, boundaries: Boundaries) -> int:
    fleet_dir = Path(config["fleet_dir"])
    inner = open_fleet_store(config)
    install_fence_hook(inner)
    pauses = WorkerPauses(
        boundaries,
        fleet_dir,
        process=process,
        seed=int(config["seed"]),
        tokens=int(config["fenced_pauses"]),
    )
    store: Store = BoundaryStore(inner, boundaries, pauses)
    ledger = Ledger(fleet_dir / LEDGER_NAME)
    tools = payment_tools(boundaries, ledger, process)
    runtime_config = RuntimeConfig(
        model_name="scripted",
        lease_ttl_s=float(config["lease_ttl_s"]),
        heartbeat_s=float(config["heartbeat_s"]),
        checkpoint_every=int(config["checkpoint_every"]),
    )
    order = random.Random(f"{config['seed']}:{process}")  # a local, seeded generator
    conversations: list[str] = list(config["conversations"])
    await start_together(fleet_dir, boundaries, float(config["deadline_wall_s"]))
    while time.time() < float(config["deadline_wall_s"]):
        try:
            pending = [c for c in conversations if not await settled(store, c)]
        except StoreBusy:  # a stopped worker holds the database: look again shortly
            await trio.sleep(0.1)
            continue
        if not pending:
            return EXIT_DONE
        order.shuffle(pending)
        for conversation_id in pending:
            outcome = await serve_one(store, runtime_config, tools, process, conversation_id)
            boundaries.note(kind="visit", conversation=conversation_id, outcome=outcome)
        await trio.sleep(0.02)
    return EXIT_DEADLINE


async def start_together(fleet_dir: Path, boundaries: Boundaries, deadline_wall_s: float) -> None:
    """Say ready, then wait for the parent's go (``GO_NAME``), which it gives once every first
    worker is ready: a worker whose interpreter started late would otherwise find the work done
    by the others, and its planned fence pause would find nothing to stop in. A restarted
    worker finds the go already given."""
    boundaries.note(kind="ready")
    while not (fleet_dir / GO_NAME).exists() and time.time() < deadline_wall_s:
        await trio.sleep(0.01)


def _leaves(exc: BaseException) -> str:
    """One line naming every leaf exception (trio wraps a task's error in groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_leaves(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 4):
        print("usage: python -m sim.targets.workers.child FLEET_DIR PROCESS [LABEL WHEN]")
        return 2
    fleet_dir, process = Path(args[0]), args[1]
    config = json.loads((fleet_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    log = TraceLog(fleet_dir / trace_name(process))
    crash = (args[2], args[3]) if len(args) == 4 else None
    boundaries = Boundaries(log, process, crash)
    log.write({"t": "spawn", "p": process, "crash": list(crash) if crash else None}, sync=True)
    if config.get("mutant"):
        fleet_mutant_named(str(config["mutant"])).apply(Patches())  # for good: never undone
    try:
        status = trio.run(serve, config, process, boundaries)
    except Exception as exc:
        lines = traceback.format_exc().strip().splitlines()
        log.write({"t": "error", "p": process, "error": _leaves(exc), "trace": lines}, sync=True)
        return EXIT_ERROR
    log.write({"t": "ended", "p": process, "status": status}, sync=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
