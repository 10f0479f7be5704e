"""Which exceptions raised through a tool are the call's error result (``is_tool_failure``)."""

from __future__ import annotations

from durable.errors import Fenced
from durable.store.base import CorruptStore, LeaseHeld
from durable.tasks import is_tool_failure
from durable.tools import ToolError


def test_damaged_history_read_through_a_tool_is_never_its_result() -> None:
    damaged = CorruptStore("/store/c1.sub.call-1/events.jsonl: line 5: committed data is damaged")
    assert not is_tool_failure(damaged)
    # A tool that opened its child inside a nursery raises a group: still not a result.
    assert not is_tool_failure(ExceptionGroup("nursery", [ValueError("v"), damaged]))


def test_ordinary_failures_and_a_childs_ownership_errors_are_results() -> None:
    assert is_tool_failure(ToolError("the card was declined"))
    assert is_tool_failure(ValueError("bad argument"))
    # The child's lease held by a live process, or lost: the parent's own lease is unaffected.
    assert is_tool_failure(LeaseHeld("c1.sub.call-1 is held", expires_at_s=30.0))
    assert is_tool_failure(Fenced("c1.sub.call-1: lease lost"))
    assert is_tool_failure(ExceptionGroup("nursery", [ValueError("v"), ToolError("t")]))
