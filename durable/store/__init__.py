"""Stores: where a conversation's log, checkpoints and lease live. See ``base`` for the contract,
``damage`` for what each does with damaged storage.

A store that goes on past damage says what it moved aside on the ``durable.store`` loggers
(warnings). Like any library, it adds no handler that prints: the host decides where they go
(the ``NullHandler`` below keeps Python's last-resort handler from printing them to stderr).
"""

import logging

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

logging.getLogger(__name__).addHandler(logging.NullHandler())

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
