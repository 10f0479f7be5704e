"""Runtime configuration: every limit has a name with its unit and a bound."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from durable.events import Budget


class RuntimeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model_name: str = "default"
    lease_ttl_s: float = Field(default=30.0, gt=0)
    heartbeat_s: float = Field(default=10.0, gt=0)
    lease_wait_limit: int = Field(default=8, ge=1)
    #: A checkpoint (and a lease renewal) where a commit's settled tasks cross a multiple of
    #: this: points of the conversation, the same in a run that survived crashes
    #: (``Journal._checkpoint_due``).
    checkpoint_every_tasks: int = Field(default=4, ge=1)
    #: And every this many records while no task settles: a bound on what recovery replays
    #: when few tasks settle.
    checkpoint_every: int = Field(default=32, ge=1)
    budget: Budget = Budget()
    max_model_attempts: int = Field(default=4, ge=1)
    backoff_base_s: float = Field(default=1.0, gt=0)
    backoff_max_s: float = Field(default=60.0, gt=0)
    #: Compact the conversation (``durable.compaction``) when the context a turn would send is
    #: estimated above this many tokens (characters of its canonical JSON / 4). None: only when
    #: the model refuses a request as too long.
    context_budget_tokens: int | None = Field(default=None, ge=1)
    #: Criteria a run must have validated (a passing validation at the current mutation
    #: revision) before it may stop as ``completed`` (docs/architecture.md, 1.7).
    required_criteria: tuple[str, ...] = ()
