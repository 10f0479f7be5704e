"""The import graph: ``durable`` never imports ``sim``; neither has an import cycle -- not even one
closed by an import inside a function -- and no module imports a layer above its own
(docs/architecture.md, section 2, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from testkit import REPO

ROOT = REPO


def _modules(package: str) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path) -> set[str]:
    """Every module named by an import anywhere in the file (top level, functions, and
    ``TYPE_CHECKING`` blocks alike)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _graph(package: str) -> dict[str, set[str]]:
    modules = _modules(package)
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_durable_never_imports_sim() -> None:
    for name, path in _modules("durable").items():
        leaked = sorted(m for m in _imports(path) if m == "sim" or m.startswith("sim."))
        assert not leaked, f"{name} imports {leaked}"


@pytest.mark.parametrize("package", ["durable", "sim"])
def test_no_import_cycle(package: str) -> None:
    cycle = _cycle(_graph(package))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_can_fail() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


#: sim's layers, bottom first (docs/architecture.md, "Layers"). A module may import its own layer
#: and the layers before it, never one after. ``sim.errors`` (the root of the errors for bad input)
#: is below them all: every layer raises its errors, so it imports nothing of ``sim``.
LAYERS = (
    "sim.errors",
    "sim.world",
    "sim.run",
    "sim.judgement",
    "sim.explore",
    "sim.targets",
    "sim.outputs",
)


def _layer(module: str) -> int | None:
    """The rank of ``module``'s layer; None for the package root ``sim`` (and ``sim.__main__``)."""
    for rank, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return rank
    return None


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    out: list[str] = []
    for name, targets in sorted(graph.items()):
        rank = _layer(name)
        for target in sorted(targets):
            target_rank = _layer(target)
            if rank is not None and target_rank is not None and target_rank > rank:
                out.append(f"{name} -> {target}")
    return out


def test_every_sim_module_is_in_a_layer() -> None:
    loose = [n for n in _modules("sim") if _layer(n) is None and n not in ("sim", "sim.__main__")]
    assert not loose, f"modules outside the layers {LAYERS}: {loose}"


def test_sim_never_imports_a_layer_above() -> None:
    upward = _upward_imports(_graph("sim"))
    assert not upward, "imports up a layer: " + "; ".join(upward)


def test_the_layer_check_can_fail() -> None:
    graph = {"sim.world.fs": {"sim.run.runner"}, "sim.run.runner": {"sim.world.fs"}}
    assert _upward_imports(graph) == ["sim.world.fs -> sim.run.runner"]
    assert _upward_imports({"sim.errors": {"sim.world.faults"}}) == [
        "sim.errors -> sim.world.faults"
    ]
