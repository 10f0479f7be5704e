"""The pytest plugin: options, fixtures, the repro command at the end of a failure, and crash
sweeps collected as pytest items (plain, failing under a planted bug, and under pytest-xdist)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sim.outputs.options import DEFAULT_CRASH_KINDS
from sim.world.scenario import SCENARIO_DIR

pytest_plugins = ["pytester"]

# The smallest bundled scenario: its sweep takes a few seconds on each store.
SCENARIO = "idempotent_payment.json"
# Sweeps fork a child per crash point; a wedged child must fail the test, not hang the suite.
TIMEOUT_S = 300


def test_fixtures_and_repro_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_passes(sim_run, sim_seed, sim_world):
            result = sim_run("idempotent_payment")
            assert result.trace.settled and sim_seed == 3
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


def test_the_repro_line_names_a_scenario_file_by_its_path(pytester: pytest.Pytester) -> None:
    """``durable-sim replay --scenario NAME`` of a scenario loaded from a file would be an
    unknown scenario: the line names the file, and says so when it cannot (an object)."""
    target = pytester.mkdir("mine")
    doc = json.loads((SCENARIO_DIR / SCENARIO).read_text())
    doc["name"] = "my_payment"
    (target / "my_payment.json").write_text(json.dumps(doc))
    pytester.makepyfile(
        """
        from pathlib import Path

        from sim.world.scenario import load_scenario_file

        def test_by_path(sim_run):
            sim_run(Path("mine/my_payment.json"))
            assert False, "deliberate"

        def test_by_object(sim_run):
            sim_run(load_scenario_file(Path("mine/my_payment.json")))
            assert False, "deliberate"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["durable-sim replay --scenario mine/my_payment.json --seed 0 --store file --schedule none"]
    )
    result.stdout.fnmatch_lines(
        ["no durable-sim replay line: the scenario 'my_payment' was given as an object*"]
    )
    result.stdout.no_fnmatch_line("*--scenario my_payment *")


def test_the_plugin_changes_no_hypothesis_settings(pytester: pytest.Pytester) -> None:
    """Every project that installs durable-sim loads the plugin: under CI=true it must leave the
    Hypothesis profile the project chose (this repository sets its own in tests/conftest.py).
    The project's choice is made by a plugin pytest loads before durable-sim's entry point."""
    pytester.makepyfile(
        project_profile="""
        from hypothesis import settings

        settings.register_profile("project", max_examples=7)
        settings.load_profile("project")
        """,
        test_profile="""
        from hypothesis import settings

        def test_profile():
            assert settings._current_profile == "project"
            assert settings.default.max_examples == 7
        """,
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CI", "true")
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "project_profile", "test_profile.py"
        )
    result.assert_outcomes(passed=1)


def test_replay_option_sets_the_schedule(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_schedule(sim_schedule, sim_run):
            assert sim_schedule.text() == "21:after:process"
            result = sim_run("idempotent_payment")
            assert len(result.trace.crashes) == 1
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--sim-replay", "21:after:process")
    result.assert_outcomes(passed=1)


def _scenario_dir(pytester: pytest.Pytester) -> Path:
    """``scenarios/`` with one bundled scenario, next to an ordinary test module."""
    target = pytester.mkdir("scenarios")
    (target / SCENARIO).write_bytes((SCENARIO_DIR / SCENARIO).read_bytes())
    pytester.makepyfile(test_other="def test_other():\n    pass\n")
    return target


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The node ids a run would collect (collection only: no sweep runs)."""
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    return [line for line in result.outlines if "::" in line]


@pytest.mark.slow
def test_sweep_items_are_collected_and_pass(pytester: pytest.Pytester) -> None:
    _scenario_dir(pytester)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rA", "--sim-scenarios", "scenarios", timeout=TIMEOUT_S
    )
    # Only the sweeps: without positional paths the option replaces the default collection.
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"PASSED scenarios/{SCENARIO}::file",
            f"PASSED scenarios/{SCENARIO}::sqlite",
        ],
        consecutive=True,
    )
    result.stdout.no_fnmatch_line("*test_other*")


def test_which_items_are_collected(pytester: pytest.Pytester) -> None:
    _scenario_dir(pytester)
    file_item, sqlite_item = f"scenarios/{SCENARIO}::file", f"scenarios/{SCENARIO}::sqlite"
    other = "test_other.py::test_other"
    assert _collected(pytester, "--sim-scenarios", f"scenarios/{SCENARIO}") == [
        file_item,
        sqlite_item,
    ]
    assert _collected(pytester, "--sim-scenarios", "scenarios", "test_other.py") == [
        other,
        file_item,
        sqlite_item,
    ]
    assert _collected(pytester, "--sim-scenarios", "scenarios", "--sim-stores", "sqlite") == [
        sqlite_item
    ]
    assert _collected(pytester) == [other]  # nothing configured: json files are not items

    pytester.makeini("[pytest]\nsim_scenarios =\n    scenarios\n")
    assert _collected(pytester) == [file_item, sqlite_item, other]
    assert _collected(pytester, "test_other.py") == [other]
    assert _collected(pytester, "-m", "durable_sim_sweep") == [file_item, sqlite_item]
    assert _collected(pytester, "-m", "not durable_sim_sweep") == [other]


@pytest.mark.slow
def test_a_failing_sweep_reports_invariant_and_repro(pytester: pytest.Pytester) -> None:
    _scenario_dir(pytester)
    # Plant a known bug at import time (a fresh idempotency key per attempt: the payment service
    # can no longer dedupe the charge a recovery re-sends, so I1 must catch a double charge).
    pytester.makeconftest(
        """
        from sim.explore.mutants import Patches, mutant_named

        mutant_named("key-per-attempt").apply(Patches())
        """
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--sim-scenarios",
        "scenarios",
        "--sim-stores",
        "file",
        timeout=TIMEOUT_S,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*durable-sim sweep of scenarios/{SCENARIO} on the file store (seed 0, crash "
            f"{','.join(DEFAULT_CRASH_KINDS)}): * of * schedules failed",
            "verdicts: safety *, pass *",
            "I1 safety at schedule *:*:*",
            "  call call-1 (charge): 2 effects*",
            f"  repro: durable-sim replay --scenario scenarios/{SCENARIO} --seed 0 --store file "
            "--schedule *",
        ]
    )
    result.stdout.fnmatch_lines(["... and * more", f"FAILED scenarios/{SCENARIO}::file*"])
    assert "Traceback" not in result.stdout.str()
    assert "runtest" not in result.stdout.str()  # the report, not a traceback into the item


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--sim-replay", "garbage"), "'garbage'"),
        (("--sim-seed", "-1"), "-1"),
        (("--sim-seed", str(2**64)), str(2**64)),
        (("--sim-replay", ""), "empty value"),
        (("--sim-seed", "x"), "'x'"),
        (("--sim-crash", "process,boom"), "'boom'"),
        (("--sim-crash", "process,,power"), "'process,,power'"),
        (("--sim-stores", "disk"), "'disk'"),
        (("--sim-stores", "file,"), "'file,'"),
        (("--sim-stores", "postgres"), "does not take the postgres store"),
        (("--sim-scenarios", "no/such/dir"), "no/such/dir"),
    ],
    ids=[
        "replay",
        "negative-seed",
        "huge-seed",
        "empty-replay",
        "seed-not-a-number",
        "crash-kind",
        "empty-crash-kind",
        "store",
        "empty-store",
        "unsupported-store",
        "scenario-path",
    ],
)
def test_bad_option_values_are_one_line_usage_errors(
    pytester: pytest.Pytester, args: tuple[str, ...], named: str
) -> None:
    pytester.makepyfile("def test_never_runs():\n    raise AssertionError\n")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"ERROR: {args[0]}: ") and named in errors[0], errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_an_unloadable_scenario_is_a_one_line_collection_error(
    pytester: pytest.Pytester,
) -> None:
    target = _scenario_dir(pytester)
    (target / "broken.json").write_text('{"name": 3', encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sim-scenarios", "scenarios")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ERROR collecting scenarios/broken.json*", "*broken.json: not valid JSON (line 1*"],
        consecutive=True,
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_sweep_items_run_under_xdist_and_land_in_junit(pytester: pytest.Pytester) -> None:
    _scenario_dir(pytester)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--sim-scenarios",
        "scenarios",
        f"--junitxml={junit}",
        timeout=TIMEOUT_S,
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 workers*"])  # really distributed, not a silent fallback
    cases = {case.attrib["name"]: case for case in ET.parse(junit).getroot().iter("testcase")}
    assert sorted(cases) == ["file", "sqlite"]
    for case in cases.values():
        assert case.get("classname") == "scenarios.idempotent_payment.json"
        assert case.find("failure") is None
        properties = {p.attrib["name"]: p.attrib["value"] for p in case.iter("property")}
        assert int(properties["schedules"]) > 0 and properties["verdicts"].startswith("pass ")
