"""pytest plugin (entry point ``pytest11``, ``durable_sim_apps``): the ``crash_sweep`` marker.

A test marked ``@pytest.mark.crash_sweep(TARGET, app=..., effects=[...], ...)`` -- the options of
``sim.outputs.app_sweeps.crash_sweep``, which are the command line's -- sweeps that app before its
body runs. A test that does not ask for the result fails when the sweep does, with each failure's
replay line (``AppSweepResult.explain``); one that asks for the ``crash_sweep_result`` fixture gets
the result and judges it itself (an app expected to fail, a count of failing points)::

    @pytest.mark.crash_sweep("python", app="jobs/refunds.py:main", effects=["payments:refund"])
    def test_refunds_survive_crashes():
        pass

Bad options are one line, as on the command line, never a traceback. A separate module from
``sim.outputs.pytest_plugin`` (one plugin per module): this one runs a user's app in real
processes, that one the simulator's scenarios. State lives in the item's stash; the sweep runs
in the test's own process, so pytest-xdist spreads marked tests over its workers as any others.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from sim.errors import UserError
from sim.outputs.app_sweeps import AppSweepResult, crash_sweep

MARKER = "crash_sweep"
FIXTURE = "crash_sweep_result"
_RESULT = pytest.StashKey[AppSweepResult]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(target, **options): crash-sweep an app before the test runs "
        "(sim.outputs.app_sweeps.crash_sweep's options); the test fails when the sweep does, "
        f"unless it asks for the {FIXTURE} fixture",
    )


def _result(item: pytest.Item) -> AppSweepResult:
    """The marked item's sweep, run once (the fixture and the hook share it)."""
    if _RESULT not in item.stash:
        marker = item.get_closest_marker(MARKER)
        assert marker is not None
        try:
            item.stash[_RESULT] = crash_sweep(*marker.args, **marker.kwargs)
        except UserError as exc:
            pytest.fail(f"@pytest.mark.{MARKER}: {exc}", pytrace=False)
        except TypeError as exc:  # an option the function does not take
            pytest.fail(f"@pytest.mark.{MARKER}: {exc}", pytrace=False)
    return item.stash[_RESULT]


@pytest.fixture
def crash_sweep_result(request: pytest.FixtureRequest) -> AppSweepResult:
    """The sweep of the test's ``crash_sweep`` marker, for the test to judge itself."""
    if request.node.get_closest_marker(MARKER) is None:
        pytest.fail(f"{FIXTURE} needs @pytest.mark.{MARKER}(...) on the test", pytrace=False)
    return _result(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Sweep a marked test's app before its body; fail it afterwards when the sweep failed and
    the test did not take the result to judge itself."""
    if item.get_closest_marker(MARKER) is None:
        return (yield)
    result = _result(item)
    outcome = yield
    judged_by_test = FIXTURE in getattr(item, "fixturenames", ())
    if not judged_by_test and not result.ok:
        pytest.fail(result.explain(), pytrace=False)
    return outcome
