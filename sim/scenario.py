"""Scenario files: what the simulator runs. Schema, validation and loading.

A scenario is a JSON file under ``scenarios/`` (or anywhere, given by path). It names the tools
(each bound to an external-service operation with a recovery policy), the client's inputs (with
request ids and virtual arrival times), and the model's script: for the k-th user input, the list
of turns the model takes (tool calls, then an answer), optionally failing the first attempts.
The model answers as a function of the conversation so far, never of a call counter, so a request
re-sent after a crash gets the same answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from durable.events import Budget, Policy

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"

Operation = Literal[
    "workspace.read", "workspace.append_line", "payments.charge", "outbox.send", "counter.increment"
]


class ScenarioError(ValueError):
    """A scenario that does not exist or fails validation (one line, names the problem)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolDef(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")
    operation: Operation
    policy: Policy = "unsafe"
    latency_s: float = Field(default=0.0, ge=0, le=3600)


class CallDef(_Model):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Turn(_Model):
    """One model turn: tool calls, or (no calls) the final answer. ``fail_attempts`` makes the
    first attempts of this turn fail (retryable or fatal) before it succeeds."""

    calls: list[CallDef] = Field(default_factory=list, max_length=16)
    answer: str = ""
    fail_attempts: int = Field(default=0, ge=0, le=16)
    fail_retryable: bool = True
    retry_after_s: float | None = Field(default=None, ge=0, le=3600)


class InputDef(_Model):
    content: str = Field(min_length=1, max_length=10_000)
    request_id: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    at_s: float = Field(default=0.0, ge=0, le=86_400)


class ActionDef(_Model):
    """A client action at a virtual time: ``abort`` the conversation's active run."""

    kind: Literal["abort"]
    at_s: float = Field(ge=0, le=86_400)


class OperatorDef(_Model):
    """How the operator resolves calls waiting for manual reconciliation: ``check_ledger`` looks
    at the external service (the truth) and records what really happened; ``assume_failed``
    records an error result without looking."""

    decision: Literal["check_ledger", "assume_failed"] = "check_ledger"
    delay_s: float = Field(default=5.0, ge=0, le=86_400)


class TakeoverDef(_Model):
    """A second worker starts at ``second_worker_at_s``; the first process is paused (a GC pause,
    a stopped VM) from ``pause_at_s`` for ``pause_for_s`` seconds, past its lease."""

    pause_at_s: float = Field(ge=0, le=86_400)
    pause_for_s: float = Field(gt=0, le=86_400)
    second_worker_at_s: float = Field(ge=0, le=86_400)


class TimedCrashDef(_Model):
    """A crash at the first boundary reached at or after ``at_s`` of virtual time (the fuzzer's
    state machine writes these; the sweep's crash points come on top)."""

    at_s: float = Field(ge=0, le=86_400)
    kind: Literal["process", "power"] = "process"


class ResendDef(_Model):
    """The client sends request ``request_id`` again at ``at_s`` (e.g. after a lost response)."""

    request_id: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    at_s: float = Field(ge=0, le=86_400)


class BaseCrashDef(_Model):
    """A crash every run of the scenario suffers (the sweep adds its crash points after it): at
    the first boundary whose label starts with ``label_prefix``."""

    label_prefix: str = Field(min_length=1, max_length=200)
    when: Literal["before", "after"] = "after"
    kind: Literal["process", "power"] = "process"


class Scenario(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    description: str = Field(min_length=1, max_length=300)
    conversation_id: str = Field(default="c1", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    tools: list[ToolDef] = Field(default_factory=list, max_length=32)
    inputs: list[InputDef] = Field(min_length=1, max_length=64)
    script: list[list[Turn]] = Field(min_length=1, max_length=64)
    budget: Budget = Budget()
    checkpoint_every: int = Field(default=16, ge=1, le=10_000)
    lease_ttl_s: float = Field(default=30.0, gt=0, le=3600)
    heartbeat_s: float = Field(default=10.0, gt=0, le=3600)
    max_model_attempts: int = Field(default=4, ge=1, le=32)
    fsync: bool = True
    liveness_bound_s: float = Field(default=7200.0, gt=0, le=10**7)
    files: dict[str, str] = Field(default_factory=dict)
    fake_files: int = Field(default=2, ge=0, le=32)
    actions: list[ActionDef] = Field(default_factory=list, max_length=16)
    operator: OperatorDef | None = None
    takeover: TakeoverDef | None = None
    client_resends: bool = False
    base_crash: BaseCrashDef | None = None
    timed_crashes: list[TimedCrashDef] = Field(default_factory=list, max_length=8)
    resends: list[ResendDef] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError("tool names must be unique")
        if len(self.script) != len(self.inputs):
            raise ValueError(f"script has {len(self.script)} entries for {len(self.inputs)} inputs")
        rids = [i.request_id for i in self.inputs]
        if len(set(rids)) != len(rids):
            raise ValueError("request ids must be unique")
        for k, turns in enumerate(self.script):
            for turn in turns:
                for call in turn.calls:
                    if call.tool not in names:
                        raise ValueError(f"script[{k}] calls undefined tool {call.tool!r}")
        if self.heartbeat_s >= self.lease_ttl_s:
            raise ValueError("heartbeat_s must be below lease_ttl_s")
        unknown = [r.request_id for r in self.resends if r.request_id not in rids]
        if unknown:
            raise ValueError(f"resend of unknown request id {unknown[0]!r}")
        if any(t.policy == "manual" for t in self.tools) and self.operator is None:
            raise ValueError("a scenario with a manual tool needs an operator")
        return self

    def without_faults(self) -> Scenario:
        """The fault-free reference of this scenario: its timed crashes removed (everything else,
        a takeover included, is part of the workload)."""
        return self.model_copy(update={"timed_crashes": []}) if self.timed_crashes else self

    def tool(self, name: str) -> ToolDef:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)


def load_scenario_file(path: Path) -> Scenario:
    """A scenario file, or a regression-corpus case (which embeds its scenario)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if isinstance(raw, dict) and "scenario" in raw and "schema_version" in raw:
        raw = raw["scenario"]  # a regression-corpus case embeds the scenario it ran
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ScenarioError(
            f"{path}: invalid scenario at {where}: {first['msg']} ({exc.error_count()} errors)"
        ) from exc


def bundled_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.json"))


def load_scenario(name_or_path: str) -> Scenario:
    """A bundled scenario by name, or a scenario file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or "/" in name_or_path:
        return load_scenario_file(path)
    candidate = SCENARIO_DIR / f"{name_or_path}.json"
    if not candidate.exists():
        known = ", ".join(bundled_names())
        raise ScenarioError(f"unknown scenario {name_or_path!r} (known: {known})")
    return load_scenario_file(candidate)
