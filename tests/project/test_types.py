"""The type checker is clean: ``mypy durable sim`` under pyproject's ``[tool.mypy]``, strict for
both packages (no module is let off). Annotations are then checked claims about the seams (the
ports, the stores' connections), not comments that drift from the code; and an error mypy is
told to ignore says on its line why it is not a bug.

mypy keeps its cache in ``.mypy_cache`` at the repository's root: a warm run takes seconds, a
cold one (every third-party package analysed once) over a minute, hence ``slow``. The same
command is ``make typecheck``, and ``make check`` runs it before the suite."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from testkit import REPO

#: The packages whose ignores must give their reason: every one mypy checks.
CHECKED = ("durable", "sim")

# ``# type: ignore[code]  # why``: the code (mypy itself requires it: ignore-without-code), and
# a comment after it with the reason.
_REASONED_IGNORE = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S")


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "durable", "sim"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, "mypy durable sim:\n" + result.stdout + result.stderr


def test_every_type_ignore_gives_its_reason() -> None:
    bare: list[str] = []
    for package in CHECKED:
        for path in sorted((REPO / package).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, start=1):
                if "type: ignore" in line and not _REASONED_IGNORE.search(line):
                    bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert bare == [], "type: ignore without '[code]  # reason':\n" + "\n".join(bare)
