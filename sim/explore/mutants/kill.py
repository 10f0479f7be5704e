"""Running a mutant: the sweep that must kill it (``kill``, what ``durable-sim mutants`` runs)
and the one schedule that shows it (``judge_witness``, what the fast tests run)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from sim.explore.mutants.core import Mutant, planted
from sim.explore.sweep import Determinism, SweepPlan, base_schedule, determinism_mode, sweep
from sim.judgement.judge import ScheduleOutcome, judge
from sim.run.labels import LabelledCrash, schedule_at_label
from sim.run.runner import run_scenario
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind


@dataclass
class KillResult:
    name: str
    bug_class: str
    killed: bool
    invariant: str | None
    schedule: str | None
    scenario: str | None
    store: str | None
    schedules_to_kill: int
    wall_s: float
    explanation: str = ""
    invariants: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The result as ``durable-sim mutants --json`` prints it: every field, as it is."""
        return dataclasses.asdict(self)


def kill(
    mutant: Mutant,
    *,
    scenarios: list[str],
    stores: tuple[str, ...] = ("file", "sqlite"),
    seed: int = 0,
    determinism: bool | Determinism = "sample",
    progress: Callable[[int], None] | None = None,
) -> KillResult:
    """Run the sweep with ``mutant`` planted, its own scenario first, until the first failure.

    The sweep is ``make sweep``'s: the fast path (forked at every crash point, or the naive one
    split over the cores for a short run), folded, with I10 on a seeded sample of the points
    plus every failing one, stopped at the first failure in the sweep's order -- the naive
    path's first failure, which the registry records (``first_kill``; the slow mutant tests
    hold it, and that folding keeps it). A surviving mutant costs a full sweep of every
    scenario: the naive path with I10 on every schedule ran about a quarter as many per second
    (docs/mutants.md)."""
    ordered = [mutant.scenario] + [s for s in scenarios if s != mutant.scenario]
    # A store's own mutant is swept on that store first; a server's (postgres: never a default
    # store) on that store whatever was asked, since no other store runs its code.
    if mutant.store in stores or mutant.store == StoreKind.POSTGRES:
        stores = (mutant.store, *(s for s in stores if s != mutant.store))
    started = time.perf_counter()
    schedules = 0
    with planted(mutant):
        for name in ordered:
            for store in stores:
                plan = SweepPlan(
                    scenario=load_scenario(name),
                    store=StoreKind(store),
                    seed=seed,
                    crash_kinds=mutant.crash_kinds,
                    determinism=determinism_mode(determinism),
                    stop_at_first_failure=True,
                )
                result = sweep(plan, progress=progress)
                schedules += result.schedules
                if result.failures:
                    first = result.failures[0]
                    return KillResult(
                        mutant.name,
                        mutant.bug_class,
                        True,
                        first.invariant,
                        first.schedule,
                        name,
                        store,
                        schedules,
                        time.perf_counter() - started,
                        first.explanation,
                        first.invariants,
                    )
    return KillResult(
        mutant.name,
        mutant.bug_class,
        False,
        None,
        None,
        None,
        None,
        schedules,
        time.perf_counter() - started,
    )


def judge_witness(
    mutant: Mutant, *, witness: tuple[LabelledCrash, ...] | None = None, seed: int = 0
) -> ScheduleOutcome:
    """Run ``mutant``'s witness (or ``witness``) on the runtime as it is now -- plant the mutant
    first to see it caught; the unbroken runtime must pass the same crashes -- and judge it as
    the sweep would: against the fault-free run (under the scenario's base crash, if any) of
    the same runtime, so I9 and I11 see only what the crashes change. Each crash is named in
    the run the crashes before it leave; I10's second run only if the mutant needs it."""
    scenario = load_scenario(mutant.scenario)
    base = base_schedule(scenario, seed=seed, store=mutant.store)
    plain = scenario.without_faults()
    reference = run_scenario(plain, seed=seed, store=mutant.store, schedule=base)
    run, schedule = reference, base
    if plain is not scenario:  # its own timed crashes: the sweep counts boundaries with them
        run = run_scenario(scenario, seed=seed, store=mutant.store, schedule=base)
    for crash in mutant.witness if witness is None else witness:
        schedule = schedule_at_label(run, crash, base=schedule)
        run = run_scenario(scenario, seed=seed, store=mutant.store, schedule=schedule)
    return judge(run, reference, determinism=mutant.checks_determinism)
