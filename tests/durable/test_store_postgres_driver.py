"""``durable`` without the optional Postgres driver: it imports, and the store names the extra.

No server is needed, and these run whether psycopg is installed or not.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from durable.store import postgres as pg_module


def test_durable_imports_without_psycopg() -> None:
    """``durable`` never needs psycopg to import; constructing the store names the extra."""
    script = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"  # any import of it now fails
        "import durable.runtime, durable.store\n"
        "from durable.ports import InlineBlocking\n"
        "try:\n"
        "    durable.store.PostgresStore('', blocking=InlineBlocking())\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'durable-sim[postgres]'" in done.stdout, done.stdout + done.stderr


def test_namespace_must_be_a_plain_identifier() -> None:
    for bad in ("", "Upper", "a-b", "x;drop", "1abc", "a" * 64):
        with pytest.raises(ValueError):
            pg_module.check_namespace(bad)
