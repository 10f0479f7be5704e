"""The store contract is written once (durable/store/base.py): the stores call its checks, the
fence and the append helper instead of carrying copies, so a fix to one is a fix to all.

Their behaviour is tested store by store in test_store_conformance.py (a no-op ``check_fence``
fails its fencing tests on all five store configurations); this file keeps the copies from
coming back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit import CONV, input_batch

import durable.store.base as base
from durable.codec import PARSED_LINES

#: The modules that implement a store: the file store, and the database stores' one
#: implementation (``sql``), with the connection and dialect each database keeps apart.
STORES = ("file", "sql", "sqlite", "postgres")
#: Where the fence and the append live: ``SQLiteStore`` and ``PostgresStore`` inherit both.
FENCING = ("file", "sql")

#: What only base.py may say: raising the contract's errors, checking a batch, remembering lines.
CONTRACT_ONLY = (
    "StaleLease(",
    "def check_batch",
    "def check_sequences",
    "def check_conversation_id",
    "def check_fence",
    "remember_written(",
    "_CONVERSATION_ID",
)


@pytest.mark.parametrize("store", STORES)
def test_no_store_carries_its_own_copy_of_the_contract(store: str) -> None:
    source = (Path(base.__file__).parent / f"{store}.py").read_text(encoding="utf-8")
    copies = [needle for needle in CONTRACT_ONLY if needle in source]
    assert not copies, f"durable/store/{store}.py repeats the contract: {copies}"
    if store in FENCING:
        assert "check_fence(" in source, f"durable/store/{store}.py's _fence must call check_fence"
        assert "Append.checked(" in source, f"durable/store/{store}.py's append must use Append"
    else:
        assert "def _fence" not in source, f"durable/store/{store}.py has a fence of its own"
        assert "def append" not in source, f"durable/store/{store}.py has an append of its own"


def test_an_append_is_checked_before_anything_else() -> None:
    with pytest.raises(ValueError, match=r"invalid conversation id '\.\./x'"):
        base.Append.checked("../x", [], owner_id="o", epoch=1)
    with pytest.raises(ValueError, match=r"invalid conversation id '\.\.'$"):
        base.Append.checked("..", [], owner_id="o", epoch=1)
    with pytest.raises(ValueError, match="at least one record"):
        base.Append.checked("conv-1", [], owner_id="o", epoch=1)


def test_the_fence_names_the_stored_lease_and_the_fenced_writer() -> None:
    lease = base.Lease(conversation_id="c", owner_id="new", epoch=2, expires_at_s=9.0)
    base.check_fence(lease, "c", owner_id="new", epoch=2)
    with pytest.raises(base.StaleLease, match=r"lease is \(new, epoch 2\); old \(epoch 1\)"):
        base.check_fence(lease, "c", owner_id="old", epoch=1)
    with pytest.raises(base.StaleLease, match="no lease; old"):
        base.check_fence(None, "c", owner_id="old", epoch=1)


def test_stored_lines_are_remembered_in_the_form_a_reader_gets_back() -> None:
    """After ``stored``, a reader's parse of the stored bytes (or text) is a memo hit."""
    lease = base.Lease(conversation_id=CONV, owner_id="o", epoch=1, expires_at_s=1.0)
    batch = base.Append.checked(CONV, input_batch(1, 2, lease=lease), owner_id="o", epoch=1)
    encoded = [line.encode("utf-8") for line in batch.lines]
    assert [PARSED_LINES.get(line) for line in encoded] == [None, None]
    batch.stored(encoded=encoded)
    assert [PARSED_LINES.get(line) for line in encoded] == batch.records
    assert [PARSED_LINES.get(text) for text in batch.lines] == [None, None]
    batch.stored()
    assert [PARSED_LINES.get(text) for text in batch.lines] == batch.records
