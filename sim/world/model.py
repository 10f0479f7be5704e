"""The fake model: answers from the scenario's script as a function of the conversation so far.

For a request whose context holds k user messages and, after the last of them, t assistant turns,
the answer is turn t of ``script[k-1]``: so a request re-sent after a crash gets the same answer,
and a new input after a settled run starts at the top of its own script. Every call is a boundary
``model.call#n`` and is logged (the oracles count calls and check what each request contained).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from durable.events import canonical_json, sha256_hex
from durable.model import ModelError, ModelRequest, ModelResponse, ProposedCall
from sim.world.process import SimProcess
from sim.world.scenario import Scenario

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
        users = tuple(m["content"] for m in request.messages if m["role"] == "user")
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
                request.cursor or "",
            )
        )
        machine.world.record("model", request.task_id, request.attempt, len(users), outcome)
        machine.after(self._p, index, label)
        await self._p.sleep_until(self._p.now() + MODEL_LATENCY_S)
        if isinstance(response, ModelError):
            raise response
        return response


def script_answer(scenario: Scenario, request: ModelRequest) -> ModelResponse:
    messages: list[dict[str, Any]] = request.messages
    user_positions = [i for i, m in enumerate(messages) if m["role"] == "user"]
    assert user_positions, "a request without a user message"
    k = min(len(user_positions), len(scenario.script))
    since = messages[user_positions[-1] + 1 :]
    turn_index = sum(1 for m in since if m["role"] == "assistant")
    turns = scenario.script[k - 1]
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
    outputs = [
        f"{m['content']}{'!' if m['is_error'] else ''}" for m in since if m["role"] == "tool"
    ]
    digest = hashlib.sha256("\n".join(outputs).encode("utf-8")).hexdigest()[:12]
    text = f"{turn.answer} [tools={len(outputs)} digest={digest}]"
    return ModelResponse(text=text, tokens=len(text) // 4 + 8, **agent)
