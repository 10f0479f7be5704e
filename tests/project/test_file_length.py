"""No module of ``durable/`` or ``sim/`` is over 800 lines (the project's limit on a file): a longer
one is two modules' worth of ideas in one place (``durable/state.py`` was split for it into the
reducer and ``durable/state_model.py``; ``sim/world/process.py`` into the injector and the
evidence recorder)."""

from __future__ import annotations

from testkit import REPO

MAX_MODULE_LINES = 800


def test_no_module_is_longer_than_800_lines() -> None:
    long = [
        f"{path.relative_to(REPO)}: {count}"
        for package in ("durable", "sim")
        for path in sorted((REPO / package).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert long == [], "modules over 800 lines:\n" + "\n".join(long)
