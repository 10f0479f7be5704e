"""pytest plugin (entry point ``pytest11``): options and fixtures for simulator-driven tests.

Options: ``--sim-seed N`` (the seed fixtures use; default 0) and ``--sim-replay SPEC`` (a crash
schedule in replay form, e.g. ``14:after:power``, that ``sim_schedule`` returns). Fixtures:
``sim_seed``, ``sim_schedule`` and ``sim_run`` (run a scenario by name or object under the seed
and schedule). Under ``CI=true`` the ``ci`` Hypothesis profile (derandomized, no database) is
loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

from sim.faults import Schedule, parse_schedule

settings.register_profile("ci", derandomize=True, database=None, deadline=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("durable-sim")
    group.addoption("--sim-seed", type=int, default=0, help="seed for simulator fixtures")
    group.addoption(
        "--sim-replay",
        default=None,
        help="crash schedule to replay, e.g. '14:after:power,20:before:process'",
    )


@pytest.fixture
def sim_seed(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--sim-seed"))


@pytest.fixture
def sim_schedule(request: pytest.FixtureRequest) -> Schedule:
    spec = request.config.getoption("--sim-replay")
    return parse_schedule(spec) if spec else Schedule()


@pytest.fixture
def sim_world(sim_seed: int) -> Any:
    """A seeded ``sim.world.World`` (RNG streams, ids, trace) for tests of your own parts."""
    from sim.world import World

    return World(sim_seed)


@pytest.fixture
def sim_run(
    request: pytest.FixtureRequest, sim_seed: int, sim_schedule: Schedule
) -> Callable[..., Any]:
    """``sim_run("read_edit_answer", store="file")`` runs a scenario under the session's seed
    and schedule and returns the ``RunResult``; a failing test then ends with the repro command
    of the last run."""
    from sim.runner import run_scenario
    from sim.scenario import Scenario, load_scenario

    def run(scenario: str | Scenario, *, store: str = "file", schedule: Schedule | None = None):
        loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
        chosen = schedule if schedule is not None else sim_schedule
        ref = scenario if isinstance(scenario, str) else loaded.name
        request.node._sim_repro = (
            f"durable-sim replay --scenario {ref} --seed {sim_seed} --store {store} "
            f"--schedule {chosen.text()}"
        )
        return run_scenario(loaded, seed=sim_seed, store=store, schedule=chosen)  # type: ignore[arg-type]

    return run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    repro = getattr(item, "_sim_repro", None)
    if report.failed and repro:
        report.sections.append(("durable-sim repro", repro))
