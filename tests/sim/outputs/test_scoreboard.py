"""The generated scoreboard (``sim.outputs.scoreboard``, ``make scoreboard``): the committed
markdown is exactly what the generator writes from the committed JSON, every registered target
has its rows, and a real sweep of the python target's demo fills a row."""

from __future__ import annotations

import json

import pytest
from testkit import REPO

from sim.outputs import scoreboard as board
from sim.outputs.scoreboard import (
    JSON_PATH,
    MARKDOWN_PATH,
    SCHEMA_VERSION,
    combinations,
    render,
    scoreboard,
)
from sim.targets.environments import Environment
from sim.targets.protocol import Target, TargetOptions
from sim.targets.registry import get_target, target_names
from sim.targets.sweep import target_versions


def test_the_markdown_is_what_the_generator_writes_from_the_json() -> None:
    doc = json.loads((REPO / JSON_PATH).read_text(encoding="utf-8"))
    assert (REPO / MARKDOWN_PATH).read_text(encoding="utf-8") == render(doc), (
        "docs/scoreboard.md is generated: run make scoreboard, never edit it by hand"
    )


def test_every_target_is_on_the_board() -> None:
    doc = json.loads((REPO / JSON_PATH).read_text(encoding="utf-8"))
    listed = {row["target"] for row in doc["rows"]} | {s["target"] for s in doc["skipped"]}
    assert listed == set(target_names())


def test_the_combinations_are_every_mode_by_every_variant() -> None:
    langgraph = [(v, o.durability) for v, o in combinations(get_target("langgraph"))]
    assert len(langgraph) == 3 * 2 and ("idempotent", "exit") in langgraph
    assert [v for v, _ in combinations(get_target("python"))] == ["as_is", "keyed"]


@pytest.mark.slow  # two full sweeps of the demo job in real processes
def test_a_real_sweep_fills_the_python_rows() -> None:
    doc = scoreboard(["python"], progress=False)
    as_is, keyed = doc["rows"]
    assert as_is["failing"] > 0 and as_is["invariants"] == ["I1"]
    assert as_is["replay"].startswith("durable-sim target replay python --app ")
    assert keyed["failing"] == 0 and keyed["replay"] == ""
    assert "| python |" in render(doc)


def test_a_resumed_generation_keeps_the_rows_it_saved_and_sweeps_nothing_again() -> None:
    target = get_target("python")
    versions = target_versions(target)
    rows = [
        {"target": "python", "durability": target.durabilities[0], "variant": variant, "n": n}
        for n, (variant, options) in enumerate(combinations(target))
    ]
    saved = {"schema_version": SCHEMA_VERSION, "versions": {"python": versions}, "rows": rows}
    doc = scoreboard(["python"], progress=False, done=saved)  # a row swept again has no "n"
    assert doc["rows"] == rows and doc["skipped"] == []


def test_a_target_in_its_own_environment_gets_its_versions_from_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The board reads a target's versions from the venv its children run in: that venv is made
    before they are read (a first generation had the ADK rows say "not installed")."""
    made: list[str] = []
    target = get_target("adk")
    assert target.environment is not None

    def make(environment: Environment, **_: object) -> None:
        made.append(environment.name)

    def read(read_from: Target) -> dict[str, str]:
        assert made == ["adk"], "versions read before the environment was made"
        return {"google-adk": "2.13.0"}

    def sweep_one(target: Target, options: TargetOptions, variant: str) -> dict[str, object]:
        return {
            "target": "adk",
            "durability": options.durability,
            "variant": variant,
        }

    monkeypatch.setattr(board, "ensure", make)
    monkeypatch.setattr(board, "target_versions", read)
    monkeypatch.setattr(board, "score", sweep_one)
    doc = scoreboard(["adk"], progress=False)
    assert doc["versions"] == {"adk": {"google-adk": "2.13.0"}} and len(doc["rows"]) == 4
