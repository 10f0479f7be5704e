"""Rejoin: does a crashed run go back to doing what the fault-free run does? (architecture 2.5)

An exhaustive depth-1 sweep costs the square of a run's length: every crash point runs the rest
of the scenario. The model checkers' way out is symmetry reduction (TLC's ``VIEW``): if a crashed
child's world, *canonicalised* under a renaming that cannot change its future, equals the
fault-free run's world at some boundary, the rest of the child is the rest of the fault-free run
renamed. This module measures how often that happens, before anything relies on it.

At the end of every commit of the reference run and of each crashed child (``CanonicalProbe``,
a fork hook that forks nothing) it takes a **canonical view** of everything the future depends
on, in named components (``COMPONENTS``) so a mismatch says what differs: the live processes'
conversation states (``reduce`` of the log) and the services and client (the client's steps
still due relative to now, an overdue one as due now), with sequence numbers
and epochs by rank among the values present (``durable/`` only orders and compares them), the
world's ids by role and tables in id order (``Renaming``, ``Roles``); the oracles' history;
each task's next timer relative to now and where each task waits; the world's RNG streams; the
files whose last bytes a power loss would take (written, not yet synced); the
lease's phase and the checkpoint cadence (functions of the log: ``durable.journal``, the
heartbeat counting from the last renewal); and trio's run-queue RNG, which both hosts reseed at
every commit's end from what was committed (``sim.world.seeded.seed_commit_scheduler``). Views
(``VIEWS``) leave out more and more of them.

A child *meets* the reference when one view equals the reference's at a commit that ended after
the crash point, and *rejoins* it when every later view equals the reference's from that commit
on: meeting once proves nothing (a view that misses what decides the future can part them
again). ``sim.explore.pruning`` stops a sweep's children at their rejoin; docs/performance.md,
"Rejoin", has the measurements.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from statistics import median
from typing import Any, TypedDict

import trio
from trio._core._run import CancelStatus
from trio.lowlevel import Task

from sim.explore import interrupts
from sim.explore.folding import ForksNothing
from sim.explore.sweep import base_schedule, depth1_schedules
from sim.run.runner import run_scenario
from sim.world.faults import CrashKind, Schedule, When
from sim.world.injector import Injector, Victim
from sim.world.process import COMMIT_LABEL
from sim.world.scenario import Scenario
from sim.world.seeded import digest_of, trio_rng_state
from sim.world.stores import StoreKind

#: The components of a canonical view, in report order.
COMPONENTS = (
    "boundary",
    "state",
    "world",
    "history",
    "timers",
    "tasks",
    "streams",
    "unsynced",
    "processes",
    "lease_phase",
    "checkpoint_cadence",
    "scheduler",
)

#: The views a measurement compares, each the components it leaves out of ``COMPONENTS``:
#: ``strict`` is everything; ``renamed`` leaves out trio's scheduler RNG (a function of the
#: rest since it is reseeded at every commit's end: the two rejoin alike, which a test
#: checks); ``judged`` also leaves the oracles' history to a judge that carries it (the
#: model's call-log length, the services' ledger and workspace history); ``aligned`` also
#: leaves out the lease's phase and the checkpoint cadence, which the runtime derives from the
#: log and which come back into phase only at the first checkpoint after a crash.
VIEWS: dict[str, frozenset[str]] = {
    "strict": frozenset(),
    "renamed": frozenset({"scheduler"}),
    "judged": frozenset({"scheduler", "history"}),
    "aligned": frozenset({"scheduler", "history", "lease_phase", "checkpoint_cadence"}),
}

#: World parts the oracles read as history (what happened, not what decides what happens next).
HISTORY_PARTS = ("model_log", "ledger", "workspace_history")

#: World parts left out of the view: the liveness watchdog's deadline is the harness's bound on a
#: run (it moves with the last fault), not something the runtime's future reads.
IGNORED_WORLD_PARTS = ("liveness_deadline",)

#: State keys whose values are log sequence numbers.
_SEQUENCE_KEY = re.compile(r"(^|_)sequence$")
#: Id kinds a process draws besides the world's counters (``sim.world.seeded.Ids``).
PROCESS_ID_KINDS = ("owner",)
_DIGITS = re.compile(r"\d+")
_SPLIT = re.compile(r"(\d+)")

#: Where a view is taken: at the end of each commit. A conversation's state changes only at a
#: commit, and two runs whose futures are the same renamed meet again at the next commit's end;
#: a child that meets the reference only after its last commit (at the final lease release)
#: has nothing left to save and is not counted. Viewing every boundary instead (five times as
#: many in ``long_horizon``) met the reference more often, mostly at the run's end.
VIEWED = COMMIT_LABEL

#: The crash kinds a measurement takes: the ones a crash record marks (a probe views the world
#: only once the crash has happened; a storage fault or a pause is not a crash of a process).
MEASURED_KINDS = frozenset({CrashKind.PROCESS, CrashKind.POWER})

#: The crash points one measurement runs per scenario by default: each is a whole run that
#: takes a view at every commit, so a long trace's are spread evenly over a sample of them.
DEFAULT_POINTS = 60
MAX_POINTS = 10_000


def spread(items: list[Schedule], count: int) -> list[Schedule]:
    """``count`` of ``items`` spread evenly from the first (all of them if there are fewer)."""
    assert 1 <= count <= MAX_POINTS, count
    if len(items) <= count:
        return items
    return [items[i * len(items) // count] for i in range(count)]


def _collect(value: object, key: str, sequences: set[int], epochs: set[int]) -> None:
    """Every sequence number and epoch in ``value`` (a JSON-like tree)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _collect(v, str(k), sequences, epochs)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, key, sequences, epochs)
    elif isinstance(value, int) and not isinstance(value, bool):
        if _SEQUENCE_KEY.search(key):
            sequences.add(value)
        elif key == "epoch":
            epochs.add(value)


def _without_history(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` without the fields ``durable/`` writes and never reads again: an intent's
    epoch (only ``durable.inspect`` shows it) and a settled compaction's (only an open one's is
    compared with the lease's, when its summary is applied)."""
    for intent in state.get("intents", {}).values():
        intent.pop("epoch", None)
    for compaction in state.get("compactions", {}).values():
        if compaction.get("status") != "open":
            compaction.pop("epoch", None)
    return state


@dataclass(frozen=True)
class Renaming:
    """The symmetry a canonical view quotients out: sequences and epochs by rank among the
    values present (``durable/`` only orders them, appends after the last sequence and compares
    epochs: a zombie's older epoch stays older than the new owner's and the service's fence),
    ids by role (``Roles``), times relative to ``now_s`` in whole nanoseconds."""

    sequences: dict[int, int]
    epochs: dict[int, int]
    now_s: float

    @classmethod
    def of(cls, trees: Iterable[object], *, extra_epochs: Iterable[int], now_s: float) -> Renaming:
        sequences: set[int] = set()
        epochs: set[int] = set(extra_epochs)
        for tree in trees:
            _collect(tree, "", sequences, epochs)
        return cls(
            {s: i for i, s in enumerate(sorted(sequences))},
            {e: i for i, e in enumerate(sorted(epochs))},
            now_s,
        )

    def apply(self, value: object, *, ids: Roles, key: str = "") -> object:
        """``value`` renamed; ``ids`` (one per view) names each id; ``key`` is the dict key
        ``value`` is found under, which says what a number is."""
        if isinstance(value, dict):
            # In id order, not insertion order: a state recovered from a checkpoint has its
            # tables in the checkpoint's (sorted) order, a state built commit by commit in
            # creation order; the view must not tell them apart.
            ordered = sorted(value.items(), key=lambda item: _natural(str(item[0])))
            return {self.apply(k, ids=ids): self.apply(v, ids=ids, key=str(k)) for k, v in ordered}
        if isinstance(value, (list, tuple)):
            return [self.apply(v, ids=ids, key=key) for v in value]
        if isinstance(value, str):
            return ids.rename(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        if _SEQUENCE_KEY.search(key) and value in self.sequences:
            return ("seq", self.sequences[int(value)])
        if key == "epoch" and value in self.epochs:
            return ("epoch", self.epochs[int(value)])
        if key.endswith("_s"):
            return ("dt_ns", _dt_ns(value, self.now_s))
        return value


def _natural(text: str) -> list[tuple[str, int]]:
    """``call-10`` after ``call-9``: text runs compared as text, digit runs as numbers."""
    return [(part, 0) if not part.isdigit() else ("", int(part)) for part in _SPLIT.split(text)]


@dataclass
class Roles:
    """Ids named by role: ``call-7`` becomes ``call#2`` if it is the third call id one view
    meets (a view walks each table in id order). Only the kinds the world's id counters and
    its processes draw are renamed (``kinds``), so a workspace file named ``notes-3.txt`` or a
    tool's own text keeps its name."""

    kinds: tuple[str, ...]
    names: dict[str, str] = field(default_factory=dict)
    per_kind: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        alternatives = "|".join(re.escape(kind) for kind in sorted(self.kinds))
        self._pattern = re.compile(rf"\b({alternatives})-(\d+)\b") if alternatives else None

    def rename(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(self.name, text)

    def name(self, match: re.Match[str]) -> str:
        token, kind = match.group(0), match.group(1)
        name = self.names.get(token)
        if name is None:
            name = self.names[token] = f"{kind}#{self.per_kind[kind]}"
            self.per_kind[kind] += 1
        return name


def _frames(coro: object) -> list[str]:
    """Where a task waits: each frame of its await chain, as ``function:line``."""
    out: list[str] = []
    for _ in range(64):  # a bound on the await chain's depth
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        out.append(f"{frame.f_code.co_qualname}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None)
    return out


def _live_tasks() -> list[tuple[int, Task]]:
    """trio's tasks with their depth, depth-first from the root, each nursery's children in
    creation order: the one walk both the task tree and the timers read."""
    out: list[tuple[int, Task]] = []

    def visit(task: Task, depth: int) -> None:
        out.append((depth, task))
        for nursery in task.child_nurseries:
            for child in sorted(nursery.child_tasks, key=lambda t: t._counter):
                visit(child, depth + 1)

    root = trio.lowlevel.current_root_task()
    assert root is not None, "a view is taken inside trio.run"
    visit(root, 0)
    return out


def _task_tree(tasks: list[tuple[int, Task]]) -> list[object]:
    """trio's task tree (``_live_tasks``), names without their numbers, and the live tasks'
    global creation order (trio sorts each batch of runnable tasks by it before its seeded
    shuffle, so it decides who runs first)."""
    rows = [(depth, _DIGITS.sub("#", task.name), _frames(task.coro)) for depth, task in tasks]
    order = sorted(range(len(tasks)), key=lambda i: tasks[i][1]._counter)
    return [rows, order]


#: The runtime's task that keeps the lease (``durable.lease.heartbeat``): its timer is part of
#: the lease's phase, not of the rest of the world's timers.
LEASE_TASKS = frozenset({"heartbeat"})


def _dt_ns(at_s: float, now_s: float) -> int:
    """``at_s`` relative to ``now_s``, in whole nanoseconds (no float noise, no ``-0.0``)."""
    return round((at_s - now_s) * 1e9)


def _task_timers(tasks: list[tuple[int, Task]], ignore: Iterable[float]) -> list[tuple[str, int]]:
    """Each task's nearest deadline (its innermost cancel scope that has one, once per scope),
    relative to now, with the function the task runs: a client's next action, a retry's
    backoff, the heartbeat's next renewal."""
    now, skipped = trio.current_time(), set(ignore)
    seen: set[int] = set()
    out: list[tuple[str, int]] = []
    for _, task in tasks:
        status: CancelStatus | None = task._cancel_status  # trio's own, as the scopes nest
        for _ in range(256):  # a bound on nested cancel scopes
            if status is None:
                break
            deadline = status._scope._registered_deadline
            if deadline != math.inf and deadline not in skipped:
                if id(status._scope) not in seen:
                    seen.add(id(status._scope))
                    code = getattr(task.coro, "cr_code", None)
                    out.append((code.co_qualname if code else "?", _dt_ns(deadline, now)))
                break
            status = status._parent
    return sorted(out)


def _per_conversation(
    states: list[dict[str, Any]],
    leases: list[dict[str, Any]],
    fence: dict[str, int],
    now_s: float,
) -> dict[str, Renaming]:
    """One renaming per conversation: sequences and epochs are ranked within the conversation
    they belong to (its journals -- a zombie's and its new owner's --, its lease, the service's
    fence for it), as ``durable/`` only ever compares them within one conversation's log and
    lease. Ranking them across conversations would tell a parent recovered at epoch 2 with a
    fresh sub-agent at epoch 1 from a parent and a sub-agent both at epoch 1."""
    out: dict[str, Renaming] = {}
    for conversation in sorted({state["conversation_id"] for state in states}):
        mine = [
            [state, lease]
            for state, lease in zip(states, leases, strict=True)
            if state["conversation_id"] == conversation
        ]
        extra = [fence[conversation]] if conversation in fence else []
        out[conversation] = Renaming.of(mine, extra_epochs=extra, now_s=now_s)
    return out


def canonical_view(injector: Any, when: str, label: str) -> dict[str, object]:
    """The canonical view of the world at one boundary side (see the module's docstring)."""
    now = trio.current_time()
    journals = [
        conversation.journal
        for process in injector.processes()
        if process.alive and process.runtime is not None
        for conversation in process.runtime.open_conversations()
    ]
    states = [_without_history(j.state.model_dump(mode="json")) for j in journals]
    leases = [j.lease.model_dump(mode="json") for j in journals]
    parts = dict(injector.world_parts())
    skipped = [parts[name] for name in IGNORED_WORLD_PARTS if name in parts]
    world = {k: v for k, v in parts.items() if k not in IGNORED_WORLD_PARTS}
    renamings = _per_conversation(states, leases, dict(world.get("fence_epoch", [])), now)
    plain = Renaming.of([], extra_epochs=[], now_s=now)  # the world's own numbers: times only
    world["fence_epoch"] = [
        (k, ("epoch", renamings[k].epochs[e] if k in renamings else 0))
        for k, e in world.get("fence_epoch", [])
    ]
    # A client step already due is taken at once, however long ago it fell due: clamp to 0.
    due = world.pop("client_due_s", [])
    world["client_due_ns"] = [max(0, _dt_ns(at_s, now)) for at_s in due]
    stamps = sorted({stamp for _, stamp in world.get("rejected", [])})
    world["rejected"] = [(k, stamps.index(stamp)) for k, stamp in world.get("rejected", [])]
    tasks = _live_tasks()
    timers = _task_timers(tasks, skipped)
    ids = Roles((*injector.world.ids.kinds(), *PROCESS_ID_KINDS))
    fs = injector.fs
    now_held = fs.snapshot() if fs else {}
    synced = fs.durable_snapshot() if fs else {}
    files = sorted(_DIGITS.sub("#", path) for path in now_held)
    return {
        "boundary": (_DIGITS.sub("#", label.split("#")[0]), when),
        "state": [
            renamings[s["conversation_id"]].apply([s, j.fenced], ids=ids)
            for s, j in zip(states, journals, strict=True)
        ],
        "world": plain.apply({k: v for k, v in world.items() if k not in HISTORY_PARTS}, ids=ids),
        "history": [(k, v) for k, v in world.items() if k in HISTORY_PARTS],
        "timers": [t for t in timers if t[0] not in LEASE_TASKS],
        "tasks": _task_tree(tasks),
        "streams": [(k, v.getstate()) for k, v in injector.world.streams()],
        "unsynced": sorted(
            _DIGITS.sub("#", path) for path, data in now_held.items() if synced.get(path) != data
        ),
        "processes": sorted(p.slot for p in injector.processes() if p.alive),
        "lease_phase": [
            [renamings[lease["conversation_id"]].apply(lease, ids=ids) for lease in leases],
            [t for t in timers if t[0] in LEASE_TASKS],
        ],
        "checkpoint_cadence": [[j.records_since_settled for j in journals], files],
        "scheduler": trio_rng_state(),
    }


#: The components ``sketch`` reads: a view that compares them all tells two sketches apart
#: only where their views differ (``sim.explore.pruning`` asserts its view does).
SKETCHED = frozenset(
    {"boundary", "processes", "state", "history", "lease_phase", "checkpoint_cadence"}
)


def sketch(injector: Any, when: str, label: str) -> str:
    """A digest of a few counts the canonical view determines (the boundary, the live
    processes, each open conversation's collections by size, its fencing, its records since
    a task settled and its lease's expiry relative to now, as the view renames it): two equal
    views have equal sketches, so a child whose sketch is not the fault-free run's there cannot
    meet it, and its full view (a walk of every conversation's whole state, which grows with
    the run) need not be taken (``sim.explore.pruning``). The lease's expiry and the oracles'
    history (the model's calls, the ledger) tell at once most children that never rejoin: in
    a 10-turn ``long_horizon`` they halved the full views a pruned sweep takes."""
    now_s = trio.current_time()
    sizes = sorted(
        (
            len(j.state.messages),
            len(j.state.tasks),
            len(j.state.tool_results),
            len(j.state.intents),
            len(j.state.runs),
            len(j.state.submissions),
            len(j.state.queue),
            j.state.active_run is None,
            j.fenced,
            j.records_since_settled,
            _dt_ns(j.lease.expires_at_s, now_s),
        )
        for process in injector.processes()
        if process.alive and process.runtime is not None
        for j in (c.journal for c in process.runtime.open_conversations())
    )
    alive = sorted(p.slot for p in injector.processes() if p.alive)
    history = [(k, v) for k, v in injector.world_parts() if k in HISTORY_PARTS]
    return digest_of([_DIGITS.sub("#", label.split("#")[0]), when, alive, sizes, history])


@dataclass
class Row:
    """One commit's end in a probed run: ``stamp`` counts the boundaries entered by then (a
    commit's end comes after every boundary inside it), with a digest per component and the
    ``sketch`` of its view."""

    stamp: int
    digests: dict[str, str]
    sketch: str = ""

    def key(self, view: str) -> str:
        """The digest of the components ``view`` compares."""
        left_out = VIEWS[view]
        return digest_of([self.digests[name] for name in COMPONENTS if name not in left_out])


@dataclass
class CanonicalProbe(ForksNothing):
    """A ``sim.world.injector.ForkHook`` that forks nothing: at every commit's end after the
    base schedule's last crash it records the canonical view's digests (and keeps the last
    view, to say what differs when a child never rejoins)."""

    base: Schedule
    in_child: bool = False
    child_schedule: Schedule = field(default_factory=Schedule)
    rows: list[Row] = field(default_factory=list)
    last_view: dict[str, object] = field(default_factory=dict)

    def fork_at(
        self, injector: Injector, process: Victim, index: int, when: When, label: str
    ) -> None:
        # At each commit's end (``VIEWED``) once the base schedule's last crash has happened:
        # an operation's inner boundaries come before a crash at its ``after``.
        if when != "after" or not label.startswith(VIEWED):
            return
        if self.base.points and not injector.crashed_at(self.base.points[-1]):
            return
        view = canonical_view(injector, when, label)
        digests = {k: digest_of([v]) for k, v in view.items()}
        self.rows.append(Row(injector.next_index, digests, sketch(injector, when, label)))
        self.last_view = view


class RejoinDoc(TypedDict):
    """One scenario x store's measurement as ``durable-sim rejoin --json`` and the bench write
    it; every per-view figure is keyed by the view's name (``VIEWS``)."""

    scenario: str
    store: str
    points: int
    of_points: int
    rejoin_fraction: dict[str, float]
    met_fraction: dict[str, float]
    median_commits_to_rejoin: dict[str, float | None]
    differs_at_end: dict[str, dict[str, int]]


@dataclass
class ScenarioRejoin:
    """One scenario x store, per view: how many crashed children *meet* the fault-free run
    (an equal view once) and how many *rejoin* it (from that commit on, every view equal to the
    fault-free run's from the commit it met: the rest of the run is the reference's renamed)."""

    scenario: str
    store: str
    points: int = 0  # crash points measured
    of: int = 0  # the depth-1 crash points they are spread over
    met: Counter[str] = field(default_factory=Counter)  # view -> children that meet it once
    rejoined: Counter[str] = field(default_factory=Counter)  # view -> children that rejoin
    # view -> commits from the crash to the rejoin, per child that rejoins
    after: dict[str, list[int]] = field(default_factory=dict)
    # view -> component -> children that never rejoin in that view whose last view differs
    # from the reference's last in that component: what keeps them apart for good
    differs_at_end: dict[str, Counter[str]] = field(default_factory=dict)

    def fraction(self, view: str) -> float:
        """The share of the measured points whose child rejoins in ``view``."""
        return self.rejoined[view] / self.points if self.points else 0.0

    def document(self) -> RejoinDoc:
        """The measurement as JSON (``durable-sim rejoin --json``, the bench)."""
        share = {
            view: round(self.met[view] / self.points, 4) if self.points else 0.0 for view in VIEWS
        }
        return {
            "scenario": self.scenario,
            "store": self.store,
            "points": self.points,
            "of_points": self.of,
            "rejoin_fraction": {view: round(self.fraction(view), 4) for view in VIEWS},
            "met_fraction": share,
            "median_commits_to_rejoin": {
                view: median(self.after[view]) if self.after.get(view) else None for view in VIEWS
            },
            "differs_at_end": {
                view: dict(sorted(self.differs_at_end.get(view, Counter()).items()))
                for view in VIEWS
            },
        }


def _meet(
    child: CanonicalProbe, reference: list[str], stamps: list[int], crashed_at: int, view: str
) -> tuple[int | None, int | None]:
    """Where a child first meets the reference (its view equal to the reference's at a commit
    that ends after the crash point) and where it first rejoins it (met, and every later view
    equal to the reference's from there): positions in the child's commits, None if never.
    ``reference`` holds the reference's keys in ``view``, ``stamps`` its commits' stamps."""
    keys = [row.key(view) for row in child.rows]
    later: dict[str, list[int]] = {}
    for position, key in enumerate(reference):
        if stamps[position] > crashed_at:
            later.setdefault(key, []).append(position)
    met = rejoined = None
    for position, key in enumerate(keys):
        for start in later.get(key, ()):
            met = position if met is None else met
            if keys[position:] == reference[start:]:
                return met, position
    return met, rejoined


def _ends_differ(child: CanonicalProbe, reference: CanonicalProbe) -> list[str]:
    """The components in which the two runs' last views differ."""
    return [
        name
        for name in COMPONENTS
        if digest_of([child.last_view.get(name)]) != digest_of([reference.last_view.get(name)])
    ]


def measure(
    scenario: Scenario,
    *,
    store: StoreKind | str,
    seed: int = 0,
    crash_kinds: Iterable[CrashKind | str] = ("process",),
    points: int = DEFAULT_POINTS,
    progress: Callable[[int], None] | None = None,
) -> ScenarioRejoin:
    """Run the fault-free run and the depth-1 crashes of ``crash_kinds`` (``points`` of them,
    spread evenly) naively, each under a ``CanonicalProbe``, and count the children whose
    canonical view meets, and rejoins, the reference's."""
    kinds = [CrashKind(k) for k in crash_kinds]
    if not set(kinds) <= MEASURED_KINDS:
        raise ValueError(f"rejoin measures process and power crashes, not {kinds}")
    kind = StoreKind(store)
    base = base_schedule(scenario, seed=seed, store=kind)
    reference_probe = CanonicalProbe(base)
    reference = run_scenario(scenario, seed=seed, store=kind, schedule=base, fork=reference_probe)
    keys = {view: [row.key(view) for row in reference_probe.rows] for view in VIEWS}
    stamps = [row.stamp for row in reference_probe.rows]
    labels = [b.label for b in reference.trace.boundaries]
    every = depth1_schedules(labels, kinds, base=base)
    schedules = spread(every, points)
    out = ScenarioRejoin(scenario.name, str(kind), points=len(schedules), of=len(every))
    for schedule in schedules:
        interrupts.stop_if_requested()
        probe = CanonicalProbe(schedule)
        run_scenario(scenario, seed=seed, store=kind, schedule=schedule, fork=probe)
        crashed_at = schedule.last_index
        for view in VIEWS:
            met, rejoined = _meet(probe, keys[view], stamps, crashed_at, view)
            out.met[view] += met is not None
            if rejoined is not None:
                out.rejoined[view] += 1
                out.after.setdefault(view, []).append(rejoined)
            else:
                apart = [c for c in _ends_differ(probe, reference_probe) if c not in VIEWS[view]]
                out.differs_at_end.setdefault(view, Counter()).update(apart)
        if progress is not None:
            progress(1)
    return out


def overall(measures: list[ScenarioRejoin]) -> dict[str, float]:
    """Each view's share of all the depth-1 crash points measured from: each scenario's
    fraction (of its sample) weighted by its number of points."""
    points = sum(m.of for m in measures)
    return {
        view: round(sum(m.fraction(view) * m.of for m in measures) / points, 4) if points else 0.0
        for view in VIEWS
    }


def rows_of(measures: list[ScenarioRejoin]) -> Iterator[str]:
    """A plain table, one line per scenario x store: each view's fraction."""
    views = " ".join(f"{v:>8}" for v in VIEWS)
    yield f"{'scenario':<34} {'store':<7} {'points':>12} {views}"
    for m in measures:
        fractions = " ".join(f"{m.fraction(v):>8.1%}" for v in VIEWS)
        yield f"{m.scenario:<34} {m.store:<7} {f'{m.points}/{m.of}':>12} {fractions}"
