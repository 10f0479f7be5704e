"""The type checker is clean: a bare ``mypy``, which checks the directories pyproject's
``[tool.mypy]`` lists in ``files`` (durable, sim and the tests), all under the same strict flags
(no module is let off). Annotations are then checked claims about the seams (the ports, the
stores' connections), not comments that drift from the code; and an error mypy is told to ignore
says on its line why it is not a bug.

mypy keeps its cache in ``.mypy_cache`` at the repository's root: a warm run takes seconds, a
cold one (every third-party package analysed once) over a minute, hence ``slow``. The same
command is ``make typecheck``, and ``make check`` runs it before the suite."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
import tomllib

import pytest
from testkit import REPO

#: The directories mypy checks (pyproject's ``[tool.mypy] files``, their one home): the ones
#: whose ignores must give their reason.
CHECKED: tuple[str, ...] = tuple(
    tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["files"]
)

# ``# type: ignore[code]  # why``: the code (mypy itself requires it: ignore-without-code), and
# a comment after it with the reason.
_REASONED_IGNORE = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S")


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, "mypy:\n" + result.stdout + result.stderr


def _ignores(source: str) -> list[tuple[int, str]]:
    """The comments that tell mypy to ignore (a string that mentions one is not one)."""
    return [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and "type: ignore" in token.string
    ]


def test_every_type_ignore_gives_its_reason() -> None:
    bare: list[str] = []
    for package in CHECKED:
        for path in sorted((REPO / package).rglob("*.py")):
            for number, comment in _ignores(path.read_text(encoding="utf-8")):
                if not _REASONED_IGNORE.search(comment):
                    bare.append(f"{path.relative_to(REPO)}:{number}: {comment}")
    assert bare == [], "type: ignore without '[code]  # reason':\n" + "\n".join(bare)
