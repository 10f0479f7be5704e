"""durable: a reference durable agent runtime (event log, checkpoints, leases, recovery policies).

The public API, importable from ``durable`` itself (one sorted ``__all__``; the README's "The
reference runtime", docs/runtime.md and docs/architecture.md, section 1, describe each piece):

- the runtime: ``Runtime``, ``Conversation``, ``SubmissionHandle``, ``RuntimeConfig``, ``Budget``,
  the inbox modes (``InboxMode``, ``INBOX_MODES``);
- the model protocol: ``ModelDriver``, ``ModelRequest``, ``ModelResponse``, ``ProposedCall``;
- tools: ``ToolRegistry``, ``ToolSpec``, ``ToolContext``, ``ToolCall``, ``Verification``,
  ``Compensation``, the recovery policies (``Policy``, ``POLICIES``), and sub-agents
  (``delegate``, ``child_ids``);
- stores: the ``Store`` protocol, ``FileStore``, ``SQLiteStore``, ``PostgresStore`` (psycopg is
  imported when one is constructed, so ``durable`` imports without it), ``Lease``,
  ``Checkpoint``;
- the log and its state: ``EventRecord``, ``State``, ``reduce``;
- ports: ``Ports``, ``real_ports``;
- errors: ``DurableError`` and every error under it (``durable.errors``).

tests/durable/test_exports.py checks that every name here exists, that ``__all__`` is sorted and
has no duplicates, and that every public name the documentation tells a user about is here.
"""

from durable.config import RuntimeConfig
from durable.errors import (
    ConversationBusy,
    CorruptStore,
    DurableError,
    Fenced,
    InvariantViolation,
    LeaseHeld,
    ModelError,
    SequenceConflict,
    StaleLease,
    StoreBusy,
    StoreError,
    ToolError,
    UsageError,
)
from durable.events import Budget, EventRecord, InboxMode, Policy, ToolCall
from durable.model import ModelDriver, ModelRequest, ModelResponse, ProposedCall
from durable.ports import Ports, real_ports
from durable.runtime import INBOX_MODES, Conversation, Runtime, SubmissionHandle
from durable.state import State, reduce
from durable.store import Checkpoint, FileStore, Lease, PostgresStore, SQLiteStore, Store
from durable.subagent import child_ids, delegate
from durable.tools import (
    POLICIES,
    Compensation,
    ToolContext,
    ToolRegistry,
    ToolSpec,
    Verification,
)

__all__ = [
    "INBOX_MODES",
    "POLICIES",
    "Budget",
    "Checkpoint",
    "Compensation",
    "Conversation",
    "ConversationBusy",
    "CorruptStore",
    "DurableError",
    "EventRecord",
    "Fenced",
    "FileStore",
    "InboxMode",
    "InvariantViolation",
    "Lease",
    "LeaseHeld",
    "ModelDriver",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Policy",
    "Ports",
    "PostgresStore",
    "ProposedCall",
    "Runtime",
    "RuntimeConfig",
    "SQLiteStore",
    "SequenceConflict",
    "StaleLease",
    "State",
    "Store",
    "StoreBusy",
    "StoreError",
    "SubmissionHandle",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolSpec",
    "UsageError",
    "Verification",
    "child_ids",
    "delegate",
    "real_ports",
    "reduce",
]
