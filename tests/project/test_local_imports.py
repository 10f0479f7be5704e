"""An import inside a function says why it is there: an optional extra, a cycle, a module that
must be imported later than this one (Prefect reads its settings when imported; coverage must
start first), or a command's modules the CLI's start does not load. The reason is a comment on
the import's line or on the line above its block; an import with no reason belongs at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

from testkit import REPO

#: Comments that are instructions to a tool, not a reason.
TOOL_COMMENTS = ("noqa", "type:", "pragma", "fmt:")


def _reason(comment_line: str) -> bool:
    """Whether a line carries a comment that says something (not only ``# noqa`` and kin)."""
    if "#" not in comment_line:
        return False
    parts = [p.strip() for p in comment_line.split("#")[1:]]
    return any(p and not p.startswith(TOOL_COMMENTS) for p in parts)


def _local_imports_without_reason(path: Path, root: Path = REPO) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[str] = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Import | ast.ImportFrom):
                continue
            line = lines[sub.lineno - 1]
            above = lines[sub.lineno - 2].strip() if sub.lineno > 1 else ""
            within_block = above.startswith(("import ", "from "))
            if _reason(line) or (above.startswith("#") and _reason(above)) or within_block:
                continue
            found.append(f"{path.relative_to(root)}:{sub.lineno}: {line.strip()}")
    return found


def test_every_import_inside_a_function_gives_its_reason() -> None:
    missing = [
        where
        for package in ("durable", "sim")
        for path in sorted((REPO / package).rglob("*.py"))
        for where in _local_imports_without_reason(path)
    ]
    assert missing == [], "\n".join(missing)


def test_the_check_finds_an_import_without_a_reason(tmp_path: Path) -> None:
    """The rule can fail: a bare import in a function is reported; one with a reason is not."""
    module = tmp_path / "probe.py"
    module.write_text(
        "def bare():\n    import json\n\n"
        "def kept():\n    # the json extra: a probe\n    import json\n    import os\n\n"
        "def hushed():\n    import json  # noqa: F401\n",
        encoding="utf-8",
    )
    assert _local_imports_without_reason(module, tmp_path) == [
        "probe.py:2: import json",
        "probe.py:10: import json  # noqa: F401",
    ]
