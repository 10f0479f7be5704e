"""``durable``'s public face (durable/__init__.py): every name in ``__all__`` exists, the list is
sorted without duplicates, the whole error family is in it, and every public name of a
``durable`` module that the documentation tells a user about -- the README's "The reference
runtime" section, the pages it leads to (docs/runtime.md, docs/stores.md) and
docs/architecture.md, section 1 -- is exported, unless it is listed below with the reason it is
not (trio's exports test is the model)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from types import ModuleType

import pytest
from testkit import REPO

import durable
import durable.errors
from durable.events import _Event

#: Documented names that are deliberately not part of ``durable``'s face, and why.
NOT_EXPORTED = {
    "Journal": "the runtime's write path, described for how it works; users call Conversation",
    "recover_state": "Journal.open's recovery, described for how it works",
    "Submission": "a part of State (State.submissions), reached through it",
    "OsFileSystem": "a port implementation that real_ports() builds (durable.ports)",
    "run": "python -m durable inspect's entry point, not an API (the word is a code span)",
    "SqlStore": "the database stores' one implementation, described for how they work; users "
    "construct SQLiteStore or PostgresStore",
}


#: The pages the README's runtime section leads to, read whole: what it says of the runtime and
#: its stores in brief, they say in full.
RUNTIME_PAGES = ("runtime.md", "stores.md")


def _section(text: str, start: str, end: str) -> str:
    assert start in text, f"section {start!r} not found: the test reads the wrong place"
    return text.split(start, 1)[1].split(end, 1)[0]


def _documented_tokens() -> set[str]:
    """Every identifier inside a code span or code block of the documented sections."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    text = _section(readme, "## The reference runtime (`durable/`)", "\n## Architecture")
    for page in RUNTIME_PAGES:  # the runtime's and the stores' whole pages
        assert f"](docs/{page})" in text, f"the README's runtime section no longer links {page}"
        text += (REPO / "docs" / page).read_text(encoding="utf-8")
    text += _section(architecture, "## 1. The runtime (`durable/`)", "\n## 2. ")
    spans = re.findall(r"`([^`\n]+)`", text)
    return {token for span in spans for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}


def _modules() -> list[ModuleType]:
    names = [m.name for m in pkgutil.walk_packages(durable.__path__, "durable.")]
    return [importlib.import_module(n) for n in names if not n.endswith("__main__")]


def _defined_public_names() -> dict[str, object]:
    """Public classes and functions of ``durable``'s modules, by name, where they are defined."""
    out: dict[str, object] = {}
    for module in _modules():
        for name, value in vars(module).items():
            defined_here = getattr(value, "__module__", None) == module.__name__
            if not name.startswith("_") and defined_here and callable(value):
                out[name] = value
    return out


def test_every_exported_name_exists() -> None:
    missing = [name for name in durable.__all__ if not hasattr(durable, name)]
    assert not missing, f"durable.__all__ names what durable does not have: {missing}"


def test_all_is_sorted_without_duplicates() -> None:
    """Sorted as ruff sorts ``__all__`` (constants, then classes, then the rest)."""
    names = list(durable.__all__)
    assert len(names) == len(set(names)), "duplicates in durable.__all__"

    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert names == sorted(names, key=key)


def test_the_whole_error_family_is_exported() -> None:
    assert sorted(set(durable.errors.__all__) - set(durable.__all__)) == []


def test_every_documented_public_name_is_exported() -> None:
    defined = _defined_public_names()
    documented = sorted(token for token in _documented_tokens() if token in defined)
    assert "PostgresStore" in documented and "delegate" in documented  # the test sees the docs
    missing = [
        name
        for name in documented
        if name not in durable.__all__
        and name not in NOT_EXPORTED
        and not (inspect.isclass(obj := defined[name]) and issubclass(obj, _Event))
    ]
    assert not missing, (
        f"documented but not in durable.__all__: {missing} (export them, or say in "
        "NOT_EXPORTED why not)"
    )
    stale = sorted(name for name in NOT_EXPORTED if name not in documented)
    assert not stale, f"NOT_EXPORTED names the documentation no longer mentions: {stale}"


@pytest.mark.parametrize("name", sorted(durable.__all__))
def test_each_export_is_the_object_of_its_home_module(name: str) -> None:
    value = getattr(durable, name)
    home = getattr(value, "__module__", None)
    if home is None or not home.startswith("durable") or not callable(value):
        return  # a constant or a typing alias: nothing to compare
    assert getattr(importlib.import_module(home), name.split(".")[-1]) is value


def test_importing_durable_imports_no_driver_and_no_simulator() -> None:
    """``import durable`` (every store included) needs neither psycopg nor the simulator:
    ``PostgresStore`` imports its driver when constructed."""
    script = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"  # any import of it now fails
        "import durable\n"
        "assert durable.PostgresStore.__name__ == 'PostgresStore'\n"
        "assert not any(m == 'sim' or m.startswith('sim.') for m in sys.modules), 'sim'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
