"""The pytest API for apps (``sim.outputs.app_sweeps.crash_sweep`` and the ``crash_sweep``
marker of ``sim.outputs.pytest_apps``), in a user's own test suite run by pytest in a fresh
process: a keyed job passes, the unkeyed one fails with its replay line, bad options are one
line, and it works under pytest-xdist."""

from __future__ import annotations

import shlex

import pytest
from testkit import REPO

pytest_plugins = ["pytester"]

JOB = REPO / "examples" / "orders_job" / "orders.py"

USER_TESTS = f"""
import pytest
from sim.outputs.app_sweeps import crash_sweep

JOB = {str(JOB)!r}
WINDOW = ["0:after", "1:before"]  # after the first charge, before the commit that records it


def test_the_keyed_job_survives_crashes():
    result = crash_sweep("python", app=JOB + ":main_keyed", effects=["charge"], points=WINDOW)
    assert result.ok, result.explain()


def test_the_first_version_charges_twice():
    result = crash_sweep("python", app=JOB + ":main", effects=["charge"], points=WINDOW)
    assert result.ok, result.explain()


@pytest.mark.crash_sweep("python", app=JOB + ":main", effects=["charge"], points=WINDOW)
def test_marked_first_version():
    pass


@pytest.mark.crash_sweep("python", app=JOB + ":main", effects=["charge"], points=WINDOW)
def test_marked_and_judged_by_the_test(crash_sweep_result):
    assert len(crash_sweep_result.failures) == 2
    assert all(f.invariant == "I1" for f in crash_sweep_result.failures)


@pytest.mark.crash_sweep("python", app=JOB + ":main", effects=["charge=twice"])
def test_a_bad_option():
    pass
"""


def test_a_users_suite_passes_the_keyed_job_and_fails_the_first_with_its_replay_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_refunds=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", timeout=600)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and outcomes.get("failed") == 3, result.stdout.str()
    text = result.stdout.str()
    repro = next(
        line.split("repro: ", 1)[1]
        for line in text.splitlines()
        if "repro: durable-sim target replay python" in line
    )
    words = shlex.split(repro)
    assert words[:4] == ["durable-sim", "target", "replay", "python"]
    assert "--effect" in words and words[-2] == "--schedule"
    assert "charge is declared exactly_once" in text
    assert "@pytest.mark.crash_sweep: python: --effect 'charge=twice': the policy is one" in text
    assert "Traceback" not in text.split("test_a_bad_option")[-1]


def test_the_replay_line_of_a_failure_reproduces_it(capsys: pytest.CaptureFixture[str]) -> None:
    from sim.outputs.app_sweeps import crash_sweep
    from sim.outputs.cli.main import main

    result = crash_sweep("python", app=f"{JOB}:main", effects=["charge"], points=["1:before"])
    assert not result.ok and "repro: durable-sim target replay" in result.explain()
    (failure,) = result.failures
    assert main(shlex.split(failure.repro)[1:]) == 1
    assert "I1" in capsys.readouterr().out


def test_inline_json_options_are_written_once_and_named_in_the_replay_line() -> None:
    from sim.outputs.app_sweeps import _json_path

    first, again = _json_path({"order": "A-17"}), _json_path({"order": "A-17"})
    assert first == again and first.endswith(".json")
    assert _json_path("given.json") == "given.json" and _json_path(None) == ""


@pytest.mark.slow  # 2 workers each running a sweep: the marker works under pytest-xdist
def test_marked_tests_run_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_refunds=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", timeout=600)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and outcomes.get("failed") == 3, result.stdout.str()
