"""The parent of a fleet: N real workers on one store, killed, paused and restarted.

A fleet is reproducible in its plan, not in its timing: the seed decides each incarnation's
crash boundary (``kill_at``), after which lease grant a worker is paused, and each worker's
order of visits; the operating system decides who wins each race. That is the point of this
mode (the simulator already explores orders deterministically); its verdict must hold for every
timing.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.errors import UserError
from sim.explore import interrupts
from sim.explore.mutants import FLEET_MUTANTS
from sim.targets.boundaries import read_trace
from sim.targets.ledger import LEDGER_NAME, Ledger
from sim.targets.workers.child import CONFIG_NAME, EXIT_DONE, GO_NAME, trace_name
from sim.targets.workers.takeover import LOCK_WAIT_S, TakeoverDirector
from sim.world import tempdirs
from sim.world.stores import StoreKind

#: The boundaries a planned crash is drawn from: every store mutation and both tools' effects,
#: at the first few crossings of a process (a worker crosses dozens per conversation).
CRASH_LABELS = (
    *(f"store.acquire_lease#{n}" for n in (1, 2)),
    *(f"store.append#{n}" for n in range(1, 9)),
    "store.save_checkpoint#1",
    *(f"store.renew_lease#{n}" for n in (1, 2)),
    "store.release_lease#1",
    "tool.charge_card#1",
    "tool.send_receipt#1",
)
#: Upper bounds: a fleet is a test, never an open-ended job.
MAX_WORKERS = 16
MAX_CONVERSATIONS = 64
MAX_INCARNATIONS = 256
POLL_S = 0.02
#: How long a zombie stopped at its fence waits for a new owner (at most): below the 5 s a
#: correct store's waiters wait for its lock before they give up (Postgres ``lock_timeout``,
#: SQLite's busy timeout), so a correct store's waiters only wait.
FENCED_WAIT_MAX_S = LOCK_WAIT_S - 1.5

Progress = Callable[[str], None]


class FleetError(UserError, ValueError):
    """Options a fleet cannot run with (one line: a usage error)."""


def make_fleet_dir(seed: int) -> Path:
    """A new directory for one fleet, ``durable-sim-fleet-seed<SEED>-XXXX`` in the temporary
    directory, owned by this process (``sim.world.tempdirs``): a later sweep's cleaner removes
    it once this process is provably gone -- a ``workers`` command killed before its own cleanup
    -- unless it was kept (``keep_fleet_dir``). The seed is in the name for a user to find it;
    the cleaner reads the owner from the marker inside, never from a number in a name."""
    return Path(tempdirs.make("fleet", label=f"seed{seed}" if seed >= 0 else f"seedm{-seed}"))


def keep_fleet_dir(fleet_dir: Path) -> None:
    """Keep a fleet's directory for the user (``--keep``, or a fleet with violations): the
    cleaner never removes it."""
    tempdirs.keep(fleet_dir)


@dataclass(frozen=True, kw_only=True)
class FleetOptions:
    store: StoreKind = StoreKind.FILE
    workers: int = 3
    conversations: int = 6
    kills: int = 4
    pauses: int = 2
    fenced_pauses: int = 1  # incarnations stopped between an append's fence check and write
    seed: int = 0
    lease_ttl_s: float = 1.0
    heartbeat_s: float = 0.3
    checkpoint_every: int = 4
    deadline_s: float = 90.0
    mutant: str | None = None
    conninfo: str = ""  # the PostgreSQL server of a postgres fleet (libpq string or URI)

    def validate(self) -> None:
        """Eagerly, before any process starts: every bound the fleet relies on."""
        if self.store not in tuple(StoreKind):
            raise FleetError(f"unknown store {self.store!r} (choose from {', '.join(StoreKind)})")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise FleetError(f"--workers must be 1..{MAX_WORKERS}, not {self.workers}")
        if not 1 <= self.conversations <= MAX_CONVERSATIONS:
            raise FleetError(f"--conversations must be 1..{MAX_CONVERSATIONS}")
        if self.kills < 0 or self.pauses < 0 or self.kills + self.workers > MAX_INCARNATIONS:
            raise FleetError("--kills and --pauses must be >= 0 (and kills + workers <= 256)")
        if not 0 <= self.fenced_pauses <= self.workers:
            raise FleetError(f"--fenced-pauses must be 0..{self.workers} (one per worker at most)")
        if not 0 < self.heartbeat_s < self.lease_ttl_s:
            raise FleetError("the heartbeat must be positive and shorter than the lease TTL")
        if self.deadline_s <= 0:
            raise FleetError("--deadline must be positive")
        if self.store == "postgres" and not self.conninfo:
            raise FleetError("a postgres fleet needs --conninfo (a libpq string or URI)")
        known = [m.name for m in FLEET_MUTANTS]
        if self.mutant is not None and self.mutant not in known:
            raise FleetError(f"unknown fleet mutant {self.mutant!r}: {', '.join(sorted(known))}")


@dataclass
class Incarnation:
    """One worker process: its name, its planned crash, and how it ended."""

    name: str
    crash: tuple[str, str] | None
    popen: subprocess.Popen[bytes] | None = None
    status: int | None = None  # the exit status; -9 is the SIGKILL of its own crash
    paused_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        crash = f"{self.crash[0]}:{self.crash[1]}" if self.crash else None
        return {"name": self.name, "crash": crash, "status": self.status, "paused_s": self.paused_s}


@dataclass
class FleetRun:
    """What the parent saw; the judge adds the verdict."""

    options: FleetOptions
    fleet_dir: Path
    incarnations: list[Incarnation] = field(default_factory=list)
    pauses: list[dict[str, Any]] = field(default_factory=list)
    # Planned pauses that never found a worker holding a lease (the fleet ended first): the
    # fleet tested less than it was asked to, which its summary says.
    missed_pauses: int = 0
    fenced: list[dict[str, Any]] = field(default_factory=list)  # the zombies stopped at a fence
    timed_out: bool = False
    wall_s: float = 0.0


class _Plan:
    """The seeded plan: which incarnations crash where, and after which grant a holder is paused.

    A pause is planned by the fleet's g-th lease grant, not by a time: a time drawn from a
    window can fall after the last lease was released (a fast fleet on an idle machine), and
    the planned pause would silently never happen. The g are drawn from grants that come while
    others are still to come (every conversation is granted at least once, and the first
    ``workers`` grants come together at the go), so a holder exists when the count is reached.
    """

    def __init__(self, options: FleetOptions) -> None:
        rng = random.Random(f"fleet:{options.seed}")
        self._rng = rng
        self.kills_left = options.kills
        # At least one grant still to come after the g-th (a lone worker grants one at a time).
        last_g = max(1, options.conversations - max(options.workers, 2) + 1)
        self.pause_after_grants = sorted(rng.randint(1, last_g) for _ in range(options.pauses))
        self.pause_for_s = options.lease_ttl_s * 2.5
        self.fenced_wait_s = min(options.lease_ttl_s * 3, FENCED_WAIT_MAX_S)

    def crash(self) -> tuple[str, str] | None:
        if self.kills_left == 0:
            return None
        self.kills_left -= 1
        return (self._rng.choice(CRASH_LABELS), self._rng.choice(("before", "after")))

    def victim(self, live: list[Incarnation]) -> Incarnation:
        return self._rng.choice(live)


def _prepare(options: FleetOptions, fleet_dir: Path) -> None:
    fleet_dir.mkdir(parents=True, exist_ok=True)
    Ledger.create(fleet_dir / LEDGER_NAME).close()
    config = {
        "fleet_dir": str(fleet_dir),
        "store": options.store,
        "store_path": "store" if options.store == "file" else "store.sqlite",
        "conninfo": options.conninfo,
        # A schema of its own per fleet: fleets on one server never see each other's data.
        "namespace": _namespace(options, fleet_dir),
        "conversations": [f"c{n}" for n in range(1, options.conversations + 1)],
        "seed": options.seed,
        "lease_ttl_s": options.lease_ttl_s,
        "heartbeat_s": options.heartbeat_s,
        "checkpoint_every": options.checkpoint_every,
        "deadline_wall_s": time.time() + options.deadline_s,
        "mutant": options.mutant,
        "fenced_pauses": options.fenced_pauses,
    }
    (fleet_dir / CONFIG_NAME).write_text(json.dumps(config, indent=2), encoding="utf-8")


def _namespace(options: FleetOptions, fleet_dir: Path) -> str:
    """A PostgreSQL schema name of the fleet's own (plain: ``[a-z_][a-z0-9_]*``). The digest of
    the whole directory path keeps two fleets of one process apart even when their directories
    share a name (two tests' ``tmp_path / "fleet-0"`` on one session's server)."""
    tail = re.sub(r"[^a-z0-9_]", "_", fleet_dir.name.lower())[-16:]
    digest = hashlib.sha256(str(fleet_dir.resolve()).encode("utf-8")).hexdigest()[:10]
    return f"fleet_{os.getpid()}_{options.seed}_{tail}_{digest}"


def _spawn(run: FleetRun, plan: _Plan, progress: Progress) -> Incarnation:
    number = len(run.incarnations) + 1
    incarnation = Incarnation(name=f"p{number}", crash=plan.crash())
    command = [
        sys.executable,
        "-m",
        "sim.targets.workers.child",
        str(run.fleet_dir),
        incarnation.name,
    ]
    if incarnation.crash is not None:
        command += list(incarnation.crash)
    # A worker runs in a session of its own, out of reach of the terminal's Ctrl-C: only this
    # parent can stop it (``run_fleet``'s ``finally``), so it must be in the books before an
    # interrupt can unwind this frame. The stop signals wait until then (the worker gets the
    # mask it would have had: ``preexec_fn`` runs in it before its program starts).
    mask = interrupts.hold()
    try:
        incarnation.popen = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=lambda: interrupts.release(mask),
        )
        run.incarnations.append(incarnation)
    finally:
        interrupts.release(mask)  # an interrupt held back is raised here: the worker is known
    where = (
        f" (crashes at {incarnation.crash[0]}:{incarnation.crash[1]})" if incarnation.crash else ""
    )
    progress(f"spawn {incarnation.name}{where}")
    return incarnation


def run_fleet(
    options: FleetOptions, fleet_dir: Path, *, progress: Progress | None = None
) -> FleetRun:
    """Run the fleet to its end (every worker exited) or its deadline (the rest are killed)."""
    options.validate()
    say: Progress = progress or (lambda line: None)
    _prepare(options, fleet_dir)
    run = FleetRun(options=options, fleet_dir=fleet_dir)
    plan = _Plan(options)
    began = time.monotonic()
    live = [_spawn(run, plan, say) for _ in range(options.workers)]
    stopped: dict[str, float] = {}  # paused incarnation -> when to continue it
    director = TakeoverDirector(fleet_dir, plan.fenced_wait_s, trace_name, say)
    grants = _GrantCount()
    try:
        _start_together(run, live, options.deadline_s, say)
        started = time.monotonic()  # the plan's pause times count from the go
        while live:
            now_s = time.monotonic() - started
            if now_s > options.deadline_s + options.lease_ttl_s * 5:
                run.timed_out = True
                say(f"deadline: {len(live)} worker(s) still running are killed")
                break
            _continue_paused(live, stopped, now_s, say)
            director.poll(live, set(stopped), now_s)
            if not director.quiet(now_s):
                _pause_one(run, plan, live, stopped, director.self_stopped(), grants, now_s, say)
            live = _reap(run, plan, live, stopped, say)
            time.sleep(POLL_S)
    finally:
        # The deadline, or the parent interrupted: no orphan workers. Every incarnation, not
        # only ``live``: one spawned by a ``_reap`` that an interrupt cut short is in no list
        # but ``run.incarnations`` (``_kill`` skips those that exited).
        for incarnation in run.incarnations:
            _kill(incarnation)
        director.release_all()
    run.fenced = director.record
    run.missed_pauses = len(plan.pause_after_grants)
    if run.missed_pauses:
        say(f"{run.missed_pauses} planned pause(s) never found a worker holding a lease")
    run.wall_s = time.monotonic() - began
    return run


def _start_together(
    run: FleetRun, live: list[Incarnation], deadline_s: float, say: Progress
) -> None:
    """Give the go once every first worker is ready (or has exited): ``child.start_together``."""
    bound_s = time.monotonic() + deadline_s
    waiting = list(live)
    while waiting and time.monotonic() < bound_s:
        waiting = [
            i
            for i in waiting
            if i.popen is not None
            and i.popen.poll() is None
            and not any(
                r.get("kind") == "ready" for r in read_trace(run.fleet_dir / trace_name(i.name))
            )
        ]
        time.sleep(POLL_S)
    (run.fleet_dir / GO_NAME).write_text("go\n", encoding="utf-8")
    say(f"go ({len(live) - len(waiting)} of {len(live)} workers ready)")


def _pause_one(
    run: FleetRun,
    plan: _Plan,
    live: list[Incarnation],
    stopped: dict[str, float],
    self_stopped: set[str],
    grants: _GrantCount,
    now_s: float,
    say: Progress,
) -> None:
    """Once the fleet has granted the plan's next count of leases, stop a worker that holds a
    lease now (a pause matters only then: it makes a zombie); if none does, the pause waits for
    one. A worker stopped at its own fence or held for one (``self_stopped``) is the takeover
    director's."""
    if not plan.pause_after_grants or plan.pause_after_grants[0] > grants.count(run):
        return
    holders = [
        i
        for i in live
        if i.name not in stopped and i.name not in self_stopped and _holds_lease(run, i)
    ]
    if not holders:
        return
    plan.pause_after_grants.pop(0)
    victim = plan.victim(holders)
    assert victim.popen is not None
    os.kill(victim.popen.pid, signal.SIGSTOP)
    stopped[victim.name] = now_s + plan.pause_for_s
    victim.paused_s += plan.pause_for_s
    run.pauses.append({"process": victim.name, "at_s": round(now_s, 3), "for_s": plan.pause_for_s})
    say(f"pause {victim.name} for {plan.pause_for_s:.1f} s (past its lease)")


class _GrantCount:
    """The leases the fleet granted so far, from every incarnation's trace (an exited one's
    count is read once: its trace no longer grows)."""

    def __init__(self) -> None:
        self._exited: dict[str, int] = {}

    def count(self, run: FleetRun) -> int:
        total = 0
        for incarnation in run.incarnations:
            known = self._exited.get(incarnation.name)
            if known is None:
                rows = read_trace(run.fleet_dir / trace_name(incarnation.name))
                known = sum(1 for r in rows if r.get("t") == "note" and r.get("kind") == "grant")
                if incarnation.status is not None:
                    self._exited[incarnation.name] = known
            total += known
        return total


def _holds_lease(run: FleetRun, incarnation: Incarnation) -> bool:
    """Its trace's last grant comes after its last visit: it is serving a conversation now."""
    rows = read_trace(run.fleet_dir / trace_name(incarnation.name))
    kinds = [r.get("kind") for r in rows if r.get("t") == "note"]
    return "grant" in kinds and kinds[::-1].index("grant") < (
        kinds[::-1].index("visit") if "visit" in kinds else len(kinds)
    )


def _continue_paused(
    live: list[Incarnation], stopped: dict[str, float], now_s: float, say: Progress
) -> None:
    for incarnation in live:
        until = stopped.get(incarnation.name)
        if until is not None and until <= now_s:
            assert incarnation.popen is not None
            os.kill(incarnation.popen.pid, signal.SIGCONT)
            del stopped[incarnation.name]
            say(f"continue {incarnation.name} (a zombie until it finds out)")


def _reap(
    run: FleetRun,
    plan: _Plan,
    live: list[Incarnation],
    stopped: dict[str, float],
    say: Progress,
) -> list[Incarnation]:
    still: list[Incarnation] = []
    for incarnation in live:
        assert incarnation.popen is not None
        status = incarnation.popen.poll()
        if status is None:
            still.append(incarnation)
            continue
        incarnation.status = status
        stopped.pop(incarnation.name, None)
        if status == -signal.SIGKILL:
            say(f"{incarnation.name} killed at its crash boundary; restarting")
            still.append(_spawn(run, plan, say))
        else:
            say(
                f"{incarnation.name} exited with status {status}"
                + ("" if status == EXIT_DONE else " (see its trace)")
            )
    return still


def _kill(incarnation: Incarnation) -> None:
    popen = incarnation.popen
    if popen is None or popen.poll() is not None:
        return
    os.kill(popen.pid, signal.SIGKILL)
    incarnation.status = popen.wait(timeout=10)
