"""``dump_state`` (what checkpoints and digests serialise) is ``State.model_dump`` exactly, and
the parts it dumps once per object really are frozen.

It dumps messages, tool results, pinned requests and tool calls once per object and shares the
dicts between checkpoints; that is only sound while those parts cannot change after they are
added, so the test also checks that changing one raises."""

from __future__ import annotations

import pydantic
import pytest
from tiers import tiered

from durable.codec import canonical_json
from durable.state import State, dump_state, new_state, reduce
from durable.store.base import make_checkpoint
from sim.run.runner import run_scenario
from sim.world.faults import parse_schedule
from sim.world.scenario import load_scenario

# A long run (compaction-free, many checkpoints), compaction, compensation, agent state, steering,
# and a crash in the middle (interrupted and reconciled calls, a new epoch).
CASES = [
    ("long_horizon", None),
    ("compaction_mid_conversation", None),
    ("abandon_restores_files", None),
    ("plan_edit_validate", None),
    ("steer_mid_tools", None),
    ("read_edit_answer", "20:after:process"),
]


def _states(name: str, schedule: str | None) -> list[State]:
    scenario = load_scenario(name)
    result = run_scenario(
        scenario if schedule else scenario.without_faults(),
        seed=0,
        store="file",
        schedule=parse_schedule(schedule) if schedule else None,
    )
    states = []
    pinned = 0  # states taken while a request is pinned (only ever mid-turn)
    state = new_state(scenario.conversation_id)
    for n, record in enumerate(result.durable.records, start=1):
        state = reduce(state, [record])
        if n % 7 == 0 or n == len(result.durable.records) or (state.pinned and pinned < 8):
            pinned += bool(state.pinned)
            states.append(state.model_copy(deep=True))
    assert states
    return states


@pytest.mark.parametrize(
    ("name", "schedule"), tiered(CASES, fast=[c for c in CASES if c[0] != "long_horizon"])
)
def test_dump_state_is_model_dump(name: str, schedule: str | None) -> None:
    states = _states(name, schedule)
    for state in states:
        plain = state.model_dump(mode="json")
        assert dump_state(state) == plain
        assert canonical_json(dump_state(state)) == canonical_json(plain)
        restored = make_checkpoint(state, 1.0).to_state()
        assert dump_state(restored) == plain  # a state loaded from a checkpoint too
    # Every part dumped once occurs in the states compared (a pinned request only mid-turn).
    assert states[-1].messages and states[-1].tool_results
    assert any(state.pinned for state in states)


def test_the_parts_dumped_once_are_frozen() -> None:
    states = _states("read_edit_answer", None)
    message = states[-1].messages[-1]
    result = next(iter(states[-1].tool_results.values()))
    pinned = next(iter(next(s for s in states if s.pinned).pinned.values()))
    with pytest.raises(pydantic.ValidationError):
        message.content = "changed"  # type: ignore[misc]  # frozen: refused, as tested
    with pytest.raises(pydantic.ValidationError):
        result.output = "changed"  # type: ignore[misc]  # frozen: refused, as tested
    with pytest.raises(pydantic.ValidationError):
        pinned.cutoff = 0  # type: ignore[misc]  # frozen: refused, as tested
