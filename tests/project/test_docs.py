"""The architecture and crash-model documents are checked against the code they describe."""

from __future__ import annotations

import re

from testkit import REPO

from sim.judgement import oracles
from sim.judgement.oracles import INVARIANT_NAMES
from sim.run.runner import run_scenario
from sim.world.faults import boundary_kind
from sim.world.scenario import bundled_names, load_scenario

DOCS = REPO / "docs"


def test_the_oracle_catalogue_names_every_invariant_and_real_functions() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (I\d+) \| [^|]+ \| ([^|]+) \|$", text, flags=re.M)
    assert [invariant for invariant, _ in rows] == list(INVARIANT_NAMES)
    for invariant, functions in rows:
        for name in re.findall(r"`([a-z_]+)`", functions):
            assert callable(getattr(oracles, name, None)), (
                f"{invariant}: no sim.judgement.oracles.{name}"
            )


def _label_head(label: str) -> str:
    """``fs.write:c1/lease.json@0`` -> ``fs.write``; ``store.commit#3`` -> ``store.commit``."""
    return label.split(":", 1)[0].split("#", 1)[0]


def test_the_boundary_catalogue_lists_every_label_the_bundled_scenarios_reach() -> None:
    text = (DOCS / "crash-model.md").read_text(encoding="utf-8")
    table = text.split("## Crash points (boundaries)", 1)[1].split("## Crash kinds", 1)[0]
    documented = set(re.findall(r"`([a-z_]+\.[a-z_.]+|sqlite\.\*)[#:`]", table))
    heads: set[str] = set()
    for name in bundled_names():
        for store in ("file", "sqlite"):
            result = run_scenario(load_scenario(name), seed=0, store=store)  # type: ignore[arg-type]
            heads |= {_label_head(b.label) for b in result.boundaries}
    missing = sorted(
        head
        for head in heads
        if head not in documented
        and not (head.startswith("sqlite.") and "sqlite.*" in documented)
        and not (head.startswith("tool.") and "tool.effect" in documented)
    )
    assert not missing, f"boundary labels missing from docs/crash-model.md: {missing}"
    assert {boundary_kind(h) for h in heads} >= {"commit", "lease", "checkpoint", "tool", "model"}
