"""``realcrash``: real processes killed (SIGKILL) at the simulator's crash points must get the
simulator's verdicts. A handful of points per test keeps this well under half a minute; the full
agreement runs (every point of read_edit_answer and idempotent_payment on both stores) are run by
hand with ``durable-sim realcrash``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stuck_runtime import stuck_shutdown_runtime
from testkit import REPO
from tiers import tiered

from durable.store.file import FileStore
from sim.explore.realcrash import refusal, select_points
from sim.outputs.cli import main as cli_main
from sim.outputs.realcrash import RealcrashError, realcrash, seam_specs
from sim.world.faults import CrashKind, CrashPoint, Schedule, When
from sim.world.scenario import Scenario, load_scenario
from sim.world.seams import seams


@pytest.mark.slow
def test_idempotent_payment_file_store_agrees_with_the_simulator() -> None:
    doc = realcrash("idempotent_payment", store="file", points=6)
    assert doc["labels_match"], doc["label_mismatch"]
    assert doc["reference"]["real"]["verdict"] == doc["reference"]["sim"]["verdict"] == "pass"
    assert len(doc["points"]) == 6
    assert doc["disagreements"] == []
    assert doc["agreement"] == 1.0
    effect = [p for p in doc["points"] if p["label"].startswith("tool.effect:payments.charge")]
    assert {p["when"] for p in effect} == {"before", "after"}
    # Beyond verdicts, each point's outcome, ledger (after a kill after the charge: the restarted
    # child's charge deduplicated by the service), final log and model calls are the simulator's.
    assert all(p["aligned"] and p["same_observables"] for p in doc["points"]), doc["divergences"]
    assert doc["per_point_s"] > 0


@pytest.mark.slow
def test_a_violation_is_found_for_real_as_in_the_simulator(tmp_path: Path) -> None:
    """An e-mail declared ``idempotent`` (the outbox does not dedupe): a kill after the send
    makes the restarted process send it again. Both worlds must call that a safety violation."""
    spec = json.loads(load_scenario("idempotent_payment").model_dump_json())
    spec.update(
        name="lying_idempotent_send",
        description="An outbox send wrongly declared idempotent.",
        tools=[{"name": "send", "operation": "outbox.send", "policy": "idempotent"}],
        script=[
            [
                {
                    "calls": [
                        {"tool": "send", "arguments": {"to": "a@example.com", "subject": "hi"}}
                    ]
                },
                {"answer": "Sent."},
            ]
        ],
    )
    path = tmp_path / "lying_idempotent_send.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    doc = realcrash(str(path), store="sqlite", points=2)
    assert doc["agreement"] == 1.0, doc["disagreements"]
    verdicts = {(p["when"], p["real"], p["sim"]) for p in doc["points"]}
    assert verdicts == {("before", "pass", "pass"), ("after", "safety", "safety")}


def test_select_points_covers_every_kind_first() -> None:
    labels = [
        "store.lease.acquire#1",
        "fs.write:c1/lease.json.tmp",
        "store.commit#1",
        "model.call#1",
        "tool.effect:payments.charge#call-1",
    ]
    schedules = [
        Schedule.of(CrashPoint(i, w, CrashKind.PROCESS))
        for i in range(5)
        for w in (When.BEFORE, When.AFTER)
    ]
    chosen = select_points(labels, schedules, 5)
    assert [s.text() for s in chosen] == [
        "2:before:process",
        "3:before:process",
        "3:after:process",
        "4:before:process",
        "4:after:process",
    ]
    assert select_points(labels, schedules, None) == schedules


def test_unknown_scenario_is_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["realcrash", "no_such_scenario", "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown scenario" in err[0]


def test_power_loss_and_takeover_are_not_faked(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["realcrash", "lease_takeover"]) == 2
    assert "not run with real processes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("scenario", "feature"),
    [
        ("graceful_shutdown_takeover", "a graceful shutdown"),
        ("delegate_to_subagent", "sub-agents"),
        ("zombie_abort", "lease takeover"),
        ("tests/corpus/machine-power-resend-takeover.json", "lease takeover"),
    ],
)
def test_features_the_real_host_lacks_are_refused_up_front(scenario: str, feature: str) -> None:
    """Never a silent divergence: a scenario using a feature the real-process host does not run
    is refused with one line naming it, before any process starts."""
    path = str(REPO / scenario) if scenario.endswith(".json") else scenario
    with pytest.raises(RealcrashError, match=feature) as caught:
        realcrash(path, store="file", points=1)
    assert "\n" not in str(caught.value)


def test_a_timed_power_loss_is_refused_by_name() -> None:
    scenario = load_scenario(str(REPO / "tests/corpus/machine-retry-abort-crashes.json"))
    spec = scenario.model_dump(mode="json")
    spec["timed_crashes"][0]["kind"] = "power"
    assert "a timed power loss" in (refusal(Scenario.model_validate(spec)) or "")
    assert refusal(scenario) is None


@pytest.mark.slow
def test_timed_crashes_and_aborts_agree_with_the_simulator() -> None:
    """The corpus case that once diverged in silence (its timed crashes were dropped by the real
    child): both timed process crashes now happen for real, at the simulator's boundaries."""
    # Its client steps are timed half a second apart, within commits that take milliseconds of
    # real time each: on the virtual clock (the default) the real run keeps the simulator's
    # order whatever the host's load.
    path = str(REPO / "tests/corpus/machine-retry-abort-crashes.json")
    doc = realcrash(path, store="sqlite", points=2)
    assert doc["labels_match"], doc["label_mismatch"]
    assert doc["reference"]["real"]["verdict"] == doc["reference"]["sim"]["verdict"]
    assert doc["agreement"] == 1.0, doc["disagreements"]


@pytest.mark.slow
def test_client_resends_agree_with_the_simulator() -> None:
    doc = realcrash("resend_while_queued", store="file", points=2)
    assert doc["labels_match"], doc["label_mismatch"]
    assert doc["agreement"] == 1.0, doc["disagreements"]


@pytest.mark.parametrize(
    ("scenario", "store"),
    tiered(
        [
            ("budget_exhausted", "file"),  # a lease heartbeat due with a client step
            ("model_error_then_message", "sqlite"),
            ("tests/corpus/machine-abort-moved-by-crash-lease-wait.json", "file"),
        ],
        fast=[("budget_exhausted", "file")],  # the real-process host's one case in the fast tier
    ),
)
def test_timer_ties_fall_as_in_the_simulator(scenario: str, store: str) -> None:
    """Scenarios whose timers tie in scenario time (on a sped-up wall clock they fired in either
    order, and the fault-free traces differed now and then): on the virtual clock the real
    children fire them in the simulator's order, so the traces match at the first attempt."""
    path = str(REPO / scenario) if scenario.endswith(".json") else scenario
    doc = realcrash(path, store=store, points=1)
    assert doc["clock"] == "virtual" and doc["time_scale"] is None
    assert doc["labels_match"], doc["label_mismatch"]
    assert doc["reference_attempts"] == 1
    assert doc["agreement"] == 1.0, doc["disagreements"]


# Load-sensitive: on a loaded machine the sped-up wall clock can let a lease renewal fall
# before a commit the simulator puts first, and the labels differ (seen at a load average of
# 37). The real-process host keeps its fast case in test_timer_ties_fall_as_in_the_simulator.
@pytest.mark.slow
def test_the_scaled_clock_still_runs_real_time() -> None:
    """``--clock scaled``: the wall clock sped up, SQLite calls on worker threads as in
    production; the document says so."""
    doc = realcrash("idempotent_payment", store="sqlite", points=2, clock="scaled", speedup=20)
    assert doc["clock"] == "scaled" and doc["blocking"] == "thread"
    assert doc["time_scale"]["speedup"] == 20
    assert doc["labels_match"], doc["label_mismatch"]
    assert doc["agreement"] == 1.0, doc["disagreements"]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--speedup", "10"], "--speedup scales the wall clock: it needs --clock scaled"),
        (["--blocking", "thread"], "--blocking thread needs --clock scaled"),
        (["--clock", "scaled", "--speedup", "0"], "--speedup must be positive"),
    ],
)
def test_clock_options_are_checked_in_one_line(
    args: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["realcrash", "read_edit_answer", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0], err


def own_file_store(root: str, fs: Any, fsync: bool) -> FileStore:
    """A swapped ``file_store`` seam (the reference store, under another name)."""
    return FileStore(root, fs=fs, fsync=fsync)


def test_swapped_seams_reach_the_real_processes_by_name() -> None:
    """The children load the parent's swapped seams by SPEC; a seam that has no name is
    refused rather than replaced by the reference in silence."""
    assert seam_specs() == ()
    with seams(file_store=own_file_store):
        ((name, spec),) = seam_specs()
        assert name == "file_store" and spec.endswith(":own_file_store")
    unnamed = seams(file_store=lambda root, fs, fsync: FileStore(root, fs=fs, fsync=fsync))
    with unnamed, pytest.raises(RealcrashError, match="file_store seam cannot be named"):
        seam_specs()


@pytest.mark.slow
def test_a_preempted_runtime_shuts_down_and_the_next_process_resumes() -> None:
    """``--preempt``: SIGTERM at each point instead of SIGKILL. The reference runtime's graceful
    shutdown (stop the work, release the lease) loses nothing: every preempted run passes, and
    a replacement process finishes it where the preemption came before the end."""
    doc = realcrash("idempotent_payment", store="file", points=4, preempt_s=5.0)
    assert doc["crash_kind"] == "preempt" and doc["preempt_s"] == 5.0
    assert [p["real"] for p in doc["points"]] == ["pass"] * 4, doc["disagreements"]
    assert doc["agreement"] == 1.0 and all(p["aligned"] for p in doc["points"])
    assert any(p["children"] >= 2 for p in doc["points"])


@pytest.mark.slow
def test_a_shutdown_that_outlives_its_grace_is_killed_and_reported() -> None:
    """A runtime whose shutdown does not end within the grace is SIGKILLed by the parent, and
    the point fails with that as the runtime's error: the check can fail."""
    with seams(open_runtime=stuck_shutdown_runtime):
        doc = realcrash("idempotent_payment", store="file", points=1, preempt_s=0.5)
    (row,) = doc["points"]
    assert row["real"] != "pass" and not row["agree"]
    (disagreement,) = doc["disagreements"]
    said = json.dumps(disagreement["real"])
    assert "did not stop within its grace of 0.5 s after SIGTERM" in said


def test_a_grace_out_of_range_is_one_line() -> None:
    with pytest.raises(RealcrashError, match=r"--preempt must be 0\.\.60 seconds"):
        realcrash("idempotent_payment", store="file", points=1, preempt_s=61.0)
