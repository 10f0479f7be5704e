"""Property-based fuzzing of recovery paths (docs/architecture.md, 2.7) with Hypothesis.

Two fuzzers:

- the **schedule fuzzer** draws crash schedules of any depth over a scenario's recorded boundary
  trace (the first crash biased toward commits, tool effects and model calls; each next one a
  short distance later, where the recovery of the previous crash runs) and checks every oracle;
- the **world machine**, a ``RuleBasedStateMachine``, writes a *program*: a scenario built step by
  step from rules (submit, re-send a request id, advance time, crash by process kill or power loss,
  pause a worker past its lease so a second one takes over, abort, inject model errors). After
  every step the whole program runs in a fresh deterministic world (so every step is replayable)
  and the safety oracles must hold; at teardown liveness must hold too.

Both shrink: a failure ends as a short schedule or a short program, printed in replay form and
saved to the regression corpus (``tests/corpus/``), which ``make test`` replays on every run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import hypothesis.core as hypothesis_core
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from sim.explore.parallel import Step, estimated_cost
from sim.judgement.judge import judge
from sim.judgement.oracles import Violation
from sim.judgement.repro import replay_command
from sim.run import collector
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When, boundary_kind, tries_kind
from sim.world.scenario import Scenario
from sim.world.stores import StoreKind

CORPUS_SCHEMA_VERSION = 1
INTERESTING_KINDS = ("commit", "tool", "model", "lease")
MAX_GAP = 40  # how far after one crash the next one is drawn (the recovery region)


class _OracleFailed(Exception):
    """An example the oracles failed: the fuzzers' own signal to Hypothesis. Any other error
    raised in an example (the harness's: an unmapped fault, a broken assertion) propagates as
    itself, never mistaken for a finding."""


# -- schedules ------------------------------------------------------------------------------------


def schedule_strategy(
    reference: RunResult, *, max_depth: int = 3, kinds: tuple[str, ...] = ("process", "power")
) -> st.SearchStrategy[Schedule]:
    """Crash schedules over ``reference``'s boundary trace: 1..max_depth increasing points.

    A storage fault lands where a sweep tries one (``tries_kind``: after an acknowledged store
    operation, whose data is synced): drawn at an index, it moves to the first such boundary
    at or after it, and becomes a process kill where none is left -- or where the schedule
    already has one: the oracles judge a storage fault against the damage table one at a time
    (damage on damage has no record, docs/crash-model.md). ``kinds`` is what the store takes
    (``StoreKind.can_inject``): on SQLite the point's fault is one of SQLite's files' own, to
    its database's pages or its log's last transaction (``sim.world.storage_faults``)."""
    n = len(reference.trace.boundaries)
    kinds_of = [(b.index, boundary_kind(b.label)) for b in reference.trace.boundaries]
    storage_at = [
        b.index
        for b in reference.trace.boundaries
        if tries_kind(CrashKind.STORAGE, When.AFTER, b.label)
    ]
    effects = [i for i, kind in kinds_of if kind == "tool"]
    interesting = [i for i, kind in kinds_of if kind in INTERESTING_KINDS]
    firsts = st.one_of(
        st.sampled_from(effects or [0]),
        st.sampled_from(interesting or [0]),
        st.integers(0, max(n - 1, 0)),
    )
    # Recovery happens right after a restart: most next crashes land within a few boundaries.
    gaps = st.one_of(st.integers(1, 12), st.integers(1, MAX_GAP))

    @st.composite
    def draw_schedule(draw: st.DrawFn) -> Schedule:
        depth = draw(st.integers(1, max_depth))
        index = draw(firsts)
        points: list[CrashPoint] = []
        for i in range(depth):
            if i:
                index += draw(gaps)
            when = draw(st.sampled_from(("before", "after")))
            kind = draw(st.sampled_from(kinds))
            if kind == "storage":
                taken = any(p.kind == "storage" for p in points)
                later = [] if taken else [at for at in storage_at if at >= index]
                index, when = (later[0], "after") if later else (index, when)
                kind = kind if later else "process"
            points.append(CrashPoint(index, When(when), CrashKind(kind)))
        return Schedule.of(*points)

    return draw_schedule()


@dataclass
class Finding:
    """A shrunk failure: the schedule or program that reproduces it, and what it violated."""

    fuzzer: str
    scenario: Scenario
    store: str
    seed: int
    schedule: str
    violations: list[Violation]
    program: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # the boundary each crash point names

    def repro(self, scenario_ref: str) -> str:
        return replay_command(
            scenario_ref, seed=self.seed, store=self.store, schedule=self.schedule
        )

    def describe(self) -> list[str]:
        lines = [f"found by the {self.fuzzer} fuzzer on {self.scenario.name}[{self.store}]"]
        if self.program:
            lines.append("shrunk program:")
            lines += [f"  {n + 1}. {step}" for n, step in enumerate(self.program)]
        lines.append(f"schedule: {self.schedule}")
        for v in self.violations[:3]:
            lines.append(f"{v.invariant} {v.explanation}")
            lines += [f"    {w}" for w in v.witness[:3]]
        return lines


def _failing(outcome_violations: list[Violation], *, liveness: bool) -> list[Violation]:
    keep = {"safety"} | ({"liveness"} if liveness else set())
    return [v for v in outcome_violations if v.verdict in keep]


def fuzz_schedules(
    scenario: Scenario,
    *,
    store: StoreKind | str = "file",
    seed: int = 0,
    examples: int = 200,
    fuzz_seed: int = 0,
    max_depth: int = 3,
    on_example: Callable[[], None] | None = None,
) -> Finding | None:
    """Search crash schedules of ``scenario`` for an oracle failure; the shrunk one or None."""
    reference = run_scenario(scenario.without_faults(), seed=seed, store=store)
    kinds = tuple(k for k in ("process", "power", "storage") if StoreKind(store).can_inject(k))
    last: list[tuple[Schedule, list[Violation], list[str]]] = []

    @hypothesis_seed(fuzz_seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    @given(schedule_strategy(reference, max_depth=max_depth, kinds=kinds))
    def prop(schedule: Schedule) -> None:
        if on_example:
            on_example()
        outcome = judge(
            run_scenario(scenario, seed=seed, store=store, schedule=schedule),
            reference,
            determinism=False,
        )
        bad = _failing(outcome.violations, liveness=True)
        if bad:
            last.append((schedule, bad, list(outcome.labels)))
            raise _OracleFailed(f"{schedule.text()}: {bad[0].invariant} {bad[0].explanation}")

    try:
        with collector.between_runs():
            prop()
    except _OracleFailed:
        schedule, violations, labels = last[-1]  # Hypothesis replays the shrunk example last
        return Finding(
            "schedules", scenario, store, seed, schedule.text(), violations, labels=labels
        )
    return None


# -- the world machine ----------------------------------------------------------------------------

TOPICS = ("fix the config", "charge the renewal", "tell the customer", "check the status")
TOOLS = [
    {"name": "read", "operation": "workspace.read", "policy": "replay_safe"},
    {"name": "edit", "operation": "workspace.append_line", "policy": "unsafe"},
    {"name": "charge", "operation": "payments.charge", "policy": "idempotent", "latency_s": 2},
    {"name": "notify", "operation": "outbox.send", "policy": "unsafe", "latency_s": 3},
]
CALLS = [
    {"tool": "read", "arguments": {"path": "notes.txt"}},
    {"tool": "edit", "arguments": {"path": "notes.txt", "line": "done"}},
    {"tool": "charge", "arguments": {"amount": 30}},
    {"tool": "notify", "arguments": {"to": "ops@example.com", "subject": "update"}},
]


def program_scenario(program: dict[str, Any]) -> Scenario:
    return Scenario.model_validate(program)


def empty_program() -> dict[str, Any]:
    return {
        "name": "fuzz_program",
        "description": "A program written by the fuzzer's world machine.",
        "tools": TOOLS,
        "files": {"notes.txt": "start"},
        "inputs": [],
        "script": [],
        "actions": [],
        "resends": [],
        "timed_crashes": [],
        "liveness_bound_s": 3600,
    }


class WorldMachine(RuleBasedStateMachine):
    """Rules write a program; after each step the program runs in a fresh world and the safety
    oracles must hold (liveness at teardown). ``store`` and ``seed`` are class attributes set by
    ``fuzz_machine``."""

    store: StoreKind | str = "file"
    seed: int = 0
    failures: list[tuple[dict[str, Any], list[Violation], list[str]]] = []
    on_example: Callable[[], None] | None = None

    def __init__(self) -> None:
        super().__init__()
        if WorldMachine.on_example is not None:
            WorldMachine.on_example()  # one machine per example: progress for long fuzz runs
        self.program = empty_program()
        self.now_s = 0.0
        self.steps: list[str] = []

    def _note(self, text: str) -> None:
        self.steps.append(text)

    @initialize()
    def first_input(self) -> None:
        self.submit(0)

    @rule(topic=st.integers(0, len(TOPICS) - 1))
    def submit(self, topic: int) -> None:
        self._add_input(topic, "follow_up")

    @precondition(lambda self: len(self.program["inputs"]) > 0)
    @rule(topic=st.integers(0, len(TOPICS) - 1), mode=st.sampled_from(("steer", "reject")))
    def submit_with_mode(self, topic: int, mode: str) -> None:
        """An input in another inbox mode: a ``steer`` lands at the running run's next
        post-tools boundary; a ``reject`` is refused while a run is active (sometimes it meets
        an idle conversation: then it is accepted)."""
        self._add_input(topic, mode)

    def _add_input(self, topic: int, mode: str) -> None:
        k = len(self.program["inputs"])
        if k >= 6:
            return
        rid = f"r{k + 1}"
        content = f"{TOPICS[topic]} ({rid})"
        spec: dict[str, Any] = {"content": content, "request_id": rid, "at_s": self.now_s}
        if mode != "follow_up":
            spec["mode"] = mode
        self.program["inputs"].append(spec)
        call = CALLS[(k + topic) % len(CALLS)]
        self.program["script"].append([{"calls": [call]}, {"answer": f"done: {TOPICS[topic]}"}])
        suffix = f" ({mode})" if mode != "follow_up" else ""
        self._note(f"submit {rid}{suffix} at {self.now_s:g}s")

    @precondition(lambda self: len(self.program["inputs"]) > 0)
    @rule(which=st.integers(0, 5))
    def resubmit(self, which: int) -> None:
        rid = self.program["inputs"][which % len(self.program["inputs"])]["request_id"]
        self.program["resends"].append({"request_id": rid, "at_s": self.now_s})
        self._note(f"resend {rid} at {self.now_s:g}s")

    @rule(dt=st.sampled_from((0.5, 1.0, 3.0, 20.0, 45.0)))
    def advance(self, dt: float) -> None:
        self.now_s += dt
        self._note(f"advance {dt:g}s")

    @precondition(lambda self: len(self.program["timed_crashes"]) < 4)
    @rule(kind=st.sampled_from(("process", "power")))
    def crash(self, kind: str) -> None:
        self.program["timed_crashes"].append({"at_s": self.now_s, "kind": kind})
        self._note(f"crash ({kind}) at {self.now_s:g}s")

    @precondition(lambda self: self.program.get("takeover") is None)
    @rule()
    def pause_worker(self) -> None:
        self.program["takeover"] = {
            "pause_at_s": self.now_s,
            "pause_for_s": 60,
            "second_worker_at_s": self.now_s + 35,
        }
        self._note(f"pause the worker at {self.now_s:g}s for 60s; second worker at +35s")

    @precondition(lambda self: len(self.program["actions"]) < 2)
    @rule()
    def abort(self) -> None:
        self.program["actions"].append({"kind": "abort", "at_s": self.now_s})
        self._note(f"abort at {self.now_s:g}s")

    @precondition(lambda self: len(self.program["inputs"]) > 0)
    @rule(retryable=st.booleans(), attempts=st.integers(1, 2))
    def model_error(self, retryable: bool, attempts: int) -> None:
        turns = self.program["script"][-1]
        turns[0] = {**turns[0], "fail_attempts": attempts, "fail_retryable": retryable}
        kind = "retryable" if retryable else "fatal"
        self._note(f"model error ({kind} x{attempts}) on the last input's first turn")

    @precondition(lambda self: len(self.program["inputs"]) > 0)
    @rule(
        limit=st.sampled_from((20, 40, 80)),
        how=st.sampled_from(("context_budget_tokens", "model_context_tokens")),
    )
    def compact(self, limit: int, how: str) -> None:
        """Drive compaction (``durable.compaction``): shrink the runtime's context budget, or
        give the model a window that refuses longer requests as "context exceeded". Either way
        later turns compact the conversation first; the crash rules may land in between."""
        self.program[how] = limit
        kind = "budget" if how == "context_budget_tokens" else "model window"
        self._note(f"compaction: {kind} of {limit} tokens")

    def _check(self, *, liveness: bool) -> None:
        scenario = program_scenario(self.program)
        reference = run_scenario(scenario.without_faults(), seed=self.seed, store=self.store)
        result = run_scenario(scenario, seed=self.seed, store=self.store)
        outcome = judge(result, reference, determinism=False)
        bad = _failing(outcome.violations, liveness=liveness)
        if bad:
            WorldMachine.failures.append(
                (json.loads(json.dumps(self.program)), bad, list(self.steps))
            )
            raise _OracleFailed(f"{bad[0].invariant}: {bad[0].explanation}")

    @invariant()
    def safety_holds(self) -> None:
        self._check(liveness=False)

    def teardown(self) -> None:
        if self.program["inputs"]:
            self._check(liveness=True)


def fuzz_machine(
    *,
    store: StoreKind | str = "file",
    seed: int = 0,
    examples: int = 100,
    fuzz_seed: int = 0,
    max_steps: int = 10,
    on_example: Callable[[], None] | None = None,
) -> Finding | None:
    WorldMachine.store = store
    WorldMachine.seed = seed
    WorldMachine.failures = []
    WorldMachine.on_example = on_example
    chosen = settings(
        max_examples=examples,
        stateful_step_count=max_steps,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
    )
    # ``run_state_machine_as_test`` takes no seed; this is what ``--hypothesis-seed`` sets.
    saved = hypothesis_core.global_force_seed
    hypothesis_core.global_force_seed = fuzz_seed  # type: ignore[assignment]  # declared None, unannotated
    try:
        with collector.between_runs():
            run_state_machine_as_test(WorldMachine, settings=chosen)
    except _OracleFailed:
        program, violations, steps = WorldMachine.failures[-1]
        return Finding("machine", program_scenario(program), store, seed, "none", violations, steps)
    finally:
        hypothesis_core.global_force_seed = saved
        WorldMachine.on_example = None
    return None


# -- several fuzzers at once ----------------------------------------------------------------------


def fuzz_steps(
    scenarios: list[Scenario],
    *,
    store: StoreKind,
    examples: int,
    fuzz_seed: int,
    machine: bool,
) -> list[Step]:
    """The schedule fuzzer of each scenario (and the world machine) as ``sim.explore.parallel``
    steps, so ``run_steps`` runs them ``jobs`` at once. Each step returns ``(finding or None,
    examples run)``. Each fuzzer is its own seeded Hypothesis search, so what is found does not
    depend on how many run at once (Hypothesis cannot split one search over processes)."""
    steps = [
        Step(
            f"schedules of {scenario.name}[{store}]",
            partial(
                _counted,
                partial(
                    fuzz_schedules, scenario, store=store, examples=examples, fuzz_seed=fuzz_seed
                ),
            ),
            cost=estimated_cost(scenario, store, ("process",)),
        )
        for scenario in scenarios
    ]
    if machine:
        # Every step of a machine example re-runs its whole program: start it among the first.
        cost = 2 * max((step.cost for step in steps), default=1.0)
        run = partial(fuzz_machine, store=store, examples=examples, fuzz_seed=fuzz_seed)
        steps.append(Step(f"world machine[{store}]", partial(_counted, run), cost=cost))
    return steps


def _counted(
    fuzzer: Callable[..., Finding | None], *, progress: Callable[[int], None]
) -> tuple[Finding | None, int]:
    count = 0

    def tick() -> None:
        nonlocal count
        count += 1
        progress(1)

    return fuzzer(on_example=tick), count


# -- corpus ---------------------------------------------------------------------------------------


def save_case(finding: Finding, directory: Path) -> Path:
    """Write ``finding`` as a corpus case (JSON, schema-versioned) into ``directory``; returns its
    path. The directory is the caller's to choose (``durable-sim fuzz --corpus``, whose default is
    documented in its help): an installed package has no corpus of its own to write into."""
    directory.mkdir(parents=True, exist_ok=True)
    invariant = finding.violations[0].invariant if finding.violations else "none"
    stem = (
        f"{finding.fuzzer}-{finding.scenario.name}-{finding.store}-{invariant}-{int(time.time())}"
    )
    case = {
        "schema_version": CORPUS_SCHEMA_VERSION,
        "found_by": finding.fuzzer,
        "invariant": invariant,
        "explanation": finding.violations[0].explanation if finding.violations else "",
        "store": finding.store,
        "seed": finding.seed,
        "schedule": finding.schedule,
        "labels": finding.labels,
        "program": finding.program,
        "scenario": finding.scenario.model_dump(mode="json"),
    }
    path = directory / f"{stem}.json".replace("/", "_")
    path.write_text(json.dumps(case, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
