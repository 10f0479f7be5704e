"""The architecture and crash-model documents are checked against the code they describe."""

from __future__ import annotations

import importlib
import re

from testkit import REPO

from sim.judgement.invariants import INVARIANTS, architecture_table, readme_table
from sim.run.runner import run_scenario
from sim.world.faults import boundary_kind
from sim.world.scenario import bundled_names, load_scenario

DOCS = REPO / "docs"


def _table(text: str, header: str) -> str:
    """The markdown table that starts at the line ``header`` (every ``|`` line after it)."""
    lines = text.split("\n")
    assert header in lines, f"no table starting {header!r}"
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[start:end]) + "\n"


def test_the_architecture_catalogue_is_the_registry() -> None:
    """docs/architecture.md 2.6 lists exactly the registry's invariants, as it renders them: an
    invariant without its row, a row without its invariant, or a changed sentence fails."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### 2.6 The oracles", 1)[1].split("\n### ", 1)[0]
    rendered = architecture_table()
    assert _table(section, rendered.split("\n", 1)[0]) == rendered, (
        "docs/architecture.md 2.6: paste sim.judgement.invariants.architecture_table()"
    )


def test_the_readme_table_of_invariants_is_the_registry() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## The invariants\n", 1)[1].split("\n## ", 1)[0]
    rendered = readme_table()
    assert _table(section, rendered.split("\n", 1)[0]) == rendered, (
        "README.md, The invariants: paste sim.judgement.invariants.readme_table()"
    )


def test_every_invariant_names_functions_that_exist() -> None:
    for record in INVARIANTS:
        assert record.implemented_by, record.code
        for path in record.implemented_by:
            module, name = path.rsplit(".", 1)
            assert callable(getattr(importlib.import_module(module), name, None)), (
                f"{record.code}: no {path}"
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
            heads |= {_label_head(b.label) for b in result.trace.boundaries}
    missing = sorted(
        head
        for head in heads
        if head not in documented
        and not (head.startswith("sqlite.") and "sqlite.*" in documented)
        and not (head.startswith("tool.") and "tool.effect" in documented)
    )
    assert not missing, f"boundary labels missing from docs/crash-model.md: {missing}"
    assert {boundary_kind(h) for h in heads} >= {"commit", "lease", "checkpoint", "tool", "model"}
