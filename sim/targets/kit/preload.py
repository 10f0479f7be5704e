"""What a warm zygote may import for a user's app before it forks (``Target.preload``): the
modules of installed libraries the app's file imports at its top level, by their full dotted
names (``langgraph.graph``, ``langgraph.checkpoint.sqlite``: the top package alone may be a
namespace that imports nothing, and a LangGraph job's children then imported LangGraph each).

Why only those: a library (LangGraph, SQLAlchemy, httpx) is the same in every child, so importing
it once in the zygote is the import every child would have made. The app's own modules are not
preloaded: the child imports them after it has wrapped their effects and entered the point's
directory (``sim.targets.kit.loading``), and so are the modules the user named as effects (their
functions are wrapped before the app sees them). A library that starts a thread or opens a file
when imported makes the zygote refuse, and the sweep says so and runs fresh interpreters.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from sim.targets.kit.spec import AppSpec

#: Libraries preloaded for one app at most: the zygote imports them one after the other.
MAX_PRELOAD = 64


def app_preload(spec: AppSpec) -> tuple[str, ...]:
    """The modules the app's source imports at its top whose top-level package is installed
    outside its own directory, in the order it imports them; () if its source cannot be read or
    parsed (the child will say why in its own words). A dotted name is a module the app imports
    itself when loaded, before any code of its own runs, so a zygote that cannot import it is
    refused as the app would fail."""
    source = _source(spec)
    if source is None:
        return ()
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return ()
    own = {e.module.split(".", 1)[0] for e in spec.effects if e.module}
    found: list[str] = []
    is_library: dict[str, bool] = {}
    for name in _imported(tree):
        top = name.split(".", 1)[0]
        if top not in is_library:
            is_library[top] = top not in own and _installed(top, source.parent)
        if name in found or not is_library[top]:
            continue
        found.append(name)
        if len(found) == MAX_PRELOAD:
            break
    return tuple(found)


def _source(spec: AppSpec) -> Path | None:
    if spec.app.endswith(".py"):
        return Path(spec.app)
    base = Path(spec.workdir, *spec.app.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(tree: ast.Module) -> list[str]:
    """Absolute imports at the module's top level, up to its first statement that is not an
    import or the docstring (not inside functions or ``if`` blocks, and not after code: such
    an import may need what the app set up first, as Django's models need its settings)."""
    names: list[str] = []
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                names.append(node.module)
        elif not (index == 0 and isinstance(node, ast.Expr)):  # the docstring
            break
    return names


def _installed(top: str, app_dir: Path) -> bool:
    """Whether ``top`` is found outside the app's directory (a library, not the app's own
    module, which the child must import itself)."""
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if found is None:
        return False
    if found.origin in ("built-in", "frozen"):
        return True
    if (app_dir / f"{top}.py").exists() or (app_dir / top).is_dir():
        return False  # the child imports the app's own module of that name, not the library
    # A namespace package (``langgraph``, spread over several distributions) has no origin,
    # only the directories it spans.
    places = [found.origin] if found.origin else list(found.submodule_search_locations or ())
    home = app_dir.resolve()
    return bool(places) and not any(Path(p).resolve().is_relative_to(home) for p in places)
