"""The store kinds that live in files, named in two layers: ``durable.inspect`` (which reads a
store from a path, and cannot import ``sim``) and ``sim.world.stores.FILE_KINDS`` (what the
real-process host runs). One list in fact: this test holds them equal."""

from __future__ import annotations

from typing import get_args

from durable.inspect import DESCRIPTIONS, DiskStoreKind
from sim.world.stores import FILE_KINDS


def test_inspect_reads_every_store_kind_that_lives_in_files() -> None:
    assert set(get_args(DiskStoreKind)) == {kind.value for kind in FILE_KINDS}
    assert set(DESCRIPTIONS) == set(get_args(DiskStoreKind))
