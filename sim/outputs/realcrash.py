"""``durable-sim realcrash``: kill real processes at the simulator's crash points and check that
reality and the simulator agree.

For each process-kill crash point ``(boundary index, before|after)`` of a scenario, a child Python
process (``sim.outputs.realcrash_child``) runs the reference runtime on real files or a real SQLite
database with a real (sped-up) wall clock, and SIGKILLs itself at that boundary; a fresh child is
then started to resume (it opens the conversation, re-submits unacknowledged inputs with the same
request ids and waits for every answer), as the simulator restarts a process. The external
services and their effect ledger live in their own SQLite file outside the children, the client's
view and the model's call log in an append-only record beside it. The parent then reads the store
through a fresh store object, the ledger and the record, builds a ``sim.run.runner.RunResult`` and
judges it with the simulator's oracles against a real fault-free run; and it runs the simulator on
the same schedule ``INDEX:WHEN:process`` and judges that too. Agreement is the fraction of points
whose verdicts are equal; any disagreement is listed with both sides' violations and witnesses.

Boundaries line up by construction (the child uses the simulator's ``ProcessFS`` and
``InstrumentedStore`` wrappers, and the same label counters, ids and client steps), and by check:
the real fault-free label sequence is compared with the simulator's, and every point's real trace
up to its crash with the simulated reference (a point whose crash hit another label is a
disagreement, whatever the verdicts say).

Time is scaled, explicitly: the children's clock is the wall clock sped up ``speedup`` times
(default 50: the fake model's 1 s latency is 20 ms, the 30 s lease TTL 0.6 s, the 10 s heartbeat
0.2 s), so a fault-free run takes a fraction of a second; and it stands still between a kill and
the next child's start, since the simulator restarts a process at the crash instant (a restarted
child still waits out the dead owner's lease, as in the simulator). Unlike the simulator's, real
work takes time: 1 ms of I/O is 50 ms of scenario time. Where nothing is timed but the model's
latency (read_edit_answer, idempotent_payment) that changes no boundary order. Where a client step
is timed a few scenario seconds after the run's own activity, a lower ``--speedup`` (10) keeps the
order; where a lease heartbeat fires, its ticks drift by the renewals' real duration (the
simulator's come at exact multiples of ``heartbeat_s`` and can tie with a step timed at the same
instant), and the affected points are reported as misaligned (disagreements) rather than compared.

Power loss is out of reach for real processes (the page cache survives a kill) and is not faked:
only ``process`` crash points are run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import trio

from durable.ports import InlineBlocking, OsFileSystem
from durable.store.file import FileStore
from durable.store.sqlite import SQLiteStore
from sim.explore.sweep import ScheduleOutcome, base_schedule, depth1_schedules, judge
from sim.judgement.oracles import Violation
from sim.outputs.realcrash_child import (
    CONFIG_NAME,
    EXIT_ENDED,
    EXIT_ERROR,
    EXIT_LIVENESS,
    LOG_NAME,
    SERVICES_NAME,
    SQLITE_NAME,
    STORE_DIR,
    ExternalServices,
    decode_record,
    read_entries,
)
from sim.run.runner import (
    MAX_PROCESSES,
    ClientView,
    RunResult,
    StoreKind,
    _initial_files,
    read_durable,
    run_scenario,
)
from sim.world.faults import Boundary, CrashPoint, Schedule, boundary_kind
from sim.world.model import MODEL_LATENCY_S, ModelCall
from sim.world.process import CrashRecord
from sim.world.scenario import Scenario, ScenarioError, load_scenario
from sim.world.seeded import World
from sim.world.services import Effect

DEFAULT_SPEEDUP = 50.0
# Real runs of one point at most, until its boundary trace lines up (see ``_run_lined_up``).
ALIGN_ATTEMPTS = 3
BLOCKING_MODES = ("thread", "inline")
# Boundary kinds in the order ``--points`` covers them: the most telling crash points first.
KIND_PRIORITY = ("tool", "model", "commit", "checkpoint", "lease")
ProgressFn = Callable[[dict[str, Any]], None]


class RealcrashError(ValueError):
    """A scenario or option realcrash cannot run (one line; a usage error)."""


# -- running one schedule for real -------------------------------------------------------------


@dataclass
class RealRun:
    result: RunResult
    harness_error: str | None
    children: int
    wall_s: float


def run_real(
    scenario: Scenario,
    *,
    store: StoreKind,
    seed: int,
    schedule: Schedule,
    speedup: float = DEFAULT_SPEEDUP,
    blocking: str = "thread",
    workdir: str | None = None,
    keep: bool = False,
) -> RealRun:
    """Run ``scenario`` in child processes, each killed (SIGKILL) at the schedule's points, and
    collect what the oracles read into a ``RunResult``."""
    started = time.perf_counter()
    point_dir = Path(tempfile.mkdtemp(prefix="realcrash-", dir=workdir))
    try:
        targets = [[p.index, p.when] for p in schedule.points]
        config = {
            "scenario": scenario.model_dump(mode="json"),
            "seed": seed,
            "store": store,
            "speedup": speedup,
            "targets": targets,
            "blocking": blocking,
        }
        (point_dir / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")
        if store == "file":
            (point_dir / STORE_DIR).mkdir()
        ExternalServices.create(
            point_dir / SERVICES_NAME, _initial_files(World(seed), scenario)
        ).close()
        harness_error, timed_out, children = _run_children(scenario, point_dir, speedup)
        result = _collect(scenario, store, seed, schedule, point_dir, timed_out)
        return RealRun(result, harness_error, children, time.perf_counter() - started)
    finally:
        if not keep:
            shutil.rmtree(point_dir, ignore_errors=True)


def _child_timeout_s(scenario: Scenario, speedup: float) -> float:
    return scenario.liveness_bound_s / speedup * 1.5 + 30.0


def _run_children(
    scenario: Scenario, point_dir: Path, speedup: float
) -> tuple[str | None, bool, int]:
    """Start children until one is not killed at a crash point (the simulator's worker loop:
    after a crash a new child always runs, even when the client has its answers, so recovery
    runs and settles whatever the crash left)."""
    log = point_dir / LOG_NAME
    for number in range(1, MAX_PROCESSES + 1):
        command = [sys.executable, "-m", "sim.outputs.realcrash_child", str(point_dir), str(number)]
        try:
            proc = subprocess.run(
                command, capture_output=True, timeout=_child_timeout_s(scenario, speedup)
            )
        except subprocess.TimeoutExpired:  # subprocess.run has killed it
            return None, True, number
        crashed = any(e["t"] == "crash" and e["p"] == f"p{number}" for e in read_entries(log))
        if proc.returncode == -signal.SIGKILL and crashed:
            continue
        if proc.returncode in (EXIT_ENDED, EXIT_ERROR, EXIT_LIVENESS) and not crashed:
            return None, False, number
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return (
            f"child p{number} exited with status {proc.returncode}"
            + (f": {' | '.join(tail)}" if tail else ""),
            False,
            number,
        )
    # The simulator's world gives up the same way (and reports it as the runtime's failure).
    with log.open("a", encoding="ascii") as f:
        f.write(json.dumps({"t": "error", "msg": f"more than {MAX_PROCESSES} processes"}) + "\n")
    return None, False, MAX_PROCESSES


def _collect(
    scenario: Scenario,
    store: StoreKind,
    seed: int,
    schedule: Schedule,
    point_dir: Path,
    timed_out: bool,
) -> RunResult:
    result = RunResult(scenario=scenario, seed=seed, store=store, schedule=schedule)
    entries = read_entries(point_dir / LOG_NAME)
    client = ClientView()
    errors: list[str] = []
    liveness = timed_out
    last_time = 0.0
    for e in entries:
        t = e["t"]
        if "time" in e:
            last_time = max(last_time, float(e["time"]))
        if t == "b":
            result.boundaries.append(Boundary(e["i"], e["label"], e["p"], e["time"]))
        elif t == "record":
            records = getattr(result, e["name"], None)
            if isinstance(records, list):
                records.append(decode_record(e))
        elif t == "model":
            result.model_calls.append(
                ModelCall(
                    e["i"], e["p"], e["task"], e["attempt"], tuple(e["users"]), e["time"],
                    e["outcome"],
                )
            )  # fmt: skip
        elif t == "crash":
            point = CrashPoint(e["i"], e["when"], "process")
            result.crashes.append(CrashRecord(point, e["label"], e["p"], e["time"], e["pinned"]))
        elif t == "spawn":
            result.processes += 1
        elif t == "ack":
            client.acked[e["rid"]] = e["sid"]
        elif t == "answer":
            client.answers[e["rid"]] = (e["status"], e["answer"], e["reason"])
        elif t == "lost_ack":
            client.lost_acks.append(e["rid"])
        elif t == "remapped":
            client.remapped.append((e["rid"], e["first"], e["then"]))
        elif t == "action":
            client.actions_done.add(int(e["n"]))
        elif t == "error":
            errors.append(e["msg"])
        elif t == "liveness":
            liveness = True
    result.client = client
    result.runtime_error = "; ".join(errors) or None
    result.settled = not liveness and not errors and client.complete(scenario)
    result.virtual_time_s = last_time
    services = ExternalServices(point_dir / SERVICES_NAME)
    try:
        result.ledger = [
            Effect(**{**row, "applied": bool(row["applied"])}) for row in services.ledger_rows()
        ]
        result.files = services.files()
    finally:
        services.close()
    trio.run(_collect_store, result, store, scenario, point_dir)
    return result


async def _collect_store(
    result: RunResult, store: StoreKind, scenario: Scenario, point_dir: Path
) -> None:
    if store == "file":
        reader: Any = FileStore(str(point_dir / STORE_DIR), fs=OsFileSystem(), fsync=scenario.fsync)
    else:
        reader = SQLiteStore(str(point_dir / SQLITE_NAME), blocking=InlineBlocking())
    await read_durable(result, reader, scenario.conversation_id)


# -- choosing points ---------------------------------------------------------------------------


def select_points(
    labels: list[str], schedules: list[Schedule], limit: int | None
) -> list[Schedule]:
    """At most ``limit`` of ``schedules`` (all if None), covering every boundary kind first: one
    boundary (before, then after) of each kind in turn, tool effects, model calls, commits,
    checkpoints and leases first, then file operations; within a kind, in trace order."""
    if limit is None or limit >= len(schedules):
        return schedules
    by_boundary: dict[int, list[Schedule]] = {}
    for schedule in schedules:
        by_boundary.setdefault(schedule.points[-1].index, []).append(schedule)
    kinds: dict[str, list[int]] = {}
    for index in sorted(by_boundary):
        kinds.setdefault(boundary_kind(labels[index]), []).append(index)
    order = sorted(
        kinds,
        key=lambda k: KIND_PRIORITY.index(k) if k in KIND_PRIORITY else len(KIND_PRIORITY),
    )
    queues = {k: list(kinds[k]) for k in order}
    chosen: list[Schedule] = []
    while len(chosen) < limit and any(queues.values()):
        for kind in order:
            if queues[kind] and len(chosen) < limit:
                index = queues[kind].pop(0)
                chosen += by_boundary[index][: limit - len(chosen)]
    return sorted(chosen, key=lambda s: (s.points[-1].index, s.points[-1].when != "before"))


# -- comparing with the simulator --------------------------------------------------------------


def _violations(violations: list[Violation]) -> list[dict[str, Any]]:
    return [v.to_json() for v in violations]


def _side(outcome: ScheduleOutcome | None, error: str | None = None) -> dict[str, Any]:
    if outcome is None:
        return {"verdict": "error", "invariants": [], "violations": [], "error": error}
    return {
        "verdict": outcome.verdict,
        "invariants": sorted({v.invariant for v in outcome.violations}),
        "violations": _violations(outcome.violations),
    }


def _judge_real(run: RealRun, reference: RunResult) -> tuple[ScheduleOutcome | None, str | None]:
    if run.harness_error is not None:
        return None, run.harness_error
    return judge(run.result, reference, determinism=False), None


def _lines_up(
    run: RealRun, *, sim_labels: list[str], upto: int | None, sim_crashes: list[str]
) -> bool:
    """Whether the real run's trace (through index ``upto - 1``; all of it if None) and its
    crashes are the simulator's."""
    real = [b.label for b in run.result.boundaries]
    if upto is not None:
        real, sim_labels = real[:upto], sim_labels[:upto]
    return real == sim_labels and [c.label for c in run.result.crashes] == sim_crashes


def _run_lined_up(
    run_once: Callable[[], RealRun], lined_up: Callable[[RealRun], bool]
) -> tuple[RealRun, int]:
    """Run until the real trace lines up with the simulator's, at most ``ALIGN_ATTEMPTS`` times.

    A real run that reaches the crash index through other boundaries did not crash at the point
    being compared: the host stalled the child and scenario time ran on (a lease renewal came
    due, a timed client step came early). Such a run is not a comparison, so it is run again; a
    point that never lines up stays a disagreement ("misaligned"). Runs that line up are never
    re-run, whatever their verdict. Returns the last run and the number of attempts."""
    attempts = 1
    run = run_once()
    while not lined_up(run) and attempts < ALIGN_ATTEMPTS:
        attempts += 1
        run = run_once()
    return run, attempts


def observables(result: RunResult) -> dict[str, Any]:
    """What a run did, as far as the world can see (for a finer comparison than the verdict):
    the client's outcome, the ledger, the final log's event kinds, model calls and processes."""
    return {
        "outcome": result.outcome,
        "effects": [f"{e.service}.{e.op}#{e.call_id}:{e.note or 'applied'}" for e in result.ledger],
        "events": [r.event.type for r in result.records],
        "model_calls": len(result.model_calls),
        "processes": result.processes,
        "settled": result.settled,
    }


def _diff(real: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    return {k: {"real": real[k], "sim": sim[k]} for k in real if real[k] != sim[k]}


def _first_mismatch(real: list[str], sim: list[str]) -> dict[str, Any] | None:
    for i, (a, b) in enumerate(zip(real, sim, strict=False)):
        if a != b:
            return {"index": i, "real": a, "sim": b}
    if len(real) != len(sim):
        i = min(len(real), len(sim))
        return {
            "index": i,
            "real": real[i] if i < len(real) else None,
            "sim": sim[i] if i < len(sim) else None,
        }
    return None


def unsupported_features(scenario: Scenario) -> list[str]:
    """Scenario features the real-process child does not implement (yet): refused up front,
    never ignored."""
    out: list[str] = []
    if scenario.shutdown is not None:
        out.append("a graceful shutdown with a standby worker (shutdown)")
    if scenario.resends:
        out.append("client re-sends (resends)")
    if scenario.timed_crashes:
        out.append("timed crashes (timed_crashes)")
    if any(t.verifier != "check" for t in scenario.tools):
        out.append("a verifier that cannot tell (tools[].verifier)")
    return out


def realcrash(
    scenario_name: str,
    *,
    store: str,
    points: int | None,
    seed: int = 0,
    speedup: float = DEFAULT_SPEEDUP,
    blocking: str = "thread",
    workdir: str | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Kill real processes at the scenario's process-kill crash points (at most ``points`` of
    them, see ``select_points``) and compare each verdict with the simulator's for the same
    schedule. Returns the JSON document (``points``, ``agreement``, ``disagreements``,
    ``per_point_s`` = median real wall seconds per crash point, ...).

    Raises ``ScenarioError`` for an unknown or invalid scenario and ``RealcrashError`` for one
    realcrash cannot run (a takeover needs a paused worker; a power base crash needs power loss).
    """
    if store not in ("file", "sqlite"):
        raise RealcrashError(f"--store must be file or sqlite, not {store!r}")
    if blocking not in BLOCKING_MODES:
        raise RealcrashError(f"blocking must be thread or inline, not {blocking!r}")
    if points is not None and points < 1:
        raise RealcrashError(f"--points must be at least 1, got {points}")
    if not speedup > 0:
        raise RealcrashError(f"--speedup must be positive, got {speedup}")
    scenario = load_scenario(scenario_name)
    if scenario.takeover is not None:
        raise RealcrashError(
            f"{scenario.name}: lease takeover (a second worker while the first is paused) is not "
            "run with real processes"
        )
    if scenario.base_crash is not None and scenario.base_crash.kind == "power":
        raise RealcrashError(
            f"{scenario.name}: its base crash is a power loss, out of reach for real processes"
        )
    unsupported = unsupported_features(scenario)
    if unsupported:
        raise RealcrashError(
            f"{scenario.name}: the real-process child does not run {unsupported[0]} "
            "(it would diverge from the simulator in silence)"
        )
    kind: StoreKind = "file" if store == "file" else "sqlite"
    started = time.perf_counter()
    base = base_schedule(scenario, seed=seed, store=kind)
    sim_ref = run_scenario(scenario, seed=seed, store=kind, schedule=base)
    sim_labels = [b.label for b in sim_ref.boundaries]
    options: dict[str, Any] = {
        "store": kind,
        "seed": seed,
        "speedup": speedup,
        "blocking": blocking,
        "workdir": workdir,
    }
    real_ref_run, ref_attempts = _run_lined_up(
        partial(run_real, scenario, schedule=base, **options),
        partial(
            _lines_up,
            sim_labels=sim_labels,
            upto=None,
            sim_crashes=[c.label for c in sim_ref.crashes],
        ),
    )
    real_labels = [b.label for b in real_ref_run.result.boundaries]
    mismatch = _first_mismatch(real_labels, sim_labels)
    real_ref = real_ref_run.result
    real_ref_outcome, real_ref_error = _judge_real(real_ref_run, real_ref)
    reference = {
        "schedule": base.text(),
        "real": _side(real_ref_outcome, real_ref_error),
        "sim": _side(judge(sim_ref, sim_ref, determinism=False)),
        "real_s": round(real_ref_run.wall_s, 3),
        "real_outcome": real_ref.outcome,
        "sim_outcome": sim_ref.outcome,
        "same_observables": observables(real_ref) == observables(sim_ref),
        "real_virtual_time_s": round(real_ref.virtual_time_s, 3),
        "sim_virtual_time_s": round(sim_ref.virtual_time_s, 3),
    }
    n = len(real_labels)
    schedules = select_points(
        real_labels, depth1_schedules(real_labels, ["process"], base=base), points
    )
    rows: list[dict[str, Any]] = []
    disagreements: list[dict[str, Any]] = []
    divergences: list[dict[str, Any]] = []
    for schedule in schedules:
        point = schedule.points[-1]
        t0 = time.perf_counter()
        sim_result = run_scenario(scenario, seed=seed, store=kind, schedule=schedule)
        sim_outcome = judge(sim_result, sim_ref, determinism=False)
        sim_s = time.perf_counter() - t0
        lined_up = partial(
            _lines_up,
            sim_labels=sim_labels,
            upto=point.index + 1,
            sim_crashes=[c.label for c in sim_result.crashes],
        )
        run, attempts = _run_lined_up(
            partial(run_real, scenario, schedule=schedule, **options), lined_up
        )
        aligned = lined_up(run)
        crash_labels = [c.label for c in run.result.crashes]
        real_outcome, real_error = _judge_real(run, real_ref)
        real_side, sim_side = _side(real_outcome, real_error), _side(sim_outcome)
        label = real_labels[point.index] if point.index < n else "?"
        agree = aligned and real_side["verdict"] == sim_side["verdict"]
        differences = _diff(observables(run.result), observables(sim_result))
        row = {
            "point": schedule.text(),
            "index": point.index,
            "when": point.when,
            "label": label,
            "real": real_side["verdict"],
            "sim": sim_side["verdict"],
            "agree": agree,
            "aligned": aligned,
            "same_observables": not differences,
            "real_s": round(run.wall_s, 4),
            "sim_s": round(sim_s, 4),
            "children": run.children,
            "attempts": attempts,
        }
        rows.append(row)
        if differences:
            divergences.append(
                {"point": schedule.text(), "label": label, "differences": differences}
            )
        if not agree:
            entry: dict[str, Any] = {"point": schedule.text(), "label": label, "aligned": aligned}
            entry["real"] = real_side
            entry["sim"] = sim_side
            if not aligned:
                entry["first_divergence"] = _first_mismatch(
                    [b.label for b in run.result.boundaries[: point.index + 1]],
                    sim_labels[: point.index + 1],
                )
                entry["real_trace"] = [b.label for b in run.result.boundaries[: point.index + 1]][
                    -5:
                ]
                entry["sim_trace"] = sim_labels[max(0, point.index - 4) : point.index + 1]
                entry["real_crashes"] = crash_labels
                entry["sim_crashes"] = [c.label for c in sim_result.crashes]
            disagreements.append(entry)
        if progress is not None:
            progress(row)
    real_times = [r["real_s"] for r in rows]
    sim_times = [r["sim_s"] for r in rows]
    per_point = statistics.median(real_times) if real_times else 0.0
    sim_per_point = statistics.median(sim_times) if sim_times else 0.0
    agreed = sum(1 for r in rows if r["agree"])
    return {
        "scenario": scenario.name,
        "store": store,
        "seed": seed,
        "crash_kind": "process",
        "blocking": blocking,
        "time_scale": {
            "speedup": speedup,
            "model_latency_real_s": MODEL_LATENCY_S / speedup,
            "lease_ttl_real_s": scenario.lease_ttl_s / speedup,
            "heartbeat_real_s": scenario.heartbeat_s / speedup,
        },
        "boundaries": n,
        "sim_boundaries": len(sim_labels),
        "labels_match": mismatch is None,
        "reference_attempts": ref_attempts,
        "retried_points": sum(1 for r in rows if r["attempts"] > 1),
        "label_mismatch": mismatch,
        "reference": reference,
        "total_points": 2 * max(0, n - (base.last_index + 1)),
        "points": rows,
        "agreement": (agreed / len(rows)) if rows else 1.0,
        "disagreements": disagreements,
        "observables_match": (sum(1 for r in rows if r["same_observables"]) / len(rows))
        if rows
        else 1.0,
        "divergences": divergences,
        "per_point_s": round(per_point, 4),
        "sim_per_point_s": round(sim_per_point, 5),
        "wall_s": round(time.perf_counter() - started, 3),
    }


# -- command line ------------------------------------------------------------------------------


def add_realcrash_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``realcrash`` subcommand's arguments (for ``sim.outputs.cli.realcrash``)."""
    parser.add_argument("scenario", help="a bundled scenario name or a .json path")
    parser.add_argument("--store", choices=("file", "sqlite"), default="file")
    parser.add_argument(
        "--points",
        type=int,
        default=None,
        metavar="N",
        help="run at most N crash points, covering every boundary kind first (default: all)",
    )
    parser.add_argument("--seed", type=int, default=0, help="world seed (default 0)")
    parser.add_argument(
        "--speedup",
        type=float,
        default=DEFAULT_SPEEDUP,
        help=f"scenario seconds per real second in the children (default {DEFAULT_SPEEDUP:g})",
    )
    parser.add_argument(
        "--blocking",
        choices=BLOCKING_MODES,
        default="thread",
        help="SQLite calls on worker threads as in production (default) or inline",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON document on stdout")


def main_realcrash(args: argparse.Namespace) -> int:
    """Run ``realcrash`` from parsed arguments (see ``add_realcrash_arguments``). Exit 0: total
    agreement (and identical fault-free label sequences), 1: any disagreement, 2: usage error
    (one line on stderr, no traceback)."""
    live = not args.json
    shown: list[dict[str, Any]] = []

    def show(row: dict[str, Any]) -> None:
        if not shown:
            print(
                f"{'index':>5} {'when':6} {'label':46} {'real':9} {'sim':9} {'agree':5} {'wall':>8}"
            )
        shown.append(row)
        mark = "yes" if row["agree"] else "NO" + ("" if row["aligned"] else " (misaligned)")
        print(
            f"{row['index']:5d} {row['when']:6} {row['label'][:46]:46} "
            f"{row['real']:9} {row['sim']:9} {mark:5} {row['real_s']:7.2f}s",
            flush=True,
        )

    try:
        doc = realcrash(
            args.scenario,
            store=args.store,
            points=args.points,
            seed=args.seed,
            speedup=args.speedup,
            blocking=args.blocking,
            progress=show if live else None,
        )
    except (ScenarioError, RealcrashError) as exc:
        print(f"durable-sim: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        _summary(doc)
    return 0 if doc["agreement"] == 1.0 and doc["labels_match"] else 1


def _summary(doc: dict[str, Any]) -> None:
    scale = doc["time_scale"]
    ref = doc["reference"]
    print(
        f"{doc['scenario']} [{doc['store']}]: {doc['boundaries']} boundaries, "
        f"{len(doc['points'])} of {doc['total_points']} process-kill points run; "
        f"time x{scale['speedup']:g} (model call {scale['model_latency_real_s'] * 1000:.0f} ms, "
        f"lease TTL {scale['lease_ttl_real_s']:.2f} s)"
    )
    if doc["labels_match"]:
        print(f"fault-free labels: identical to the simulator's ({doc['boundaries']} boundaries)")
    else:
        m = doc["label_mismatch"]
        print(
            f"fault-free labels DIFFER from the simulator's at index {m['index']}: "
            f"real {m['real']!r}, simulated {m['sim']!r}"
        )
    print(f"fault-free verdicts: real {ref['real']['verdict']}, simulated {ref['sim']['verdict']}")
    for d in doc["disagreements"]:
        print(f"disagreement at {d['point']} ({d['label']}):")
        if not d["aligned"]:
            first = d["first_divergence"]
            where = f" first at index {first['index']}" if first else ""
            print(
                f"  misaligned: the real run reached this index through other boundaries{where} "
                f"(real {first and first['real']!r}, simulated {first and first['sim']!r}); "
                f"crashed at {d['real_crashes']} vs {d['sim_crashes']}"
            )
        for side in ("real", "sim"):
            info = d[side]
            print(f"  {side:4} {info['verdict']}")
            if info.get("error"):
                print(f"       {info['error']}")
            for v in info["violations"][:3]:
                print(f"       {v['invariant']}: {v['explanation']}")
                for w in v["witness"][:3]:
                    print(f"         {w}")
    agreed = sum(1 for r in doc["points"] if r["agree"])
    total = len(doc["points"])
    if doc["retried_points"] or doc["reference_attempts"] > 1:
        print(
            f"re-run until the real trace lined up with the simulator's (a child the host "
            f"stalled runs on in scenario time): {doc['retried_points']} point(s); fault-free "
            f"run {doc['reference_attempts']} attempt(s)"
        )
    same = sum(1 for r in doc["points"] if r["same_observables"])
    print(
        f"observables (outcome, ledger, final log's event kinds, model calls, processes) "
        f"identical at {same}/{total} points"
    )
    for d in doc["divergences"][:10]:
        keys = ", ".join(sorted(d["differences"]))
        print(f"  {d['point']} ({d['label']}): {keys} differ")
    ratio = doc["per_point_s"] / doc["sim_per_point_s"] if doc["sim_per_point_s"] else 0.0
    print(
        f"agreement {agreed}/{total} = {doc['agreement']:.1%}; median per crash point: real "
        f"{doc['per_point_s']:.2f} s, simulated {doc['sim_per_point_s'] * 1000:.1f} ms "
        f"(x{ratio:.0f}); wall {doc['wall_s']:.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m sim.outputs.realcrash SCENARIO [--store file|sqlite] [--points N] [--json]
    ...``"""
    parser = argparse.ArgumentParser(
        prog="durable-sim realcrash",
        description=(
            "Kill real processes (SIGKILL) at every process-kill crash point of SCENARIO, resume "
            "in a new process, judge with the same oracles, and compare with the simulator."
        ),
    )
    add_realcrash_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    return main_realcrash(args)


if __name__ == "__main__":
    sys.exit(main())
