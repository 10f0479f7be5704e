"""Shared fixtures of the runtime tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from testkit import STORE_KINDS, Stores


@pytest.fixture(params=STORE_KINDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Both stores, each on a fresh directory (one test per store kind)."""
    made = Stores(request.param, tmp_path)
    yield made
    made.close()
