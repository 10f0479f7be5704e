"""The documents are checked against the code they describe, and against each other: the README
stays short, and every relative link of the README and docs/ leads somewhere."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from testkit import REPO

from sim.explore.mutants import MUTANTS
from sim.judgement.invariants import INVARIANTS, architecture_table, readme_table
from sim.run.runner import run_scenario
from sim.world.faults import boundary_kind
from sim.world.scenario import bundled_names, load_scenario

DOCS = REPO / "docs"

#: The README is the user's way in: what it is, the two commands, a tour, reading a report,
#: testing your own runtime. Measurements, catalogues and the details of each part live in docs/.
README_MAX_LINES = 450


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
            result = run_scenario(load_scenario(name), seed=0, store=store)
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


def test_the_readme_stays_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move details to docs/"
    )


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _relative_links(path: Path) -> list[str]:
    """The targets of the file's markdown links and images that are not URLs (code blocks and
    code spans are not prose: a ``[x](y)`` inside them is not a link)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = re.findall(r"\[[^\]\n]*\]\(([^)\s]+)\)", text)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def _documents() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_of_the_documents_leads_somewhere() -> None:
    """A link to a moved or renamed file, or to a heading that is gone, fails."""
    broken: list[str] = []
    for document in _documents():
        for target in _relative_links(document):
            name, _, anchor = target.partition("#")
            file = (document.parent / name).resolve() if name else document
            if not file.exists():
                broken.append(f"{document.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{document.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def mutant_table() -> str:
    """docs/mutants.md's table, rendered from the registry (``sim.explore.mutants.MUTANTS``)."""
    lines = [
        "| mutant | bug class | caught by | its scenario | first killing schedule |",
        "|---|---|---|---|---|",
    ]
    for m in MUTANTS:
        codes = ", ".join(m.caught_by) + (f" (also {', '.join(m.also)})" if m.also else "")
        first = f"`{m.first_kill}`" if m.first_kill else "none at depth 1 (the fuzzer's)"
        lines.append(
            f"| `{m.name}` | {m.bug_class} | {codes} | {m.scenario}[{m.store}] | {first} |"
        )
    return "\n".join(lines) + "\n"


def test_the_mutant_table_is_the_registry() -> None:
    """A mutant added, removed or changed in the registry without its row fails."""
    text = (DOCS / "mutants.md").read_text(encoding="utf-8")
    rendered = mutant_table()
    assert _table(text, rendered.split("\n", 1)[0]) == rendered, (
        "docs/mutants.md: paste tests/project/test_docs.py's mutant_table()"
    )
