"""Stores: where a conversation's log, checkpoints and lease live. See ``base`` for the contract."""

from durable.store.base import (
    Checkpoint,
    CorruptStore,
    Lease,
    LeaseHeld,
    SequenceConflict,
    StaleLease,
    Store,
    StoreBusy,
    StoreError,
    make_checkpoint,
)
from durable.store.file import FileStore
from durable.store.postgres import PostgresStore  # psycopg is imported on first use only
from durable.store.sqlite import SQLiteStore

__all__ = [
    "Checkpoint",
    "CorruptStore",
    "FileStore",
    "Lease",
    "LeaseHeld",
    "PostgresStore",
    "SQLiteStore",
    "SequenceConflict",
    "StaleLease",
    "Store",
    "StoreBusy",
    "StoreError",
    "make_checkpoint",
]
