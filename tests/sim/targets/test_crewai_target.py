"""The real crewai target: a CrewAI ``Flow`` under ``@persist(SQLiteFlowPersistence)`` whose router
asks a scripted ``BaseLLM`` for the next step, killed for real and restarted in a fresh process
with ``kickoff(inputs={"id": ...})`` -- in an environment of its own
(``sim.targets.environments``), since crewai cannot be installed beside the other targets.

The known finding: ``@persist`` saves the state only after a method completes, and the restart
restores the state and runs the flow from its start again; a kill between the charge and the
save after the method that made it runs that method again with the call the state holds (same
call id): the card is charged twice and the state shows one result (I1, H1). Effects keyed by
the flow id and the tool call id sweep that point clean. The parent never imports crewai. The
venv is made once by the fixture (skipped, with pip's one line, where it cannot be made).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from targetkit import applied_rows, just_after, runnable
from tiers import RELEASE_ENV, release

from sim.outputs.cli.main import main
from sim.targets.environments import envs_root
from sim.targets.host import run_point
from sim.targets.kit.options import check_options
from sim.targets.offline import network_attempts
from sim.targets.protocol import Target, TargetOptions
from sim.targets.sweep import crash_at, reference_run, sweep_target, warm

CHARGE = "effect:payments.charge#"

# Every test here starts CrewAI's children in their own venv (made once, ~60 s from pip's
# cache) from a zygote whose import of crewai takes ~6 s here: the slow tier runs the finding
# and its fix (~9 s each); the full sweeps, the lone replay and the listing run in a release
# check.
pytestmark = pytest.mark.slow
only_in_release = pytest.mark.skipif(
    not release(), reason=f"{RELEASE_ENV}=1 runs it: the slow tier checks the finding and its fix"
)


@pytest.fixture(scope="module")
def crewai() -> Target:
    return runnable("crewai")


#: The kill right after the charge, in the fault-free trace (boundaries: the schema, the save
#: after ``begin``, the model's call, the save after ``think``, then the charge).
AFTER_THE_CHARGE = "4:after"
#: Every point a full sweep finds: each effect, after it and before the save that follows it.
FAILING = ["4:after:process", "5:before:process", "8:after:process", "9:before:process"]


def test_the_sweep_finds_it_and_says_its_replay_line(crewai: Target) -> None:
    result = sweep_target(crewai, TargetOptions(), choose=just_after(CHARGE))
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"], failure.invariants
    applied = applied_rows(failure.witness)
    # The restart runs the method again with the call the state saved: the same call id.
    assert "call=call_p1_1 " in applied[0] and "by p1" in applied[0], applied
    assert "call=call_p1_1 " in applied[1] and "by p2" in applied[1], applied
    assert failure.repro == f"durable-sim target replay crewai --schedule {AFTER_THE_CHARGE}"
    figures = result.reference.outcome["figures"]
    assert isinstance(figures, dict) and figures["state_saves"] == 7, figures
    # Forked from a zygote that imported crewai with its telemetry off: a refusal (the exporter
    # thread crewai starts when imported with it on) would still pass, at a minute a point.
    children = str(result.reference.outcome["children"])
    assert children.startswith("forked from a warm zygote"), children
    assert "crewai" not in sys.modules, "the parent imported the framework"


def test_a_run_tries_no_network_and_leaves_the_users_home_alone(
    crewai: Target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CrewAI's switches keep it offline (a refused connection is noted in the trace even where
    crewai swallows the error), and its files go to a home of the harness's, not the user's."""
    cache = envs_root().parent.parent  # the venv stays where it was made
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "CREWAI_STORAGE_DIR"):
        monkeypatch.delenv(name, raising=False)
    options = check_options(crewai, TargetOptions())
    with warm(crewai, options) as (zygote, why):
        assert zygote is not None, why
        reference = reference_run(crewai, options, timeout_s=120.0, zygote=zygote)
    fresh = run_point(crewai, options, crash_at(reference, 4, "after"), timeout_s=120.0)
    for run in (reference, fresh):
        assert network_attempts(run.rows) == [], network_attempts(run.rows)
    assert sorted(home.iterdir()) == [], sorted(home.rglob("*"))


def test_keyed_by_flow_and_call_id_the_restart_is_deduplicated(crewai: Target) -> None:
    options = TargetOptions(variant="idempotent")
    result = sweep_target(crewai, options, choose=just_after(CHARGE))
    assert result.failures == [] and result.schedules == 1


@only_in_release
def test_the_replay_after_the_charge_shows_it_charged_twice(
    crewai: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    del crewai
    assert main(["target", "replay", "crewai", "--schedule", AFTER_THE_CHARGE]) == 1
    said = capsys.readouterr().out
    assert "crash       4:after at effect:payments.charge#call_p1_1" in said, said
    assert "I1: charge_card is declared exactly_once" in said and "H1: " in said, said
    assert "p2: resume" in said, said
    assert "crewai" not in sys.modules, "the parent imported the framework"


@only_in_release
def test_a_full_sweep_finds_each_effect_before_its_save_and_the_key_fixes_all(
    crewai: Target,
) -> None:
    found = sweep_target(crewai, TargetOptions())
    assert found.schedules == 26, found.schedules
    assert sorted(f.schedule for f in found.failures) == sorted(FAILING), found.failures
    assert all(f.invariants == ["I1", "H1"] for f in found.failures), found.failures
    fixed = sweep_target(crewai, TargetOptions(variant="idempotent"))
    assert fixed.failures == [] and fixed.schedules == 26


@only_in_release
def test_it_is_listed_with_its_environment(
    crewai: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["target", "list"]) == 0
    out = capsys.readouterr().out
    assert "crewai " in out and "its own environment, made: " in out, out
    assert crewai.environment is not None and "crewai==" in crewai.environment.pins[0]
