"""Determinism (I10 across processes): same identity, same fingerprint, under any PYTHONHASHSEED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from tiers import tiered

from sim.run.runner import run_scenario
from sim.world.faults import parse_schedule
from sim.world.scenario import load_scenario


def _fingerprint_in_subprocess(
    hashseed: str, scenario: str, seed: int, schedule: str
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim",
            "replay",
            "--scenario",
            scenario,
            "--seed",
            str(seed),
            "--schedule",
            schedule,
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    fingerprint: dict[str, Any] = json.loads(out.stdout)
    return fingerprint


@pytest.mark.parametrize(
    ("scenario", "schedule"),
    tiered(
        [("read_edit_answer", "30:after:power"), ("idempotent_payment", "21:after:process")],
        fast=[("idempotent_payment", "21:after:process")],
    ),
)
def test_same_fingerprint_in_fresh_processes_under_different_hash_seeds(
    scenario: str, schedule: str
) -> None:
    first = _fingerprint_in_subprocess("1", scenario, 7, schedule)
    second = _fingerprint_in_subprocess("987654", scenario, 7, schedule)
    assert first["fingerprint"] == second["fingerprint"]
    assert first["verdict"] == second["verdict"] == "pass"
    local = run_scenario(
        load_scenario(scenario), seed=7, store="file", schedule=parse_schedule(schedule)
    )
    assert local.trace.fingerprint == first["fingerprint"]


def test_different_seeds_give_different_content() -> None:
    scenario = load_scenario("read_edit_answer")
    a = run_scenario(scenario, seed=1, store="file")
    b = run_scenario(scenario, seed=2, store="file")
    names_a = sorted(n for n in a.outside.files if n != "config.yaml")
    names_b = sorted(n for n in b.outside.files if n != "config.yaml")
    assert names_a != names_b or [a.outside.files[n] for n in names_a] != [
        b.outside.files[n] for n in names_b
    ]
    assert a.trace.fingerprint != b.trace.fingerprint


def test_same_seed_same_fingerprint_in_process() -> None:
    scenario = load_scenario("model_error_then_message")
    assert (
        run_scenario(scenario, seed=3, store="sqlite").trace.fingerprint
        == run_scenario(scenario, seed=3, store="sqlite").trace.fingerprint
    )
