"""``sweep --jobs``: steps run in forked workers, results come back in the steps' order."""

from __future__ import annotations

import io
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sim.explore import forking
from sim.explore.parallel import Step, WorkerError, estimated_cost, run_steps
from sim.explore.progress import Progress
from sim.explore.sweep import SweepPlan, sweep
from sim.outputs.cli import main
from sim.world.faults import CrashKind
from sim.world.scenario import load_scenario
from sim.world.stores import StoreKind

pytestmark = pytest.mark.skipif(not forking.AVAILABLE, reason="needs fork and epoll")


def _counting(n: int, *, progress: Any) -> dict[str, int]:
    for _ in range(n):
        progress(1)
    return {"n": n}


def _failing(*, progress: Any) -> None:
    raise ValueError("boom")


def test_results_come_back_in_the_order_of_the_steps_not_of_completion() -> None:
    # The costliest step is started first and the cheap ones finish before it.
    steps = [Step(f"s{n}", partial(_counting, n), cost=n) for n in (3, 400, 1, 50)]
    stream = io.StringIO()
    with Progress(command="t", unit="u", stream=stream, heartbeat_s=1e9) as progress:
        results = run_steps(steps, jobs=2, progress=progress)
    assert results == [{"n": 3}, {"n": 400}, {"n": 1}, {"n": 50}]
    lines = stream.getvalue().splitlines()
    for label, n in (("s3", 3), ("s400", 400), ("s1", 1), ("s50", 50)):
        assert f"t: {label} ..." in lines
        assert any(line.startswith(f"t: {label} done") for line in lines), (label, n)


def test_a_failing_step_fails_the_command_with_its_traceback() -> None:
    steps = [Step("ok", partial(_counting, 2)), Step("bad", _failing)]
    with pytest.raises(WorkerError, match=r"(?s)bad.*ValueError: boom"):
        run_steps(steps, jobs=2)


@pytest.mark.slow
def test_a_sweep_in_a_worker_equals_the_sweep_in_process() -> None:
    steps = [
        Step(
            f"{name}[sqlite]",
            partial(
                sweep,
                SweepPlan(
                    scenario=load_scenario(name),
                    store=StoreKind.SQLITE,
                    crash_kinds=(CrashKind.PROCESS,),
                ),
            ),
        )
        for name in ("read_edit_answer", "idempotent_payment")
    ]
    here = run_steps(steps, jobs=1)
    there = run_steps(steps, jobs=2)
    for a, b in zip(here, there, strict=True):
        a_doc, b_doc = a.to_json(), b.to_json()
        a_doc.pop("wall_s"), b_doc.pop("wall_s")
        assert a_doc == b_doc


def _document(tmp_path: Path, jobs: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out = tmp_path / f"jobs-{jobs}"
    # The file store and process kills only: the parallel split depends on neither the store
    # (the worker test above runs SQLite in workers) nor the crash kind, and both cost time.
    args = ["sweep", "read_edit_answer", "retry_backoff", "--store", "file", "--json"]
    args += ["--crash", "process"]
    main([*args, "--out", str(out), "--jobs", jobs, "--quiet"])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    doc["totals"].pop("wall_s")
    for scenario in doc["scenarios"]:
        scenario.pop("wall_s")
    return doc


@pytest.mark.slow
def test_the_results_document_does_not_depend_on_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _document(tmp_path, "1", capsys) == _document(tmp_path, "2", capsys)


def test_the_cost_estimate_counts_what_the_store_can_take() -> None:
    """``StoreKind.can_inject`` alone says which crash kinds a store is swept with; the estimate
    that orders the steps counts those (a SQLite sweep takes power losses too)."""
    scenario = load_scenario("idempotent_payment")
    unit = estimated_cost(scenario, StoreKind.FILE, [CrashKind.PROCESS])
    for store in StoreKind:
        for kind in CrashKind:
            kinds = _unique([CrashKind.PROCESS, kind])
            taken = sum(store.can_inject(k) for k in kinds)
            assert estimated_cost(scenario, store, kinds) == unit * taken, (store, kind)


def _unique(kinds: list[CrashKind]) -> list[CrashKind]:
    return list(dict.fromkeys(kinds))
