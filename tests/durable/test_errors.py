"""Every error ``durable`` raises on purpose is a ``DurableError`` (durable/errors.py), defined
once and still importable from the module that first defined it."""

from __future__ import annotations

import importlib
import inspect

import pytest

import durable.errors
from durable.errors import DurableError, InvariantViolation, StoreError

#: Where each error was defined before ``durable.errors``; ``sim/`` and tests import them there.
OLD_HOMES = {
    "ConversationBusy": "durable.runtime",
    "CorruptStore": "durable.store.base",
    "Fenced": "durable.journal",
    "InvariantViolation": "durable.state",
    "LeaseHeld": "durable.store.base",
    "ModelError": "durable.model",
    "SequenceConflict": "durable.store.base",
    "StaleLease": "durable.store.base",
    "StoreBusy": "durable.store.base",
    "StoreError": "durable.store.base",
    "ToolError": "durable.tools",
    "UsageError": "durable.inspect",
}


def _error_classes() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(durable.errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }


def test_every_error_descends_from_the_root_and_says_when_it_is_raised() -> None:
    classes = _error_classes()
    assert sorted(classes) == sorted([*OLD_HOMES, "DurableError"])
    for name, cls in classes.items():
        assert issubclass(cls, DurableError), name
        assert cls.__doc__ and len(cls.__doc__.split()) >= 12, f"{name} needs a docstring"


def test_the_store_family_stays_under_store_error() -> None:
    for name in ("StaleLease", "LeaseHeld", "SequenceConflict", "StoreBusy", "CorruptStore"):
        assert issubclass(getattr(durable.errors, name), StoreError), name


@pytest.mark.parametrize(("name", "module"), sorted(OLD_HOMES.items()))
def test_each_error_is_the_same_class_where_it_used_to_live(name: str, module: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(durable.errors, name)


def test_an_invariant_violation_is_not_an_assertion_error() -> None:
    """``except AssertionError`` (a test's, a fuzzer's) must not swallow a wrong log, and
    ``python -O`` semantics must not apply to it."""
    assert not issubclass(InvariantViolation, AssertionError)
    with pytest.raises(InvariantViolation):
        try:
            raise InvariantViolation("sequence 3 after 1")
        except AssertionError:  # pragma: no cover - the point is that this does not match
            pytest.fail("InvariantViolation was caught as an AssertionError")
