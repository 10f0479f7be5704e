"""The CI tier (``sim.explore.tier``, docs/campaigns.md): every bundled trace swept exhaustively
except those longer than ``EXHAUSTIVE_POINTS_MAX`` crash points, which run a stratified sample --
deterministic, covering every stratum and recovery class, killing every registered mutant."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from functools import cache

import pytest

from sim.explore import forking, tier
from sim.explore.mutants import MUTANTS, Mutant
from sim.explore.mutants.core import planted
from sim.explore.plan import SweepPlan
from sim.explore.recording import ReferenceRun, Sample, ScenarioSweep
from sim.explore.results import results_document
from sim.explore.sweep import listed_schedules, sweep, twins
from sim.explore.sweep.parts import account
from sim.world.faults import CrashKind, Schedule, boundary_kind
from sim.world.scenario import bundled_names, load_scenario
from sim.world.stores import StoreKind

# What ``make sweep`` sweeps with.
KINDS = (CrashKind.PROCESS, CrashKind.POWER, CrashKind.STORAGE, CrashKind.PAUSE)
STORES = (StoreKind.FILE, StoreKind.SQLITE)
LONG = "long_horizon"


@cache
def listed(name: str, store: StoreKind) -> tuple[list[str], list[Schedule]]:
    return trace(name, store)


def trace(name: str, store: StoreKind) -> tuple[list[str], list[Schedule]]:
    """The traced run's labels and the depth-1 schedules ``make sweep`` lists for it."""
    from sim.explore.sweep.prepare import described, traced_runs

    scenario = load_scenario(name)
    _, _, base = described(scenario, store, 0, 1, KINDS, "off", None)
    _, traced = traced_runs(scenario, seed=0, store=store, base=base)
    count, schedules = listed_schedules(scenario, store=store, crash_kinds=KINDS)
    labels = [b.label for b in traced.trace.boundaries]
    assert count == len(labels)
    return labels, schedules


def kinds(store: StoreKind, name: str = LONG) -> list[CrashKind]:
    """The kinds the store is swept with (no pause where the scenario has no standby, as
    ``long_horizon``)."""
    standby = load_scenario(name).standby_at_s() is not None
    return [k for k in KINDS if store.can_inject(k) and (standby or k != CrashKind.PAUSE)]


def chosen(name: str, store: StoreKind) -> frozenset[str]:
    labels, schedules = listed(name, store)
    return tier.select(schedules, labels, seed=0, salt=f"{name}|{store}")


def test_the_threshold_samples_the_longer_traces() -> None:
    """The threshold is chosen from measurement (``tier.EXHAUSTIVE_POINTS_MAX``): 28 of the 64
    bundled traces are over it today, ``long_horizon`` on both stores among them; a change
    in that count is a change in what ``make sweep`` costs and runs (docs/performance.md).
    (It was 36 over 380 before SQLite took storage faults: raised to 460, the threshold keeps
    the traces of ``checkpoint-without-wal-sync``'s and ``fence-outside-transaction-sqlite``'s
    first kills swept whole, and six more traces of 416 to 456 points with them.)
    ``--exhaustive`` samples none."""
    sampled = {
        (name, str(store))
        for name in bundled_names()
        for store in STORES
        if tier.sampled(len(listed(name, store)[1]), exhaustive=False)
    }
    assert len(sampled) == 28 and {(LONG, "file"), (LONG, "sqlite")} <= sampled
    assert not tier.sampled(len(listed(LONG, StoreKind.FILE)[1]), exhaustive=True)


def _storage(schedules: list[Schedule]) -> set[str]:
    return {s.text() for s in schedules if s.points[-1].kind == "storage"}


@pytest.mark.parametrize(
    ("name", "store"),
    [("delegate_to_subagent", StoreKind.FILE), ("abandon_restores_files", StoreKind.SQLITE)],
    ids=str,
)
def test_a_sampled_trace_runs_its_storage_faults(name: str, store: StoreKind) -> None:
    """Each storage fault point draws its own damage, so a sampled trace runs all of them up
    to ``STORAGE_POINTS_MAX`` (every one on a trace that has fewer, as every bundled trace but
    ``long_horizon``: at most 74, on SQLite, whose store operations each have two acknowledged
    boundaries), besides its strata and classes."""
    _, schedules = listed(name, store)
    assert tier.sampled(len(schedules), exhaustive=False)
    storage = _storage(schedules)
    assert 0 < len(storage) <= tier.STORAGE_POINTS_MAX
    assert storage <= chosen(name, store)
    long_storage = _storage(listed(LONG, store)[1]) & chosen(LONG, store)
    assert len(long_storage) >= tier.STORAGE_POINTS_MAX


@pytest.mark.parametrize("store", STORES, ids=str)
def test_the_sample_covers_every_stratum_and_recovery_class(store: StoreKind) -> None:
    labels, schedules = listed(LONG, store)
    points = chosen(LONG, store)
    cover = tier.coverage(points, labels, kinds(store), Schedule())
    assert cover.complete, cover.missing
    assert cover.strata_covered == cover.strata_total > 10
    assert cover.classes_covered == cover.classes_total > 10
    assert tier.SAMPLE_POINTS <= len(points) < len(schedules)
    assert points <= {s.text() for s in schedules}


def test_recovery_classes_name_the_operation_in_flight() -> None:
    labels, _ = listed(LONG, StoreKind.FILE)
    operations = set(tier.in_flight(labels))
    assert {
        "store.commit",
        "store.checkpoint",
        "store.lease.acquire",
        "store.lease.renew",
        "model.call",
        "tool.effect:payments.charge",
        "tool.effect:workspace.read",
    } <= operations
    assert not any(op.startswith("fs.") for op in operations)


def test_without_the_stratum_guarantee_the_sample_misses_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guarantee is what covers the rare cells (a lease acquired once, a storage fault after
    it): a plain seeded sample of the same size misses some, and the sweep's account of such a
    sample is a harness error, never a pass."""
    monkeypatch.setattr(tier, "_one_of_each", lambda rng, keys, texts, chosen: set())
    labels, _ = listed(LONG, StoreKind.FILE)
    points = chosen(LONG, StoreKind.FILE)
    cover = tier.coverage(points, labels, kinds(StoreKind.FILE), Schedule())
    assert not cover.complete
    out = ScenarioSweep(
        LONG,
        "file",
        0,
        1,
        list(KINDS),
        reference=ReferenceRun(labels=labels),
        sample=Sample(sampled=True),
    )
    account(out, len(listed(LONG, StoreKind.FILE)[1]), sorted(points))
    assert out.verdicts["error"] == 1
    assert "missed" in out.failures[0].explanation
    assert out.sample.strata_covered < out.sample.strata_total or (
        out.sample.recovery_classes_covered < out.sample.recovery_classes_total
    )


def _cells_enumerated_apart(
    texts: set[str] | frozenset[str], labels: list[str]
) -> tuple[set[tuple[str, str, str]], set[tuple[str, str]]]:
    """The strata and recovery classes that schedule ``texts`` hit, worked out here from the
    texts and the labels alone -- not with ``tier.stratum``, ``tier.recovery_class`` or
    ``tier.coverage``, so a bug in those that drops a cell from the sample *and* from the
    total cannot hide from this count."""
    strata: set[tuple[str, str, str]] = set()
    classes: set[tuple[str, str]] = set()
    for text in texts:
        index_text, when, kind = text.split(",")[-1].split("~")[0].split(":")
        index = int(index_text)
        strata.add((boundary_kind(labels[index]), when, kind))
        last = index if when == "after" else index - 1
        heads = [label.split("#", 1)[0] for label in labels[: last + 1]]
        operation = next((h for h in reversed(heads) if not h.startswith("fs.")), "start")
        classes.add((operation, kind))
    return strata, classes


@pytest.mark.parametrize("plant", [None, "strata-merged", "classes-merged"])
def test_the_sample_covers_the_cells_of_an_independent_count(
    plant: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stratum and recovery class of the listed schedules, counted apart from the tier's
    own functions, is hit by the sample. With a planted bug that merges cells in the tier's
    own classification (before and after; every operation), the tier's coverage still says
    complete -- it counts with the same function that chose -- and only this count notices."""
    if plant == "strata-merged":
        monkeypatch.setattr(
            tier, "stratum", lambda p, labels: (boundary_kind(labels[p.index]), "-", p.kind)
        )
    elif plant == "classes-merged":
        monkeypatch.setattr(tier, "recovery_class", lambda p, after: ("-", p.kind))
    labels, schedules = listed(LONG, StoreKind.FILE)
    points = chosen(LONG, StoreKind.FILE)
    want_strata, want_classes = _cells_enumerated_apart({s.text() for s in schedules}, labels)
    got_strata, got_classes = _cells_enumerated_apart(points, labels)
    blind = tier.coverage(points, labels, kinds(StoreKind.FILE), Schedule())
    missed = sorted(map(str, want_strata - got_strata)) + sorted(
        map(str, want_classes - got_classes)
    )
    if plant is None:
        assert not missed, missed
        assert blind.complete
    else:
        assert missed, "the planted bug went unnoticed by the independent count"
        assert blind.complete, "the tier's own count is blind to it (why this test exists)"


def _digest_of_sample() -> str:
    texts = sorted(chosen(LONG, StoreKind.FILE) | chosen(LONG, StoreKind.SQLITE))
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def test_the_sample_is_deterministic_across_runs_and_hash_seeds() -> None:
    first = _digest_of_sample()
    assert _digest_of_sample() == first
    assert chosen(LONG, StoreKind.FILE) != chosen(LONG, StoreKind.SQLITE)  # drawn per trace
    code = "from tests.sim.explore.test_tier import _digest_of_sample; print(_digest_of_sample())"
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert done.stdout.strip() == first


@pytest.mark.parametrize(
    "m", [m for m in MUTANTS if m.swept and m.store in STORES], ids=lambda m: m.name
)
def test_the_tier_kills_every_mutant(m: Mutant) -> None:
    """A known bug class the tier would not catch is a tier that misses it: with each
    registered mutant planted, the points ``make sweep`` judges for its scenario and store
    fail -- every point of a trace under the threshold (the mutant tests hold its first kill
    there), else the sample: its first kill in a chosen point's fold class, or else the
    sampled sweep itself run with the mutant planted. (A postgres mutant's store needs a
    server, which ``make sweep`` does not sweep.)"""
    if m.first_kill == "none":
        return  # the fault-free run fails: every tier runs it
    store = StoreKind(m.store)
    with planted(m):
        labels, schedules = trace(m.scenario, store)
        assert m.first_kill in {s.text() for s in schedules}
        if not tier.sampled(len(schedules), exhaustive=False):
            return  # swept exhaustively: the mutant tests hold its first kill there
        twin_of = twins(load_scenario(m.scenario), store=store, crash_kinds=KINDS)
        picked = tier.select(schedules, labels, seed=0, salt=f"{m.scenario}|{store}")
        if twin_of.get(m.first_kill, m.first_kill) in {twin_of.get(t, t) for t in picked}:
            return
        scenario = load_scenario(m.scenario)
        out = sweep(
            SweepPlan(scenario=scenario, store=store, crash_kinds=KINDS, exhaustive=False), jobs=1
        )
    assert out.sample.sampled and out.failures, (
        f"the CI tier's sample of {m.scenario} misses {m.name}"
    )


def test_an_exhaustive_sweep_records_every_point_and_cell() -> None:
    out = sweep(
        SweepPlan(
            scenario=load_scenario("idempotent_payment"), store=StoreKind.FILE, crash_kinds=KINDS
        )
    )
    doc = results_document([out], wall_s=0.0)
    one = doc["scenarios"][0]
    assert not one["sampled"]
    assert one["points_run"] == one["points_total"] == one["schedules"] - 1
    assert one["points_total"] == len(listed("idempotent_payment", StoreKind.FILE)[1])
    assert one["strata_covered"] == one["strata_total"] > 0
    assert one["recovery_classes_covered"] == one["recovery_classes_total"] > 0
    assert doc["totals"]["points_run"] == one["points_run"]
    assert doc["totals"]["sampled"] == 0


@pytest.mark.slow
@pytest.mark.skipif(not forking.AVAILABLE, reason="needs fork and epoll")
def test_the_tier_sweep_of_long_horizon_runs_the_sample_and_its_fold_classes() -> None:
    """The CI tier's sweep of the long trace (~a minute): it judges exactly the chosen points'
    fold classes, covers every cell, passes, and results.json says so."""
    scenario = load_scenario(LONG)
    store = StoreKind.FILE
    out = sweep(
        SweepPlan(scenario=scenario, store=store, crash_kinds=KINDS, exhaustive=False), jobs=2
    )
    doc = results_document([out], wall_s=0.0)
    one = doc["scenarios"][0]
    twin_of = twins(scenario, store=store, crash_kinds=KINDS)
    roots = {twin_of.get(t, t) for t in chosen(LONG, store)}
    expected = [s for s in listed(LONG, store)[1] if twin_of.get(s.text(), s.text()) in roots]
    assert one["sampled"] and doc["totals"]["sampled"] == 1
    assert one["points_total"] == len(listed(LONG, store)[1])
    assert one["points_run"] == len(expected) == one["schedules"] - 1
    assert one["strata_covered"] == one["strata_total"]
    assert one["recovery_classes_covered"] == one["recovery_classes_total"]
    assert one["verdicts"]["pass"] == one["schedules"]
