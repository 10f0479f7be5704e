"""Many fast sweeps in a row, each bounded: the forking sweep must never hang.

The hang this guards against (forked children sharing trio's wakeup sockets with the parent)
struck about one fast sweep in twelve; ``test_fork_isolation`` reproduces its cause
deterministically, and this test runs the whole path repeatedly in a child process under a hard
timeout, so a regression fails instead of stalling CI.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from testkit import REPO
from tiers import release

from sim.explore import forking

pytestmark = pytest.mark.slow

#: Rounds of the two sweeps: the hang struck about one fast sweep in twelve, so a release check
#: (``tiers.release``) runs 20 sweeps and the slow tier 10; ``test_fork_isolation`` is the
#: deterministic check of its cause, in every run.
SWEEPS = 10 if release() else 5
TIMEOUT_S = 600

SCRIPT = textwrap.dedent(
    f"""
    from sim.world.scenario import load_scenario
    from sim.explore.sweep import SweepPlan, sweep

    scenario = load_scenario("idempotent_payment")
    for n in range({SWEEPS}):
        for store in ("file", "sqlite"):
            plan = SweepPlan(scenario=scenario, store=store, crash_kinds=("process", "power"),
                             determinism=False)
            result = sweep(plan, fast=True, fork_from=0)
            assert not result.failures, result.failures[0].repro
        print(n, flush=True)
    """
)


@pytest.mark.skipif(not forking.AVAILABLE, reason="needs os.fork")
def test_repeated_fast_sweeps_all_finish() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            cwd=REPO,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        finished = (exc.stdout or b"").decode().split()
        pytest.fail(f"a fast sweep hung after {len(finished)} of {SWEEPS} rounds")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(n) for n in range(SWEEPS)]
