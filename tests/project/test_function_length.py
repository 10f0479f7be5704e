"""Every function of ``durable/`` and ``sim/`` fits on a screen: at most 80 lines (TigerBeetle's
style puts a limit on everything; a longer function is a module's worth of logic in one place)."""

from __future__ import annotations

import ast

from testkit import REPO

MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_80_lines() -> None:
    long: list[str] = []
    for package in ("durable", "sim"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines}")
    assert long == [], "functions over 80 lines:\n" + "\n".join(long)
