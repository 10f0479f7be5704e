"""The fake model: answers from the scenario's script as a function of the conversation so far.

For a request whose context holds k user messages and, after the last of them, t assistant turns,
the answer is turn t of ``script[k-1]``: so a request re-sent after a crash gets the same answer,
and a new input after a settled run starts at the top of its own script. Every call is a boundary
``model.call#n`` and is logged (the oracles count calls and check what each request contained).

Compaction (``durable.compaction``): a request with ``options["task"] == "summarise"`` is answered
with a deterministic summary of its messages -- ``SUMMARY_PREFIX`` and the canonical JSON of what
the script needs of them: every user message, and the assistant turns and tool outputs since the
last one (``_View``). A summary message (role ``summary``) at the head of a later request is read
back into the same view, so the model answers a compacted conversation exactly as the whole one:
the outcome does not depend on where (or whether) a compaction happened. With
``Scenario.model_context_tokens`` the model refuses a request estimated above it as "context
exceeded".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from durable.codec import canonical_json, sha256_hex
from durable.compaction import estimate_tokens
from durable.model import ModelError, ModelRequest, ModelResponse, ProposedCall
from sim.world.process import SimProcess
from sim.world.scenario import Scenario, Turn

MODEL_LATENCY_S = 1.0


@dataclass(frozen=True)
class ModelCall:
    index: int
    process: str
    task_id: str
    attempt: int
    user_contents: tuple[str, ...]
    time_s: float
    outcome: str
    # sha256 of the whole request (model, options, messages, attempt): a re-send after a crash
    # must be the pinned request, byte for byte ("" where the host does not record it).
    request_digest: str = ""
    # sha256 of the request's first message when it is a summary (a compacted window), else "".
    head_digest: str = ""
    # The provider cursor the request continued from ("" for none): I18 checks the model had
    # declared it resumable.
    cursor: str = ""


class FakeModel:
    """The model of both hosts of a world (the simulator, and the real-process child): the
    script, the latency after the send and the ``model.call#n`` boundary are the same."""

    def __init__(self, scenario: Scenario, process: SimProcess, log: list[ModelCall]) -> None:
        self._scenario = scenario
        self._p = process
        self._log = log

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The call is a boundary when the request is *sent* (the model has it and bills it);
        the response then takes ``MODEL_LATENCY_S``, during which a crash or pause loses it."""
        machine = self._p.machine
        label = f"model.call#{machine.numbered('model.call')}"
        index = machine.before(self._p, label)
        try:
            response: ModelResponse | ModelError = script_answer(self._scenario, request)
        except ModelError as error:
            response = error
        users = tuple(_View.of(request.messages).users)
        head = request.messages[0] if request.messages else {}
        head_digest = sha256_hex(canonical_json(head)) if head.get("role") == "summary" else ""
        outcome = "error" if isinstance(response, ModelError) else "ok"
        self._log.append(
            ModelCall(
                index,
                self._p.id,
                request.task_id,
                request.attempt,
                users,
                self._p.now(),
                outcome,
                sha256_hex(canonical_json(request.model_dump(mode="json"))),
                head_digest,
                request.cursor or "",
            )
        )
        machine.world.record("model", request.task_id, request.attempt, len(users), outcome)
        machine.after(self._p, index, label)
        await self._p.sleep_until(self._p.now() + MODEL_LATENCY_S)
        if isinstance(response, ModelError):
            raise response
        return response


SUMMARY_PREFIX = "Summary of the conversation so far: "


@dataclass
class _View:
    """What the script reads of a conversation: its user messages in order, and the assistant
    turns and tool outputs (``!`` marks an error) since the last user message."""

    users: list[str] = field(default_factory=list)
    turns: int = 0
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, messages: list[dict[str, Any]]) -> _View:
        view = cls()
        for m in messages:
            role = m["role"]
            if role == "summary":
                data = json.loads(m["content"][len(SUMMARY_PREFIX) :])
                view = cls(list(data["users"]), int(data["turns"]), list(data["outputs"]))
            elif role == "user":
                view.users.append(m["content"])
                view.turns, view.outputs = 0, []
            elif role == "assistant":
                view.turns += 1
            elif role == "tool":
                view.outputs.append(f"{m['content']}{'!' if m['is_error'] else ''}")
        return view

    def summary(self) -> str:
        data = {"users": self.users, "turns": self.turns, "outputs": self.outputs}
        return SUMMARY_PREFIX + canonical_json(data)


def script_answer(scenario: Scenario, request: ModelRequest) -> ModelResponse:
    messages: list[dict[str, Any]] = request.messages
    limit = scenario.model_context_tokens
    tokens = estimate_tokens(messages) if limit is not None else 0
    if limit is not None and tokens > limit:
        raise ModelError(
            f"context exceeded: {tokens} tokens over the model's {limit}",
            retryable=False,
            context_exceeded=True,
        )
    view = _View.of(messages)
    if request.options.get("task") == "summarise":
        text = view.summary()
        return ModelResponse(text=text, tokens=len(text) // 4)
    assert view.users, "a request without a user message"
    k = min(len(view.users), len(scenario.script))
    turn_index = view.turns
    turns = _turns(scenario, view.users)
    if turn_index >= len(turns):
        return ModelResponse(text="(script exhausted)", tokens=8)
    turn = turns[turn_index]
    if request.attempt <= turn.fail_attempts:
        kind = "retryable" if turn.fail_retryable else "fatal"
        raise ModelError(
            f"scripted {kind} failure (attempt {request.attempt})",
            retryable=turn.fail_retryable,
            retry_after_s=turn.retry_after_s,
        )
    # The cursor names the script position, so a re-sent request gets the same one.
    agent: dict[str, Any] = {
        "plan": None if turn.plan is None else list(turn.plan),
        "cursor": f"resp-{k}-{turn_index}" if turn.cursor else None,
        "resumable": turn.resumable,
    }
    if turn.calls:
        calls = [ProposedCall(tool=c.tool, arguments=dict(c.arguments)) for c in turn.calls]
        return ModelResponse(text="", tool_calls=calls, tokens=16 * len(calls), **agent)
    outputs = view.outputs
    digest = hashlib.sha256("\n".join(outputs).encode("utf-8")).hexdigest()[:12]
    text = f"{turn.answer} [tools={len(outputs)} digest={digest}]"
    return ModelResponse(text=text, tokens=len(text) // 4 + 8, **agent)


def _turns(scenario: Scenario, users: list[str]) -> list[Turn]:
    """The script a conversation follows: a sub-agent's child (its first input is a key of
    ``sub_script``) the turns of that key for its one input, any other conversation the turns of
    its k-th user message."""
    child = scenario.sub_script.get(users[0])
    if child is not None:
        return child if len(users) == 1 else []
    return scenario.script[min(len(users), len(scenario.script)) - 1]
