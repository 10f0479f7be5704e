"""The oracles I0-I23: what must hold after every schedule, with minimal witnesses.

Each check reads only ground truth: the durable log and checkpoints as a fresh reader sees them,
the external services' effect ledgers, the client's view (what was acknowledged and answered), the
fake model's call log, and the machine's record of durable commits, leases and crashes. A failure
names the invariant, carries the few rows that prove it and one sentence saying why.

One module per family of checks, each opening with what it verifies and what it leaves to the
others; what every invariant means is its record in ``sim.judgement.invariants``. This module
runs them (``check``) and is where every name the rest of the repository imports is found.

``I0`` is the runtime itself failing (an exception or a violated internal assertion): a safety
verdict too, since a runtime that crashes on its own data cannot keep any promise.
"""

from __future__ import annotations

from sim.judgement.oracles.agent_state import check_agent_effects, check_agent_log
from sim.judgement.oracles.checkpoints import check_checkpoints
from sim.judgement.oracles.compaction import CompactionWatcher, check_compaction
from sim.judgement.oracles.compensation import check_compensation
from sim.judgement.oracles.damage_table import UnmappedFault, check_damage_table
from sim.judgement.oracles.determinism import check_determinism, compare_fingerprints
from sim.judgement.oracles.durability import check_durability, check_suffix_loss
from sim.judgement.oracles.effects import check_effects, check_results
from sim.judgement.oracles.facts import (
    Facts,
    Reduced,
    Watcher,
    derive_facts,
    durable_child_commits,
    durable_commits,
    reduce_log,
    row,
    store_promises_power,
    within_promise,
)
from sim.judgement.oracles.fencing import check_fencing, out_of_fence_effects, stale_appends
from sim.judgement.oracles.inbox import (
    check_inbox,
    check_queue_order,
    check_rejections,
    check_steering_boundary,
    check_steering_mode,
)
from sim.judgement.oracles.inputs import check_inputs
from sim.judgement.oracles.liveness import check_liveness
from sim.judgement.oracles.log import check_log
from sim.judgement.oracles.model_calls import _compacted, check_model_calls
from sim.judgement.oracles.refusal import check_refusal
from sim.judgement.oracles.resume import (
    check_resume,
    check_shutdown,
    check_stopped_runs_stay_stopped,
)
from sim.judgement.oracles.subagents import check_subagents, child_states, delegating_tools
from sim.judgement.oracles.transparency import check_transparency
from sim.judgement.violation import (
    VERDICT_ORDER,
    Verdict,
    Violation,
    verdict_of,
    worst_verdict,
)
from sim.run.runner import RunResult

_facts = derive_facts  # the name tests/sim/judgement used before the families were split

__all__ = [
    "VERDICT_ORDER",
    "CompactionWatcher",
    "Facts",
    "Reduced",
    "UnmappedFault",
    "Verdict",
    "Violation",
    "Watcher",
    "_compacted",
    "_facts",
    "check",
    "check_agent_effects",
    "check_agent_log",
    "check_checkpoints",
    "check_compaction",
    "check_compensation",
    "check_damage_table",
    "check_determinism",
    "check_durability",
    "check_effects",
    "check_fencing",
    "check_inbox",
    "check_inputs",
    "check_liveness",
    "check_log",
    "check_model_calls",
    "check_queue_order",
    "check_refusal",
    "check_rejections",
    "check_results",
    "check_resume",
    "check_shutdown",
    "check_steering_boundary",
    "check_steering_mode",
    "check_stopped_runs_stay_stopped",
    "check_subagents",
    "check_suffix_loss",
    "check_transparency",
    "child_states",
    "compare_fingerprints",
    "delegating_tools",
    "derive_facts",
    "durable_child_commits",
    "durable_commits",
    "out_of_fence_effects",
    "reduce_log",
    "row",
    "stale_appends",
    "store_promises_power",
    "verdict_of",
    "within_promise",
    "worst_verdict",
]


def check(result: RunResult, reference: RunResult) -> list[Violation]:
    """Every invariant except I10 (which needs a second run: see ``check_determinism``).

    Which oracles run depends on what the run left; they run in this order, and the order is
    part of the output (the first violation is a failure's headline, in reports, repro lines
    and the mutants' first kills):

    | when | oracles, in order |
    |---|---|
    | a process refused damaged storage | I13 ``check_refusal``, I8 ``check_fencing``, I23
      ``check_damage_table``; no other |
    | always | I2 ``check_log``, I3 ``check_checkpoints``, I8 ``check_fencing``, I4
      ``check_stopped_runs_stay_stopped``, I14-I16 and I21 ``check_inbox``, I19
      ``check_compaction``, I18 ``check_agent_log``, I22 ``check_shutdown``, I23
      ``check_damage_table`` |
    | the log reduces | I20 ``check_subagents``; then the store's promise decides (next rows);
      then I4 ``check_resume``, I5 ``check_inputs``, I9 ``check_transparency`` |
    | ... within the store's promise | I18 ``check_agent_effects``, I1 ``check_effects``, I6
      ``check_results``, I12 ``check_durability``, I17 ``check_compensation``; after I9, I11
      ``check_model_calls`` (lost commits legitimately redo work and model calls) |
    | ... outside it (a power loss it does not promise to survive) | I12 ``check_suffix_loss`` |
    | always, last | I7 ``check_liveness``; I0 if the runtime raised (usually the consequence of
      a violation found above) |
    """
    if result.storage.refusal is not None:
        # A process stopped on corrupt storage and the world ended there: the run's own
        # promises end with it; I13 judges the stop, I8 the leases granted before it.
        return check_refusal(result) + check_fencing(result) + check_damage_table(result)
    compaction = CompactionWatcher()
    reduced = reduce_log(result, watchers=[compaction])
    facts = derive_facts(result, reduced)
    out = _always(result, reduced, compaction)
    if facts.state is not None:
        out += _state_reduced(result, reference, facts)
    out += check_liveness(result, facts)
    if result.errors.runtime_error is not None:
        out.append(
            Violation(
                "I0", "the runtime raised instead of recovering", (result.errors.runtime_error,)
            )
        )
    return out


def _always(result: RunResult, reduced: Reduced, compaction: CompactionWatcher) -> list[Violation]:
    """The oracles that need no reducible log (each reads the raw log, or reports that it does
    not reduce)."""
    out = check_log(result, reduced)
    out += check_checkpoints(result, reduced)
    out += check_fencing(result)
    out += check_stopped_runs_stay_stopped(result)
    out += check_inbox(result)
    out += check_compaction(result, compaction)
    out += check_agent_log(result)
    out += check_shutdown(result)
    out += check_damage_table(result)
    return out


def _state_reduced(result: RunResult, reference: RunResult, facts: Facts) -> list[Violation]:
    """The oracles that read the reduced state, some only within the store's promise."""
    assert facts.state is not None
    promised = within_promise(result)
    out = check_subagents(result, facts.state)
    if promised:
        out += _within_promise(result, facts)
    else:
        out += check_suffix_loss(result)
    out += check_resume(result, facts)
    out += check_inputs(result, facts, promised=promised)
    out += check_transparency(result, reference, facts)
    if promised:  # lost acknowledged commits legitimately redo work (and model calls)
        out += check_model_calls(result, reference)
    return out


def _within_promise(result: RunResult, facts: Facts) -> list[Violation]:
    """The oracles that compare the log with the world: only a store that kept its promise
    (every acknowledged commit survived) must match it."""
    out = check_agent_effects(result, facts)
    out += check_effects(result, facts)
    out += check_results(result, facts)
    out += check_durability(result, facts)
    out += check_compensation(result)
    return out
