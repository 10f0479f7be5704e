"""The serialisation memos of records and checkpoints change no byte and no answer.

``EventRecord.sealed`` builds the record's line from the body it hashed (splicing the checksum in
where sorted keys put it), ``verify`` is computed once per record, ``parse_record`` remembers
lines it parsed, and a checkpoint's text reuses the body hashed for its checksum. Each must give
exactly what the plain computation gives, for any content a model or a tool can produce.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from durable.codec import canonical_json
from durable.events import (
    EventRecord,
    InputAccepted,
    Memo,
    ToolCall,
    ToolIntent,
    parse_record,
)
from durable.state import new_state
from durable.store.base import Checkpoint, make_checkpoint

# Any Python string, lone surrogates and the characters canonical JSON escapes included.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20) | st.sampled_from(
    ['"', "\\", ',"conversation_id":', '","checksum":"x', "\u2028", "\ud800", "é"]
)


def record(batch: str, content: str, arguments: dict[str, str], sequence: int = 1) -> EventRecord:
    event = (
        InputAccepted(submission_id="s", request_id=None, content=content)
        if not arguments
        else ToolIntent(
            task_id="t",
            call_id=content,
            tool="edit",
            arguments=arguments,
            policy="idempotent",
            idempotency_key="k",
            epoch=1,
        )
    )
    return EventRecord(
        conversation_id="conv-1",
        sequence=sequence,
        event_id=f"evt-{content}",
        recorded_at_s=1.5,
        batch=batch,
        batch_index=3,
        last_in_batch=True,
        owner_id="owner",
        epoch=1,
        event=event,
    )


@settings(max_examples=200, deadline=None)
@given(batch=TEXT, content=TEXT, arguments=st.dictionaries(TEXT, TEXT, max_size=3))
def test_sealed_line_is_the_canonical_json_of_the_record(
    batch: str, content: str, arguments: dict[str, str]
) -> None:
    sealed = record(batch, content, arguments).sealed()
    assert sealed.to_line() == canonical_json(sealed.model_dump(mode="json"))
    assert sealed.checksum == sealed.compute_checksum()
    assert sealed.verify()
    parsed = parse_record(sealed.to_line().encode("utf-8"))
    assert parsed.verify() == (parsed.compute_checksum() == parsed.checksum)
    assert parsed.to_line() == canonical_json(parsed.model_dump(mode="json"))


def test_a_changed_copy_of_a_verified_record_is_checked_again() -> None:
    sealed = record("b", "c", {}).sealed()
    assert sealed.verify()
    changed = sealed.model_copy(update={"epoch": 2})
    assert not changed.verify()
    assert changed.to_line() == canonical_json(changed.model_dump(mode="json"))
    assert changed.sealed().verify()


def test_a_line_that_does_not_verify_stays_unverified_when_parsed_again() -> None:
    sealed = record("b", "c", {}).sealed()
    tampered = sealed.to_line().replace('"content":"c"', '"content":"d"').encode("utf-8")
    assert not parse_record(tampered).verify()
    assert not parse_record(tampered).verify()


def test_an_identity_memo_never_answers_for_a_dead_object() -> None:
    class Box:
        pass

    memo: Memo[Box, int] = Memo(8, by_identity=True)
    ids: list[int] = []
    for n in range(100):  # a box dies at its ``del`` (refcount): later boxes reuse its id
        box = Box()
        assert memo.get(box) is None
        memo.put(box, n)
        assert memo.get(box) == n
        ids.append(id(box))
        del box
    assert len(set(ids)) < len(ids), "no id was reused: the test tested nothing"


def test_memo_is_bounded() -> None:
    memo: Memo[int, int] = Memo(4, by_identity=False)
    for n in range(10):
        memo.put(n, n)
    assert [memo.get(n) for n in range(10)] == [None] * 6 + [6, 7, 8, 9]


@settings(max_examples=50, deadline=None)
@given(content=TEXT)
def test_checkpoint_text_is_its_canonical_json(content: str) -> None:
    state = new_state("conv-1")
    state = state.model_copy(update={"owner_id": content, "last_sequence": 7})
    checkpoint = make_checkpoint(state, 2.0)
    assert checkpoint.to_text() == canonical_json(checkpoint.model_dump(mode="json"))
    assert checkpoint.verify() and checkpoint.checksum == checkpoint.compute_checksum()
    loaded = Checkpoint.model_validate(json.loads(checkpoint.to_text()))
    assert loaded.to_text() == checkpoint.to_text() and loaded.verify()


def test_tool_call_arguments_survive_the_line() -> None:
    call = ToolCall(call_id="c", tool="t", arguments={"a": [1, 2]})
    assert call.arguments == {"a": [1, 2]}
    sealed = record("b", "c", {"path": "x"}).sealed()
    assert parse_record(sealed.to_line()) == sealed


def test_every_memo_and_the_encoding_live_in_the_codec() -> None:
    """One home (durable/codec.py): no other module of ``durable`` builds a memo or an encoder,
    and the names other modules re-export are the codec's own objects."""
    import durable.codec
    import durable.events
    import durable.state

    root = Path(durable.codec.__file__).parent
    elsewhere = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        if path.name != "codec.py"
        and any(needle in path.read_text(encoding="utf-8") for needle in ("Memo(", "JSONEncoder("))
    ]
    assert not elsewhere, f"memos or encoders outside durable/codec.py: {elsewhere}"
    for module, name in [
        (durable.events, "canonical_json"),
        (durable.events, "sha256_hex"),
        (durable.events, "parse_json"),
        (durable.events, "Memo"),
        (durable.state, "frozen_dump"),
    ]:
        assert getattr(module, name) is getattr(durable.codec, name), (module.__name__, name)
