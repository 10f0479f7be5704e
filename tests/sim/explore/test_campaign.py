"""Campaigns (``sim.explore.campaign``, docs/campaigns.md): a deterministic plan of content-
addressed units whose merged results equal the one-process sweep's, timings aside -- split inside
a trace, sharded, resumed from unit files, with bad files re-run and disagreeing results
reported.

The helpers at the top are shared with the other ``test_campaign_*`` modules."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import durable
from durable.codec import canonical_json
from sim.explore import forking
from sim.explore.campaign import address as address_module
from sim.explore.campaign import files
from sim.explore.campaign import plan as plan_module
from sim.explore.campaign.address import digest, sweep_spec
from sim.explore.campaign.document import timings_aside, unit_document
from sim.explore.campaign.engines import LocalEngine
from sim.explore.campaign.files import CampaignDir
from sim.explore.campaign.plan import Plan, Split, plan_sweeps, shard_of
from sim.explore.campaign.run import CampaignResult, merge_directories, run_campaign
from sim.explore.campaign.unit import UnitRefused, run_unit
from sim.explore.plan import Roots, SweepPlan
from sim.explore.results import results_document, tool_version
from sim.explore.sweep import sweep
from sim.outputs.cli import main
from sim.world.faults import CrashKind
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

pytestmark = pytest.mark.skipif(not forking.AVAILABLE, reason="needs fork and epoll")

# Two of the shortest bundled scenarios (a run of 42-65 boundaries), on both stores, with every
# crash kind.
SMALL = ("abort_with_queued_input", "model_overloaded")
STORES = (StoreKind.FILE, StoreKind.SQLITE)
KINDS = (CrashKind.PROCESS, CrashKind.POWER, CrashKind.STORAGE)
# Small enough that every sweep above is cut into several units inside its trace.
POINTS = 60


def sweep_document(
    names: tuple[str, ...] = SMALL,
    stores: tuple[StoreKind, ...] = STORES,
    kinds: tuple[CrashKind, ...] = KINDS,
) -> dict[str, Any]:
    """The results document of one-process sweeps, in ``durable-sim sweep``'s order."""
    sweeps = [
        sweep(
            SweepPlan(scenario=load_scenario(name), ref=name, store=store, crash_kinds=kinds),
            jobs=2,
        )
        for name in names
        for store in stores
    ]
    return results_document(sweeps, wall_s=0.0)


def small_plan(
    names: tuple[str, ...] = SMALL,
    stores: tuple[str, ...] = STORES,
    kinds: tuple[str, ...] = KINDS,
    points: int = POINTS,
) -> Plan:
    scenarios = [(name, load_scenario(name)) for name in names]
    return plan_sweeps(
        scenarios, stores=stores, crash_kinds=kinds, split=Split(points=points, cost=None)
    )


def campaign_document(result: CampaignResult) -> dict[str, Any]:
    assert result.merged is not None, f"{len(result.missing)} units missing"
    return results_document(result.merged.sweeps, wall_s=0.0)


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two results documents agree, timings aside, as ``results.json`` holds them."""
    first: object = json.loads(json.dumps(timings_aside(a)))
    second: object = json.loads(json.dumps(timings_aside(b)))
    return first == second


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return sweep_document()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, Path, CampaignResult]:
    """A complete campaign of ``SMALL``: its plan, its directory (copy it before changing it)."""
    plan = small_plan()
    directory = tmp_path_factory.mktemp("campaign")
    return plan, directory, run_campaign(plan, directory, engine=LocalEngine(2))


# -- the plan ------------------------------------------------------------------------------------

PLAN_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from test_campaign import small_plan
from durable.codec import canonical_json
print(canonical_json(small_plan().to_json()))
"""


def test_the_plan_is_the_same_under_another_hash_seed() -> None:
    here = canonical_json(small_plan().to_json())
    script = PLAN_SCRIPT.format(tests=str(Path(__file__).parent))
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        there = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
        assert there.returncode == 0, there.stderr
        assert there.stdout.strip() == here
    assert canonical_json(small_plan().to_json()) == here  # and twice in one process


def test_a_sweep_is_cut_into_ranges_that_cover_every_index() -> None:
    plan = small_plan()
    for store in STORES:
        units = [u for u in plan.units if u.group == (SMALL[0], store)]
        assert len(units) >= 3  # cut inside one trace
        ranges = [tuple(u.spec["plan"]["roots"]) for u in units]
        assert ranges[0][0] == 0 and ranges[-1][1] is None
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        assert all(0 < u.points <= POINTS for u in units)


def test_addresses_change_with_scenario_content_range_options_and_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = SMALL[0]
    scenario = load_scenario(name)
    kinds = ("process",)

    def addresses(one: Any = scenario, points: int = POINTS, seed: int = 0) -> list[str]:
        split = Split(points=points, cost=None)
        plan = plan_sweeps(
            [(name, one)], stores=["file"], crash_kinds=kinds, split=split, seed=seed
        )
        return [u.address for u in plan.units]

    base = addresses()
    assert base == addresses()
    units = small_plan((name,), ("file",), kinds).units
    assert [u.address for u in units] == base == [digest(u.spec) for u in units]
    edited = scenario.model_copy(update={"description": scenario.description + " (edited)"})
    assert set(addresses(edited)).isdisjoint(base)  # the content
    assert addresses(points=POINTS // 2)[0] != base[0]  # the range
    assert set(addresses(seed=1)).isdisjoint(base)
    monkeypatch.setattr(plan_module, "project_version", lambda: "0.1.0+src.other")
    assert set(addresses()).isdisjoint(base)  # the code


def test_a_sweep_units_spec_is_its_plan_and_its_address_follows_the_plans_digest() -> None:
    """A unit runs the ``SweepPlan`` its spec carries, and two specs with the same plan digest
    and version are the same unit: the address is the plan's, qualified by the code."""
    for unit in small_plan((SMALL[0],), ("file",), ("process",)).units:
        plan = SweepPlan.from_json(unit.spec["plan"])
        assert plan.to_json() == unit.spec["plan"] and plan.ref == SMALL[0]
        again = sweep_spec(plan, version=unit.spec["version"])
        assert digest(again) == unit.address
        moved = replace(plan, roots=Roots(plan.roots.first + 1, plan.roots.stop))
        assert moved.digest() != plan.digest()
        assert digest(sweep_spec(moved, version=unit.spec["version"])) != unit.address


def test_a_unit_refuses_a_malformed_plan() -> None:
    plan = small_plan(SMALL[:1], ("file",), ("process",))
    task = plan.task(plan.units[0])
    task["spec"] = {**task["spec"], "plan": {**task["spec"]["plan"], "depth": 3}}
    with pytest.raises(UnitRefused, match="sweep plan is malformed: depth must be 1 or 2"):
        run_unit(task)


def test_the_version_digests_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One changed byte in a source of ``durable`` changes the version every address holds."""
    version = address_module.project_version()
    assert version.startswith(tool_version() + "+src.")
    copy = tmp_path / "durable"
    assert durable.__file__ is not None
    shutil.copytree(Path(durable.__file__).parent, copy)
    fake = SimpleNamespace(__name__="durable", __file__=str(copy / "__init__.py"))
    monkeypatch.setattr(address_module, "durable", fake)
    try:
        address_module.project_version.cache_clear()
        assert address_module.project_version() == version  # the same sources elsewhere
        events = copy / "events.py"
        events.write_bytes(events.read_bytes() + b"\n")
        address_module.project_version.cache_clear()
        assert address_module.project_version() != version
    finally:
        address_module.project_version.cache_clear()


def test_shards_partition_the_plan_and_spread_a_long_sweep() -> None:
    plan = small_plan()
    shards = [shard_of(plan.units, shard=k, shards=3) for k in (1, 2, 3)]
    addresses = [u.address for shard in shards for u in shard]
    assert sorted(addresses) == sorted(u.address for u in plan.units)
    costs = [sum(u.cost for u in shard) for shard in shards]
    assert max(costs) - min(costs) <= max(u.cost for u in plan.units)
    for k in (1, 2, 3):  # each in plan order, and the same share every time
        assert shard_of(plan.units, shard=k, shards=3) == shards[k - 1]
        order = [plan.units.index(u) for u in shards[k - 1]]
        assert order == sorted(order)
    # One sweep's units are spread over the shards, not given to one.
    owners = {k for k, shard in enumerate(shards) for u in shard if u.group == (SMALL[0], "file")}
    assert len(owners) > 1


# -- the merged results equal the one-process sweep's ------------------------------------------


def test_a_campaign_equals_the_sweep_timings_aside(
    reference: dict[str, Any], finished: tuple[Plan, Path, CampaignResult]
) -> None:
    plan, directory, result = finished
    assert not result.errors and not result.conflicts and not result.bad
    assert len(result.ran) == len(plan.units) > 2 * len(SMALL) * len(STORES)
    assert same(campaign_document(result), reference)
    assert not same(campaign_document(result), sweep_document(SMALL[:1]))  # the check can fail
    files = sorted(p.name for p in (directory / "units").iterdir())
    assert files == sorted(f"{u.address}.json" for u in plan.units)  # no temporary file left


def test_a_campaign_with_failures_equals_the_sweep(tmp_path: Path) -> None:
    """Failures, their timelines, repro lines and re-runs of folded failing points merge as the
    one-process sweep records them (a mutant planted in this process; the local engine's
    workers are forked, so they run it too)."""
    from sim.explore.mutants import mutant_named, planted

    mutant = mutant_named("key-per-attempt")
    names, stores, kinds = (mutant.scenario,), (mutant.store,), mutant.crash_kinds
    with planted(mutant):
        expected = sweep_document(names, stores, kinds)
        plan = small_plan(names, stores, kinds, points=40)
        result = run_campaign(plan, tmp_path, engine=LocalEngine(2))
    assert expected["totals"]["failures"] > 0 and len(plan.units) >= 3
    assert same(campaign_document(result), expected)


def test_a_unit_refuses_to_run_on_other_code() -> None:
    plan = small_plan(SMALL[:1], ("file",), ("process",))
    task = plan.task(plan.units[0])
    task["spec"] = {**task["spec"], "version": "0.0.0+src.elsewhere"}
    with pytest.raises(UnitRefused, match=r"planned for durable-sim 0\.0\.0"):
        run_unit(task)


# -- shards, resume, bad files, conflicts --------------------------------------------------------


def test_shards_merged_equal_the_unsharded_campaign(
    tmp_path: Path, reference: dict[str, Any], finished: tuple[Plan, Path, CampaignResult]
) -> None:
    plan, _, whole = finished
    shards = [tmp_path / f"shard-{k}" for k in (1, 2, 3)]
    for k, directory in enumerate(shards, start=1):
        run = run_campaign(plan, directory, engine=LocalEngine(2), shard=(k, 3))
        assert run.merged is None and len(run.ran) == len(run.selected)
    merged = merge_directories(shards, tmp_path / "merged")
    assert not merged.conflicts and not merged.bad
    assert same(campaign_document(merged), campaign_document(whole))
    assert same(campaign_document(merged), reference)


def _copy(directory: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(directory, target)
    return target


def test_bad_unit_files_are_reported_by_name_and_run_again(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    finished: tuple[Plan, Path, CampaignResult],
    reference: dict[str, Any],
) -> None:
    plan, directory, _ = finished
    target = _copy(directory, tmp_path, "resumed")
    place = CampaignDir(target)
    corrupt, truncated = (place.unit_path(u.address) for u in plan.units[1:3])
    doc = json.loads(corrupt.read_text())
    doc["result"]["outcomes"][0][1]["verdict"] = "safety"  # valid JSON, wrong checksum
    corrupt.write_text(json.dumps(doc))
    truncated.write_bytes(truncated.read_bytes()[:-200])
    args = ["campaign", *SMALL, "--crash", ",".join(KINDS), "--points-per-unit", str(POINTS)]
    status = main([*args, "--out", str(target), "--jobs", "2", "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert f"{corrupt}: its checksum does not match its content" in err
    assert f"{truncated}: truncated or not JSON" in err
    assert f"resuming: {len(plan.units) - 2} of {len(plan.units)} units already done" in err
    assert same(json.loads(out), reference)
    assert same(json.loads((target / "results.json").read_text()), reference)


def _reseal(path: Path, change: Any) -> None:
    """Change a unit file's result and give it a checksum that matches: a result that verifies
    but disagrees (what another machine's nondeterministic run would write)."""
    doc = json.loads(path.read_text())
    change(doc["result"])
    sealed = unit_document(doc["address"], doc["spec"], doc["result"])
    path.write_text(json.dumps(sealed))


def _forge(doc: dict[str, Any], spec: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A unit file of ``doc``'s address holding ``spec`` and ``result``, resealed: its checksum
    holds, so only the address check (``document.verified``: the spec's digest is the unit's
    address) can tell it is not this unit's."""
    return unit_document(doc["address"], spec, result)


@pytest.mark.parametrize("forged", ["another-version", "another-plan"])
def test_a_resealed_unit_of_another_plan_or_version_is_refused_and_run_again(
    forged: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    finished: tuple[Plan, Path, CampaignResult],
    reference: dict[str, Any],
) -> None:
    """A unit file whose content is another version's (the same unit's spec with another
    project version) or another plan's (another unit's spec and result under this address),
    resealed so its checksum holds, is refused on resume and its unit run again: the merged
    report is the sweep's. With the address check planted away, the same file is merged."""
    plan, directory, _ = finished
    target = _copy(directory, tmp_path, "forged")
    unit, other = plan.units[1], plan.units[3]
    path = CampaignDir(target).unit_path(unit.address)
    doc = json.loads(path.read_text())
    if forged == "another-version":
        spec, result = {**doc["spec"], "version": "0" * 64}, doc["result"]
    else:
        theirs = json.loads(CampaignDir(target).unit_path(other.address).read_text())
        spec, result = theirs["spec"], theirs["result"]
    path.write_text(json.dumps(_forge(doc, spec, result)))

    planted = _copy(target, tmp_path, "planted")

    def blind(doc: Any, *, address: str) -> dict[str, Any]:  # the check on the spec left out
        content = {key: value for key, value in doc.items() if key != "checksum"}
        assert doc.get("checksum") == digest(content)
        return dict(doc)

    with monkeypatch.context() as patched:
        patched.setattr(files, "verified", blind)
        scan = CampaignDir(planted).scan(plan)
    assert unit.address in scan.done and not scan.bad, "the planted bug merges the forgery"

    args = ["campaign", *SMALL, "--crash", ",".join(KINDS), "--points-per-unit", str(POINTS)]
    status = main([*args, "--out", str(target), "--jobs", "2", "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert f"{path}: its address does not match its unit" in err
    assert f"resuming: {len(plan.units) - 1} of {len(plan.units)} units already done" in err
    assert same(json.loads(out), reference)


def test_two_differing_results_of_one_unit_are_nondeterminism(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], finished: tuple[Plan, Path, CampaignResult]
) -> None:
    plan, directory, _ = finished
    one, other = _copy(directory, tmp_path, "a"), _copy(directory, tmp_path, "b")
    unit = plan.units[1]
    _reseal(CampaignDir(other).unit_path(unit.address), lambda r: r["outcomes"].pop())
    agreeing = merge_directories([one, _copy(directory, tmp_path, "c")], tmp_path / "same")
    assert not agreeing.conflicts
    status = main(["merge", str(one), str(other), "--out", str(tmp_path / "merged"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 4, err
    assert "nondeterminism" in err and unit.address in err
    kept = list((tmp_path / "merged" / "units").glob(f"{unit.address}.conflict-*.json"))
    assert len(kept) == 1


def test_a_merge_missing_units_writes_no_report_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], finished: tuple[Plan, Path, CampaignResult]
) -> None:
    plan, directory, _ = finished
    partial_dir = _copy(directory, tmp_path, "partial")
    CampaignDir(partial_dir).unit_path(plan.units[-1].address).unlink()
    status = main(["merge", str(partial_dir), "--out", str(tmp_path / "merged"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"1 of {len(plan.units)} units have no result" in err
    assert not (tmp_path / "merged" / "results.json").exists()
    assert len(list((tmp_path / "merged" / "units").glob("*.json"))) == len(plan.units) - 1


def test_a_campaign_refuses_a_directory_of_another_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], finished: tuple[Plan, Path, CampaignResult]
) -> None:
    _, directory, _ = finished
    target = _copy(directory, tmp_path, "other")
    status = main(["campaign", SMALL[0], "--store", "file", "--out", str(target), "--quiet"])
    assert status == 2
    assert "holds another campaign's plan" in capsys.readouterr().err


# -- engines -----------------------------------------------------------------------------------


def test_nothing_imports_dask_unless_it_is_the_engine() -> None:
    script = (
        "import sys\n"
        "from sim.outputs.cli.main import main\n"
        "import sim.explore.campaign.run, sim.explore.campaign.engines\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_missing_dask_extra_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # ``import distributed`` fails
    args = ["campaign", SMALL[0], "--engine", "dask", "--out", str(tmp_path), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'durable-sim[dask]'" in err[0], err
    assert not (tmp_path / "plan.json").exists()  # refused before any planning


def test_github_annotations_name_the_scenario_file_and_a_summary_is_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.explore.mutants import mutant_named, planted
    from sim.world.scenario import SCENARIO_DIR

    mutant = mutant_named("key-per-attempt")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = ["campaign", mutant.scenario, "--store", "file", "--crash", "process"]
    with planted(mutant):
        status = main([*args, "--out", str(tmp_path / "c"), "--quiet"])
    out = capsys.readouterr().out
    assert status == 1
    annotations = [line for line in out.splitlines() if line.startswith("::error ")]
    path = os.path.relpath(str(SCENARIO_DIR / f"{mutant.scenario}.json"))
    assert annotations and all(a.startswith(f"::error file={path},title=") for a in annotations)
    assert "%0Arepro: durable-sim replay --scenario idempotent_payment" in annotations[0]
    written = summary.read_text()
    results = json.loads((tmp_path / "c" / "results.json").read_text())
    unit_s = sum(one["wall_s"] for one in results["scenarios"])
    # The campaign's time -- its units' wall times summed -- in the header and the report.
    assert results["totals"]["wall_s"] == pytest.approx(unit_s, abs=0.01)
    header = f"## durable-sim campaign: {results['totals']['schedules']} schedules, "
    assert written.startswith(f"earlier step\n{header}{unit_s:.1f} s of unit time\n"), written
    assert f"| {mutant.scenario} | file |" in written.replace("\\_", "_")


# -- fuzzing for a budget ------------------------------------------------------------------------


def _ticks() -> Any:
    """A clock that moves one second each time it is read: the budget counts driver checks."""
    counter = itertools.count()
    return lambda: float(next(counter))


def test_a_fuzz_budget_runs_units_until_it_is_spent() -> None:
    from sim.explore.campaign.fuzz_budget import fuzz_for, fuzzers_of

    name = "idempotent_payment"
    fuzzers = fuzzers_of([(name, load_scenario(name))], machine=False)
    run = fuzz_for(fuzzers, budget_s=2.5, engine=LocalEngine(2), examples=5, wave=2, clock=_ticks())
    assert (run.units, run.examples, run.findings, run.errors) == (4, 20, [], [])  # two waves


def test_a_fuzz_budget_finds_and_shrinks_what_its_unit_alone_finds() -> None:
    from sim.explore.campaign.fuzz_budget import fuzz_for, fuzzers_of
    from sim.explore.fuzz import fuzz_schedules
    from sim.explore.mutants import mutant_named, planted

    mutant = mutant_named("key-per-attempt")
    scenario = load_scenario(mutant.scenario)
    fuzzers = fuzzers_of([(mutant.scenario, scenario)], machine=False)
    with planted(mutant):
        run = fuzz_for(
            fuzzers, budget_s=100.0, engine=LocalEngine(2), examples=30, wave=4, clock=_ticks()
        )
        alone = fuzz_schedules(scenario, store="file", examples=30, fuzz_seed=0)
    assert alone is not None and len(run.findings) == 1
    found = run.findings[0]
    assert (found.fuzzer, found.schedule, found.labels) == (
        "schedules",
        alone.schedule,
        alone.labels,
    )
    assert [v.invariant for v in found.violations] == [v.invariant for v in alone.violations]


# -- the Dask engine's scheduler, refused in one line ---------------------------------------------


@pytest.mark.parametrize(
    ("scheduler", "named"),
    [
        ("tcp://127.0.0.1:1", "cannot connect within the 10 s connect timeout"),
        ("not-a-url", "is not a Dask scheduler's address: expected tcp://HOST:PORT"),
        ("tcp://127.0.0.1", "is not a Dask scheduler's address"),
    ],
    ids=["unreachable", "malformed", "no-port"],
)
def test_a_bad_dask_scheduler_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scheduler: str, named: str
) -> None:
    """Once Dask's traceback (50 lines, exit 1: a safety violation to CI) after ``plan.json`` was
    written, and an unreachable scheduler took Dask's 30 s: now checked before anything is
    planned or written, in the connect timeout the message names."""
    pytest.importorskip("distributed")
    out = tmp_path / "c"
    args = ["campaign", SMALL[0], "--engine", "dask", "--scheduler", scheduler]
    assert main([*args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert named in lines[0] and scheduler in lines[0], lines
    assert not out.exists()  # not even the directory


def test_campaign_help_names_the_out_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["campaign", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "the campaign directory (default reports/campaign)" in help_text


# -- the GitHub output ---------------------------------------------------------------------------


def _failing(n: int, name: str = "pay", store: str = "file") -> SimpleNamespace:
    failures = [
        SimpleNamespace(
            verdict="safety",
            invariant="I1",
            schedule=f"{i}:after:process",
            explanation="charged twice",
            repro=f"durable-sim replay --scenario {name} --schedule {i}:after:process",
        )
        for i in range(n)
    ]
    return SimpleNamespace(name=name, store=store, ref=name, schedules=40, failures=failures)


def _summary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sweeps: list[Any], **options: Any
) -> str:
    from sim.outputs.cli.campaign import step_summary

    target = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    verdicts = {"pass": 1, "safety": sum(len(s.failures) for s in sweeps)}
    step_summary(sweeps, verdicts, **options)
    return target.read_text()


def test_a_passing_shard_has_a_summary_without_an_empty_table_or_shard_shard(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    written = _summary(
        monkeypatch, tmp_path, [_failing(0)], complete=False, shard=(1, 2), unit_s=12.25
    )
    lines = written.splitlines()
    assert lines[0] == "## durable-sim campaign, shard 1/2: 40 schedules, 12.2 s of unit time"
    assert "shard shard" not in written and "|" not in written, written
    assert "No failures in these units." in lines


def test_failures_past_the_cap_are_counted_in_the_summary_and_the_annotations(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.outputs.cli.campaign import FAILURES_SHOWN, annotate

    sweeps = [_failing(FAILURES_SHOWN + 3), _failing(1, name="calm")]
    written = _summary(monkeypatch, tmp_path, sweeps, complete=True, shard=None, unit_s=600.0)
    assert written.startswith("## durable-sim campaign: 80 schedules, 600.0 s of unit time\n")
    assert written.count("| file | 40 |") == 2  # a row per failing scenario x store
    assert "- 3 more failures of pay \\[file\\]: the report" in written, written
    assert "more failures of calm" not in written
    annotate(sweeps)
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("::error ") for line in out) == FAILURES_SHOWN + 1
    notices = [line for line in out if line.startswith("::notice ")]
    assert len(notices) == 1 and "title=3 more failures of pay[file]" in notices[0], notices
