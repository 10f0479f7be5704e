"""durable: a reference durable agent runtime (event log, checkpoints, leases, recovery policies).

The public API: ``Runtime``, ``RuntimeConfig``, the stores, tools and model protocols.
"""

from durable.config import RuntimeConfig
from durable.events import Budget, EventRecord, ToolCall
from durable.journal import Fenced
from durable.model import ModelDriver, ModelError, ModelRequest, ModelResponse, ProposedCall
from durable.ports import Ports, real_ports
from durable.runtime import Conversation, ConversationBusy, Runtime, SubmissionHandle
from durable.state import State, reduce
from durable.store import FileStore, SQLiteStore
from durable.tools import ToolContext, ToolError, ToolRegistry, ToolSpec, Verification

__all__ = [
    "Budget",
    "Conversation",
    "ConversationBusy",
    "EventRecord",
    "Fenced",
    "FileStore",
    "ModelDriver",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Ports",
    "ProposedCall",
    "Runtime",
    "RuntimeConfig",
    "SQLiteStore",
    "State",
    "SubmissionHandle",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolSpec",
    "Verification",
    "real_ports",
    "reduce",
]
