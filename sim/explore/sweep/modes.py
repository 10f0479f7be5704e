"""How a sweep checks determinism (I10), and how it takes the fast path.

I10 re-runs a schedule and compares the two fingerprints. ``full`` re-runs every schedule,
``sample`` a seeded 1 in ``DETERMINISM_SAMPLE_EVERY`` (and every failing one), ``off`` none.
The modes themselves (``Determinism``, ``determinism_mode``) are part of a sweep's plan
(``sim.explore.plan``); they are re-exported here.
"""

from __future__ import annotations

import zlib

from sim.explore.plan import DETERMINISM_MODES, Determinism, determinism_mode
from sim.judgement.judge import ScheduleOutcome, judge
from sim.judgement.oracles import Verdict
from sim.run.runner import RunResult

# Below this many boundaries a fast sweep runs the naive path split over its jobs: a forked
# child costs ~4 ms of its own (copying the pages it touches), about a short run's whole prefix.
FORK_FROM_BOUNDARIES = 150

# With ``sample``, one crash point in this many gets I10's second run (plus every failing one).
DETERMINISM_SAMPLE_EVERY = 16


def wants_rerun(mode: Determinism, seed: int, schedule_text: str) -> bool:
    """Whether I10 re-runs this schedule up front. ``sample`` picks a seeded 1 in
    ``DETERMINISM_SAMPLE_EVERY`` by a hash of (seed, schedule) -- stable across processes and
    hash seeds, unlike ``hash()`` -- as FoundationDB checks determinism on a sample of runs;
    failing schedules are re-run afterwards whatever the sample said."""
    if mode != "sample":
        return mode == "full"
    return zlib.crc32(f"{seed}|{schedule_text}".encode()) % DETERMINISM_SAMPLE_EVERY == 0


def judge_as(result: RunResult, reference: RunResult, mode: Determinism) -> ScheduleOutcome:
    """``judge`` with I10 as ``mode`` asks: a sampled schedule is re-run up front; one that
    fails without having been sampled is re-run too (a failure must say if it reproduces)."""
    rerun = wants_rerun(mode, result.seed, result.schedule.text())
    outcome = judge(result, reference, determinism=rerun)
    if mode == "sample" and not rerun and outcome.verdict != Verdict.PASS:
        outcome = judge(result, reference, determinism=True)
    return outcome


__all__ = [
    "DETERMINISM_MODES",
    "DETERMINISM_SAMPLE_EVERY",
    "FORK_FROM_BOUNDARIES",
    "Determinism",
    "determinism_mode",
    "judge_as",
    "wants_rerun",
]
