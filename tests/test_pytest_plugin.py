"""The pytest plugin: options, fixtures, and the repro command at the end of a failure."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_fixtures_and_repro_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_passes(sim_run, sim_seed, sim_world):
            result = sim_run("idempotent_payment")
            assert result.settled and sim_seed == 3
            assert sim_world.seed == 3

        def test_fails(sim_run):
            sim_run("idempotent_payment", store="sqlite")
            assert False, "deliberate"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--sim-seed", "3")
    result.assert_outcomes(passed=1, failed=1)
    repro = "durable-sim replay --scenario idempotent_payment --seed 3 --store sqlite"
    result.stdout.fnmatch_lines(["*durable-sim repro*", f"{repro} --schedule none*"])


def test_replay_option_sets_the_schedule(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_schedule(sim_schedule, sim_run):
            assert sim_schedule.text() == "21:after:process"
            result = sim_run("idempotent_payment")
            assert len(result.crashes) == 1
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--sim-replay", "21:after:process")
    result.assert_outcomes(passed=1)
