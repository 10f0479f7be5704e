"""``durable-sim bench`` reports every key its readers (docs/performance.md, CI dashboards) rely on.

No timing is asserted (the machine is shared and noisy); only that each figure is measured."""

from __future__ import annotations

import pytest

from sim.outputs.bench import bench
from sim.outputs.bench_targets import spread, target_speeds, timed_runs
from sim.outputs.cli.main import main
from sim.targets.host import Crash
from sim.targets.protocol import installed
from sim.targets.registry import get_target
from sim.world.faults import When


@pytest.mark.slow
def test_a_small_bench_reports_every_figure() -> None:
    doc = bench(
        scenarios=("idempotent_payment",),
        repeats=1,
        growth_turns=(2, 4),
        realcrash_points=0,
        fuzz_examples=8,
    )
    for key in ("idempotent_payment/file", "idempotent_payment/sqlite"):
        assert doc["schedules_per_s"][key] > 0
        assert doc["sweeps"][key]["verdicts"].get("pass") == doc["sweeps"][key]["schedules"]
    assert [g["turns"] for g in doc["growth"]] == [2, 4]
    assert doc["growth"][0]["boundaries"] < doc["growth"][1]["boundaries"]
    assert isinstance(doc["growth_exponent"], float)
    assert 0 <= doc["folded_fraction"] < 1
    assert doc["fuzz_examples_per_s"] > 0
    # As ``durable-sim fuzz`` runs: at least one fuzzer per core, side by side.
    assert doc["fuzz_jobs"] >= 1 and doc["fuzz_parallel_examples_per_s"] > 0
    assert doc["sim_vs_real"] is None and doc["peak_rss_mb"] > 0
    # How many crashed runs rejoin the fault-free run, per view; the pruned sweep's growth on
    # the cuts it runs, and what it cuts off.
    fractions = doc["rejoin_fraction"]
    assert set(fractions) == {"idempotent_payment", "long_horizon/2", "overall"}
    # A replacement process continues as the one it replaced (docs/architecture.md, 1.2), so
    # some crashed runs rejoin even in the strict view; the renamed view only adds meetings.
    assert 0.0 < fractions["overall"]["strict"] <= fractions["overall"]["renamed"]
    pruned = doc["growth_rejoin"]
    assert [(g["turns"], g["boundaries"]) for g in pruned] == [
        (g["turns"], g["boundaries"]) for g in doc["growth"]
    ]
    assert all(g["median_wall_s"] > 0 and g["schedules"] > 0 for g in pruned)
    assert isinstance(doc["growth_exponent_rejoin"], float) and doc["sweep_200_s_rejoin"] is None
    assert "cut off" in doc["rejoin_mode"] and doc["sweep_200_s"] is None


def test_target_points_are_spread_over_the_whole_trace() -> None:
    crashes = [Crash(i, When.BEFORE, f"b{i}") for i in range(20)]
    chosen = spread(crashes, 4)
    assert [c.index for c in chosen] == [0, 5, 10, 15]
    assert spread(crashes[:3], 4) == crashes[:3]


def test_an_unknown_bench_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--targets", "python,nope"]) == 2
    assert "unknown target(s) nope" in capsys.readouterr().err


def test_the_bench_times_each_engine_a_target_declares() -> None:
    """pydantic-ai's demo runs on DBOS; its Prefect durability, on an engine of its own, is
    timed too (the table of docs/performance.md has a row for each); so is the python target
    running the LangGraph job of examples/ where LangGraph is installed."""
    python_runs = timed_runs("python")
    job = ["python --app examples/langgraph_job"] if installed("langgraph.graph") else []
    assert [key for key, _ in python_runs] == ["python", *job]
    for _, options in python_runs[1:]:
        assert options.app is not None and options.app.app.endswith("langgraph_job/job.py")
    if get_target("pydantic-ai").missing() is not None:
        pytest.skip("pydantic-ai is not installed")
    runs = timed_runs("pydantic-ai")
    assert [key for key, _ in runs] == ["pydantic-ai", "pydantic-ai --durability prefect"]
    assert [options.durability for _, options in runs] == ["agent", "prefect"]


@pytest.mark.slow  # the python demo's points, forked and fresh, in real processes
def test_the_target_bench_times_each_point_forked_and_fresh() -> None:
    doc = target_speeds(["python"], lambda _: None, points_max=2)
    assert doc["target_s_per_point"]["python"] > 0 and doc["target_fresh_s_per_point"]["python"] > 0
    assert doc["target_recovery_only_s_per_point"]["python"] > 0  # its state is its files
    assert doc["target_children"]["python"].startswith("forked from a warm zygote")
    assert doc["target_missing"] == []
