"""The oracles I1-I20: what must hold after every schedule, with minimal witnesses.

Each check reads only ground truth: the durable log and checkpoints as a fresh reader sees them,
the external services' effect ledgers, the client's view (what was acknowledged and answered), the
fake model's call log, and the machine's record of durable commits, leases and crashes. A failure
names the invariant, carries the few rows that prove it and one sentence saying why.

``I0`` is the runtime itself failing (an exception or a violated internal assertion): a safety
verdict too, since a runtime that crashes on its own data cannot keep any promise.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from durable.compaction import context_digest, summary_message
from durable.events import (
    CompactionApplied,
    CompactionSettled,
    CompactionStarted,
    CompensationIntent,
    EventRecord,
    FileChanged,
    InputAccepted,
    InputSettled,
    InputsSteered,
    LeaseAcquired,
    ModelCompleted,
    ModelRequested,
    RunStarted,
    RunStopped,
    TaskCheckpoint,
    TaskCreated,
    TaskSettled,
    ToolIntent,
    ToolInterrupted,
    ToolResult,
    ValidationRecorded,
    canonical_json,
    sha256_hex,
)
from durable.state import Intent, InvariantViolation, State, apply, new_state, reduce
from durable.tools import compensation_call_id, content_hash
from sim.run.runner import RunResult
from sim.world.model import ModelCall
from sim.world.scenario import ACTION_STEP_BASE, DELEGATE
from sim.world.stores import StoreKind

SAFETY = ("I0", "I1", "I2", "I3", "I4", "I5", "I6", "I8", "I9", "I11", "I12", "I13")
SAFETY += ("I14", "I15", "I16")  # inbox modes
SAFETY += ("I17",)  # compensation
SAFETY += ("I18",)  # agent state
SAFETY += ("I19",)  # compaction
SAFETY += ("I20",)  # sub-agents
VERDICT_ORDER = ("error", "safety", "liveness", "nondeterminism", "pass")

INVARIANT_NAMES = {
    "I0": "runtime integrity",
    "I1": "effects match policy",
    "I2": "log intact",
    "I3": "checkpoints consistent",
    "I4": "crash-only resume",
    "I5": "inputs settled, no duplicates",
    "I6": "one result per intent, no effect without intent",
    "I7": "liveness",
    "I8": "fencing",
    "I9": "transparency",
    "I10": "determinism",
    "I11": "model calls bounded",
    "I12": "durability of acknowledgements",
    "I13": "damaged storage detected",
    "I14": "steering lands at a post-tools boundary",
    "I15": "queue order preserved",
    "I16": "a rejected input wrote nothing",
    "I17": "abandoned run restores the workspace",
    "I18": "agent state follows the log",
    "I19": "compaction applies fresh summaries only, at boundaries",
    "I20": "one child per delegating call",
}


@dataclass(frozen=True)
class Violation:
    invariant: str
    explanation: str
    witness: tuple[str, ...] = ()
    expected: str = ""
    actual: str = ""

    @property
    def verdict(self) -> str:
        if self.invariant == "I7":
            return "liveness"
        if self.invariant == "I10":
            return "nondeterminism"
        return "safety"

    def to_json(self) -> dict[str, Any]:
        """The one JSON form of a violation (results documents, child outcomes, replay)."""
        return {
            "invariant": self.invariant,
            "explanation": self.explanation,
            "witness": list(self.witness),
            "expected": self.expected,
            "actual": self.actual,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Violation:
        return cls(
            doc["invariant"],
            doc["explanation"],
            tuple(doc["witness"]),
            doc["expected"],
            doc["actual"],
        )


def verdict_of(violations: list[Violation]) -> str:
    """The verdict of a schedule: its most severe violation's (``VERDICT_ORDER``), or pass."""
    for candidate in VERDICT_ORDER:
        if any(v.verdict == candidate for v in violations):
            return candidate
    return "pass"


def worst_verdict(counts: dict[str, int]) -> str:
    """The most severe verdict with a non-zero count (``pass`` when there is none)."""
    for verdict in VERDICT_ORDER:
        if counts.get(verdict):
            return verdict
    return "pass"


@dataclass
class Facts:
    """What the oracles derive once from a result."""

    state: State | None
    run_of_task: dict[str, str] = field(default_factory=dict)
    stop_index: dict[str, int] = field(default_factory=dict)
    stop_epoch: dict[str, int] = field(default_factory=dict)  # the lease epoch that stopped it


def store_promises_power(result: RunResult) -> bool:
    """Whether the store mode promises acknowledged data survives power loss (the store kind
    decides, from the scenario's ``fsync``: ``StoreKind.promises_power``)."""
    return StoreKind(result.store).promises_power(result.scenario.fsync)


def within_promise(result: RunResult) -> bool:
    """False if a crash happened that the store mode does not promise to survive."""
    power = any(c.point.kind == "power" for c in result.crashes)
    return not power or store_promises_power(result)


def check(result: RunResult, reference: RunResult) -> list[Violation]:
    """Every invariant except I10 (which needs a second run: see ``check_determinism``)."""
    if result.refusal is not None:
        # A process stopped on corrupt storage and the world ended there: the run's own
        # promises end with it; I13 judges the stop, I8 the leases granted before it.
        return check_refusal(result) + check_fencing(result)
    out: list[Violation] = []
    compaction = CompactionWatcher()
    reduced = reduce_log(result, watchers=[compaction])
    out += check_log(result, reduced)
    facts = _facts(result, reduced)
    out += check_checkpoints(result, reduced)
    out += check_fencing(result)
    out += check_stopped_runs_stay_stopped(result)
    out += check_inbox(result)
    out += check_compaction(result, compaction)
    out += check_agent_log(result)
    if facts.state is not None:
        out += check_subagents(result, facts.state)
        promised = within_promise(result)
        if promised:
            out += check_agent_effects(result, facts)
        if promised:
            out += check_effects(result, facts)
            out += check_results(result, facts)
            out += check_durability(result, facts)
            out += check_compensation(result)
        if not promised:
            out += check_suffix_loss(result)
        out += check_resume(result, facts)
        out += check_inputs(result, facts, promised=promised)
        out += check_transparency(result, reference, facts)
        if promised:  # lost acknowledged commits legitimately redo work (and model calls)
            out += check_model_calls(result, reference)
    out += check_liveness(result, facts)
    if result.runtime_error is not None:
        # Last: a runtime that raised is usually the consequence of a violation found above.
        out.append(
            Violation("I0", "the runtime raised instead of recovering", (result.runtime_error,))
        )
    return out


def check_determinism(first: RunResult, second: RunResult) -> list[Violation]:
    return compare_fingerprints(first.fingerprint, second.fingerprint)


def compare_fingerprints(first: str, second: str) -> list[Violation]:
    """I10 from two runs' fingerprints (the runs themselves may be in other processes)."""
    if first == second:
        return []
    return [
        Violation(
            "I10",
            "the same scenario, seed and schedule gave a different trace",
            (f"first fingerprint {first}", f"second fingerprint {second}"),
            expected=first,
            actual=second,
        )
    ]


def _row(record: EventRecord) -> str:
    event = record.event.model_dump(mode="json")
    kind = event.pop("type")
    detail = ", ".join(f"{k}={v}" for k, v in event.items() if v not in (None, "", [], {}))
    return f"#{record.sequence} e{record.epoch} {kind}({detail[:160]})"


def durable_commits(result: RunResult) -> list[tuple[int, list[EventRecord]]]:
    """Commits (with the boundary index they started at) whose records are in the final log."""
    final = {r.checksum for r in result.records}
    return [(i, recs) for i, recs in result.commits if recs and recs[0].checksum in final]


def _durable_child_commits(result: RunResult) -> list[tuple[int, list[EventRecord]]]:
    """``durable_commits`` of the sub-agents' child conversations (none without sub-agents)."""
    out: list[tuple[int, list[EventRecord]]] = []
    for child, commits in sorted(result.child_commits.items()):
        final = {r.checksum for r in result.child_records.get(child, [])}
        out += [(i, recs) for i, recs in commits if recs and recs[0].checksum in final]
    return out


class Watcher(Protocol):
    """A walk over the log that rides on ``reduce_log``'s pass instead of making its own.
    ``before`` sees each record with the state it is about to be applied to, ``after`` each
    record that applied, with the state after it; a record that does not apply ends the pass
    (``after`` never sees it). What it finds is its own: the oracle that made it reads it."""

    def before(self, state: State, record: EventRecord) -> None: ...

    def after(self, state: State, record: EventRecord) -> None: ...


@dataclass
class Reduced:
    """``reduce`` of the final log, and of each prefix a verified checkpoint claims, from one
    pass over the log: four oracles used to reduce the whole log on their own (I2, I3 per
    checkpoint, the facts, I19's walk), which was a tenth of judging a long run (I19's own
    walk alone was a quarter of judging a ``long_horizon`` crash run)."""

    state: State | None  # reduce of the whole log; None if it does not reduce
    error: InvariantViolation | None  # why it does not
    prefixes: dict[int, dict[str, Any]]  # through_sequence -> reduce(prefix) as JSON, if it reduces


def reduce_log(result: RunResult, *, watchers: Sequence[Watcher] = ()) -> Reduced:
    """One pass of ``apply`` over ``result.records`` (what ``reduce`` does, on a fresh state),
    dumping the state at every verified checkpoint's ``through_sequence`` on the way and
    showing each record to the ``watchers``. A prefix that does not reduce is absent from
    ``prefixes``, as ``reduce`` of it would raise."""
    records = result.records
    wanted = {
        c.through_sequence
        for c in result.checkpoints
        if c.verify() and c.through_sequence <= len(records)
    }
    state = new_state(result.scenario.conversation_id)
    prefixes: dict[int, dict[str, Any]] = {}
    before = [w.before for w in watchers]
    after = [w.after for w in watchers]
    if 0 in wanted:
        prefixes[0] = state.model_dump(mode="json")
    try:
        for n, record in enumerate(records, start=1):
            for hook in before:
                hook(state, record)
            apply(state, record)
            for hook in after:
                hook(state, record)
            if n in wanted:
                prefixes[n] = state.model_dump(mode="json")
    except InvariantViolation as exc:
        return Reduced(None, exc, prefixes)
    return Reduced(state, None, prefixes)


def _facts(result: RunResult, reduced: Reduced | None = None) -> Facts:
    state = (reduced or reduce_log(result)).state
    if state is None:
        return Facts(state=None)
    facts = Facts(state=state)
    for task in state.tasks.values():
        facts.run_of_task[task.id] = task.run_id
    for index, records in durable_commits(result):
        for record in records:
            if isinstance(record.event, RunStopped):
                facts.stop_index.setdefault(record.event.run_id, index)
                facts.stop_epoch.setdefault(record.event.run_id, record.epoch)
    return facts


# -- I2 log -----------------------------------------------------------------------------------


def check_log(result: RunResult, reduced: Reduced | None = None) -> list[Violation]:
    if result.store_error is not None:
        return [Violation("I2", "a fresh reader finds the store corrupt", (result.store_error,))]
    out: list[Violation] = []
    records = result.records
    for i, record in enumerate(records):
        if record.sequence != i + 1:
            return [
                Violation(
                    "I2",
                    "sequences are not contiguous from 1",
                    tuple(_row(r) for r in records[max(0, i - 1) : i + 1]),
                    expected=f"sequence {i + 1}",
                    actual=f"sequence {record.sequence}",
                )
            ]
        if not record.verify():
            return [Violation("I2", "a committed record fails its checksum", (_row(record),))]
    for previous, record in itertools.pairwise(records):
        if not previous.last_in_batch and previous.batch != record.batch:
            out.append(
                Violation(
                    "I2",
                    "a batch ends without its last record (a partial commit is visible)",
                    (_row(previous), _row(record)),
                )
            )
            break
        if previous.last_in_batch and previous.batch == record.batch:
            out.append(
                Violation("I2", "records follow the end of their own batch", (_row(record),))
            )
            break
    if records and not records[-1].last_in_batch:
        out.append(
            Violation("I2", "a partial batch is visible after recovery", (_row(records[-1]),))
        )
    error = (reduced or reduce_log(result)).error
    if error is not None:
        out.append(Violation("I2", f"the log does not reduce: {error}", ()))
    return out


# -- I3 checkpoints ----------------------------------------------------------------------------


def check_checkpoints(result: RunResult, reduced: Reduced | None = None) -> list[Violation]:
    out: list[Violation] = []
    records = result.records
    prefixes = (reduced or reduce_log(result)).prefixes
    for checkpoint in result.checkpoints:
        if not checkpoint.verify() or checkpoint.through_sequence > len(records):
            continue
        expected = prefixes.get(checkpoint.through_sequence)
        if expected is None:
            continue  # I2 reports a log that does not reduce
        if expected != checkpoint.state:
            digest = sha256_hex(canonical_json(expected))  # ``State.digest`` of that state
            out.append(
                Violation(
                    "I3",
                    "a valid checkpoint differs from reduce of the log prefix it claims",
                    (f"checkpoint through #{checkpoint.through_sequence}",),
                    expected=f"digest {digest[:16]}",
                    actual=f"checkpoint state of {len(checkpoint.state.get('tasks', {}))} tasks",
                )
            )
    out += [
        Violation(
            "I3",
            "after recovery, the process's state differs from reduce of the log its store "
            "returns (a recovery that rebuilt wrongly, or a store that acknowledged commits it "
            "does not return)",
            (mismatch,),
            expected="reduce(log)",
            actual="the recovered state",
        )
        for mismatch in result.recovery_mismatches[:1]
    ]
    return out


# -- I8 fencing --------------------------------------------------------------------------------


def check_fencing(result: RunResult) -> list[Violation]:
    out = _work_after_release(result)
    return out + _check_fencing(result)


def _work_after_release(result: RunResult) -> list[Violation]:
    """I8: a process that released its lease (a graceful shutdown) must have stopped all its
    work first: a commit, tool effect or model call after the release races the next owner,
    who may already hold the lease (the store would even accept a commit: the released lease
    keeps its owner and epoch until another owner takes it)."""
    if not result.after_release:
        return []
    return [
        Violation(
            "I8",
            "a process went on working after it released its lease",
            tuple(result.after_release[:3]),
        )
    ]


def _check_fencing(result: RunResult) -> list[Violation]:
    epoch, owner = 0, None
    last_lease: EventRecord | None = None
    for record in result.records:
        event = record.event
        if isinstance(event, LeaseAcquired):
            if event.epoch <= epoch:
                return [
                    Violation(
                        "I8",
                        "lease epochs do not strictly increase",
                        tuple(_row(r) for r in (last_lease, record) if r is not None),
                    )
                ]
            epoch, owner, last_lease = event.epoch, event.owner_id, record
            continue
        if record.epoch != epoch or record.owner_id != owner:
            return [
                Violation(
                    "I8",
                    "a record was appended under a lease that was not the current one",
                    tuple(_row(r) for r in (last_lease, record) if r is not None),
                    expected=f"owner {owner} epoch {epoch}",
                    actual=f"owner {record.owner_id} epoch {record.epoch}",
                )
            ]
    for grant in result.grants:
        previous, granted = grant.previous, grant.granted
        expected_epoch = (previous.epoch if previous else 0) + 1
        live_other = (
            previous is not None
            and previous.owner_id != granted.owner_id
            and previous.expires_at_s > grant.time_s
        )
        if live_other or granted.epoch != expected_epoch:
            assert previous is not None or not live_other
            return [
                Violation(
                    "I8",
                    "a lease was granted while another owner's was live, or epochs skipped",
                    (f"stored before: {previous}", f"granted at {grant.time_s:.3f}s: {granted}"),
                    expected=f"epoch {expected_epoch} after expiry",
                    actual=f"epoch {granted.epoch}",
                )
            ]
    for renewal in result.renewals:
        previous, renewed = renewal.previous, renewal.granted
        held = previous is not None and (previous.owner_id, previous.epoch) == (
            renewed.owner_id,
            renewed.epoch,
        )
        if not held:
            return [
                Violation(
                    "I8",
                    "a lease renewal changed the stored lease's owner or epoch (a renewal may "
                    "only extend the lease its caller holds)",
                    (f"stored before: {previous}", f"renewed at {renewal.time_s:.3f}s: {renewed}"),
                    expected=f"owner {previous.owner_id} epoch {previous.epoch}"
                    if previous is not None
                    else "no renewal of a missing lease",
                    actual=f"owner {renewed.owner_id} epoch {renewed.epoch}",
                )
            ]
    return stale_appends(result) or out_of_fence_effects(result)


def stale_appends(result: RunResult) -> list[Violation]:
    """Every append a store *accepted* must carry the lease granted last before it: a zombie's
    append that a later reader happens to drop is still a fencing failure."""
    grants = sorted(result.grants, key=lambda g: g.boundary)
    for append in result.accepted:
        current = None
        for grant in grants:
            if grant.boundary < append.boundary:
                current = grant.granted
        if current is None:
            continue
        if (append.owner_id, append.epoch) != (current.owner_id, current.epoch):
            return [
                Violation(
                    "I8",
                    "the store accepted an append from a stale lease (a zombie writer)",
                    (
                        f"append of #{append.sequences[0]}..#{append.sequences[-1]} at boundary "
                        f"{append.boundary} by {append.owner_id} epoch {append.epoch}",
                        f"lease then: {current.owner_id} epoch {current.epoch}",
                    ),
                    expected=f"epoch {current.epoch}",
                    actual=f"epoch {append.epoch}",
                )
            ]
    return []


def out_of_fence_effects(result: RunResult) -> list[Violation]:
    """A fenced service must never apply a request whose token is older than one it has seen."""
    highest = 0
    for effect in result.ledger:
        if effect.service != "payments" or not effect.applied:
            continue
        if effect.epoch < highest:
            return [Violation("I8", "a fenced service applied a stale token", (str(effect),))]
        highest = max(highest, effect.epoch)
    return []


# -- I1 effects and I6 results ---------------------------------------------------------------


def check_effects(result: RunResult, facts: Facts) -> list[Violation]:
    """I1 for every call of the conversation and of its sub-agents' children (a child's calls
    obey their own policies). A delegating call has no effect of its own: I20 judges it."""
    assert facts.state is not None
    delegating = delegating_tools(result)
    states = [facts.state, *(s for s in child_states(result).values() if s is not None)]
    intents = [i for s in states for i in s.intents.values() if i.tool not in delegating]
    tool_results = {c: r for s in states for c, r in s.tool_results.items()}
    out: list[Violation] = []
    for intent in intents:
        effects = [e for e in result.ledger if e.call_id == intent.call_id and e.applied]
        n = len(effects)
        tool_result = tool_results.get(intent.call_id)
        succeeded = (
            tool_result is not None
            and not tool_result.is_error
            and tool_result.source in ("executed", "verified")
        )
        bad = ""
        if intent.policy in ("idempotent", "verify_then_continue"):
            if n > 1:
                bad = f"{n} effects, policy {intent.policy} promises exactly once"
            elif succeeded and n == 0:
                bad = f"recorded as succeeded with no effect, policy {intent.policy}"
        elif intent.policy in ("unsafe", "manual"):
            if n > 1:
                bad = f"{n} effects, policy {intent.policy} promises at most once"
        elif succeeded and n == 0:
            bad = "recorded as executed with no effect, replay_safe promises at least once"
        if bad:
            out.append(
                Violation(
                    "I1",
                    f"call {intent.call_id} ({intent.tool}): {bad}",
                    tuple(str(e) for e in effects[:3]),
                    expected=_expected_effects(intent.policy),
                    actual=f"{n} effect(s)",
                )
            )
    return out


def _expected_effects(policy: str) -> str:
    return {
        "idempotent": "exactly 1 effect",
        "verify_then_continue": "exactly 1 effect",
        "unsafe": "at most 1 effect",
        "manual": "at most 1 effect",
        "replay_safe": "at least 1 effect",
    }[policy]


def check_results(result: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    out: list[Violation] = []
    counts = Counter(r.event.call_id for r in result.records if isinstance(r.event, ToolResult))
    for call_id, n in counts.items():
        if n > 1:
            out.append(Violation("I6", f"call {call_id} has {n} recorded results", ()))
    if result.settled:
        for intent in facts.state.intents.values():
            if counts.get(intent.call_id, 0) == 0 and not intent.reconciliation:
                out.append(
                    Violation("I6", f"intent {intent.call_id} never got a result", (intent.tool,))
                )
    intent_index: dict[str, int] = {}
    for index, records in durable_commits(result) + _durable_child_commits(result):
        for record in records:
            if isinstance(record.event, ToolIntent):
                intent_index.setdefault(record.event.call_id, index)
            elif isinstance(record.event, CompensationIntent):  # its effect's own call id
                intent_index.setdefault(compensation_call_id(record.event.call_id), index)
    for effect in result.ledger:
        if not effect.applied:
            continue
        durable_at = intent_index.get(effect.call_id)
        if durable_at is None or durable_at > effect.boundary:
            out.append(
                Violation(
                    "I6",
                    f"effect of {effect.call_id} happened before its intent was durable",
                    (str(effect), f"intent committed at boundary {durable_at}"),
                    expected="intent commit boundary < effect boundary",
                    actual=f"intent at {durable_at}, effect at {effect.boundary}",
                )
            )
    return out


# -- I4 crash-only resume ----------------------------------------------------------------------


def check_stopped_runs_stay_stopped(result: RunResult) -> list[Violation]:
    """I4 on the raw log (it must work even when the log no longer reduces): no event for a
    task of a run after that run's ``run_stopped``."""
    run_of_task: dict[str, str] = {}
    stopped_at: dict[str, int] = {}
    for record in result.records:
        event = record.event
        if isinstance(event, TaskCreated):
            run_of_task[event.task_id] = event.run_id
        if isinstance(event, RunStopped):
            stopped_at[event.run_id] = record.sequence
            continue
        task_id = getattr(event, "task_id", None)
        run_id = run_of_task.get(task_id) if task_id else None
        if run_id is not None and run_id in stopped_at:
            return [
                Violation(
                    "I4",
                    f"run {run_id} stopped at #{stopped_at[run_id]} but its task ran again",
                    (_row(record),),
                )
            ]
    return []


def check_resume(result: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    state = facts.state
    out: list[Violation] = []
    task_of_call = {i.call_id: i.task_id for i in state.intents.values()}
    for effect in result.ledger:
        run_id = facts.run_of_task.get(task_of_call.get(effect.call_id, ""))
        stop = facts.stop_index.get(run_id) if run_id else None
        if run_id is not None and effect.epoch < facts.stop_epoch.get(run_id, 0):
            # A zombie (a worker paused past its lease) finishing a call it had in flight
            # before the run was stopped under a newer epoch: no runtime can take back a
            # request already on its way; only a fencing service refuses it (I8 checks those).
            continue
        if effect.applied and stop is not None and effect.boundary > stop:
            out.append(
                Violation(
                    "I4",
                    f"a tool of run {run_id} took effect after the run stopped",
                    (str(effect), f"run stopped at boundary {stop}"),
                )
            )
            break
    placed_before = _inputs_placed_before_task(result)
    for call in result.model_calls:
        run_id = facts.run_of_task.get(call.task_id)
        if run_id is None:
            continue
        # A summarisation request asks about a prefix of the conversation, which may end
        # before the run's input (I19 judges compactions); its run's turns still contain it.
        summarising = state.tasks[call.task_id].kind == "compaction"
        stop = facts.stop_index.get(run_id)
        if stop is not None and call.index > stop:
            out.append(
                Violation(
                    "I4",
                    f"the model was called for run {run_id} after it stopped",
                    (f"model call at boundary {call.index}", f"run stopped at boundary {stop}"),
                )
            )
            break
        run = state.runs.get(run_id)
        if run is None or summarising:
            continue
        missing = [
            state.submissions[s].content
            for s in placed_before.get(call.task_id, run.inputs)
            if state.submissions[s].content not in call.user_contents
        ]
        if missing:
            out.append(
                Violation(
                    "I4",
                    f"a request of run {run_id} does not contain the run's own input",
                    (
                        f"missing: {missing[0][:80]!r}",
                        f"request had {len(call.user_contents)} user messages",
                    ),
                    expected=f"request contains {missing[0][:60]!r}",
                    actual="input absent from the model request",
                )
            )
            break
    return out


def _inputs_placed_before_task(result: RunResult) -> dict[str, list[str]]:
    """Each generation task -> the inputs its run had placed when the task was created: the
    run's starting inputs, and the steering inputs placed at its post-tools boundaries so far
    (a steered input joins the run's inputs later, so earlier requests cannot contain it)."""
    placed: dict[str, list[str]] = {}
    out: dict[str, list[str]] = {}
    for record in result.records:
        event = record.event
        if isinstance(event, RunStarted):
            placed[event.run_id] = list(event.inputs)
        elif isinstance(event, InputsSteered):
            placed.setdefault(event.run_id, []).extend(event.inputs)
        elif isinstance(event, TaskCreated) and event.kind == "generation":
            out[event.task_id] = list(placed.get(event.run_id, []))
    return out


# -- I5 inputs ---------------------------------------------------------------------------------


def check_inputs(result: RunResult, facts: Facts, *, promised: bool = True) -> list[Violation]:
    assert facts.state is not None
    state = facts.state
    out: list[Violation] = []
    by_request = Counter(s.request_id for s in state.submissions.values() if s.request_id)
    for rid, n in by_request.items():
        if n > 1:
            out.append(Violation("I5", f"request {rid} was accepted {n} times", ()))
    contents = Counter(m.content for m in state.messages if m.role == "user")
    expected_contents = Counter(i.content for i in result.scenario.inputs)
    for content, n in contents.items():
        if n > expected_contents.get(content, 0):
            out.append(
                Violation("I5", "a user entry appears more often than it was sent", (content[:80],))
            )
    # A re-sent request id that maps to a new submission is a lost acknowledgement in a mode
    # that may lose it (power loss without fsync); the mode's own promise is I12's suffix check.
    for rid, first, second in result.client.remapped if promised else []:
        out.append(
            Violation(
                "I5",
                f"re-sending request {rid} returned another submission",
                (f"first {first}", f"then {second}"),
                expected=first,
                actual=second,
            )
        )
    for rid, sid in result.client.acked.items():
        sub = state.submissions.get(sid)
        if sub is not None and sub.request_id != rid:
            out.append(Violation("I5", f"request {rid} maps to another submission {sid}", ()))
    if result.settled:
        for sub in state.submissions.values():
            if sub.status not in ("done", "unanswered"):
                out.append(Violation("I5", f"submission {sub.id} ended {sub.status}", ()))
    return out


# -- I7 liveness -------------------------------------------------------------------------------


def check_liveness(result: RunResult, facts: Facts) -> list[Violation]:
    if result.runtime_error is not None:
        return []
    if result.settled:
        return []
    pending = []
    if facts.state is not None:
        pending = [
            f"{s.id} ({s.request_id}) {s.status}"
            for s in facts.state.submissions.values()
            if s.status not in ("done", "unanswered")
        ]
    return [
        Violation(
            "I7",
            f"not settled {result.scenario.liveness_bound_s:.0f}s (virtual) after the last fault",
            tuple(pending[:3]),
            expected="every submission done or unanswered",
            actual=f"{len(pending)} unsettled",
        )
    ]


# -- I9 transparency ---------------------------------------------------------------------------


def check_transparency(result: RunResult, reference: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    if not result.settled or not within_promise(result):
        return []
    interrupted_policies = {
        r.event.policy for r in result.records if isinstance(r.event, ToolInterrupted)
    }
    if interrupted_policies & {"unsafe", "manual"}:
        return []
    if any(i.reconciliation for i in facts.state.intents.values()):
        return []
    if result.outcome == reference.outcome:
        return []
    # A client abort happens at a virtual time; a crash moves the runs (the lease wait, the
    # recovery) relative to it, so the abort may land on another run than in the fault-free
    # world. The outcomes it may legitimately change are exactly those of the submissions it
    # settled as aborted in one world and not the other; every other outcome must still match.
    moved = _aborted(result) ^ _aborted(reference)
    # Likewise inputs sent at virtual times: a crash's lease wait can hold them until they are
    # queued together, and queued inputs go to one run -- a legitimately different context.
    # Exactly the submissions answered by a run with another set of inputs are excused.
    # And when a moved action changed the conversation itself (an aborted input withdrawn in
    # one world only), every later request carries another history: a submission whose
    # answering run sent the model other user messages than in the fault-free run is excused.
    moved |= _regrouped(result, facts.state, reference)
    # A reject-mode input is refused or accepted by the timing of the run it meets; a crash
    # moves the runs, so whether it was rejected may legitimately differ from the reference.
    moved |= {
        rid
        for rid in reference.outcome.keys() | result.outcome.keys()
        if (reference.outcome.get(rid) or {}).get("status") == "rejected"
        or (result.outcome.get(rid) or {}).get("status") == "rejected"
    }
    diff = [
        rid
        for rid in reference.outcome
        if result.outcome.get(rid) != reference.outcome[rid] and rid not in moved
    ]
    if not diff and set(result.outcome) == set(reference.outcome):
        return []
    rid = diff[0] if diff else "?"
    return [
        Violation(
            "I9",
            "every interruption was recoverable, yet the outcome differs from the fault-free run",
            (f"request {rid}",),
            expected=str(reference.outcome.get(rid))[:200],
            actual=str(result.outcome.get(rid))[:200],
        )
    ]


def _run_groups(state: State) -> dict[str, frozenset[str]]:
    """Each request id -> the request ids of every input of the run that answered it."""
    rid_of = {s.id: s.request_id for s in state.submissions.values() if s.request_id}
    out: dict[str, frozenset[str]] = {}
    for run in state.runs.values():
        group = frozenset(rid_of[i] for i in run.inputs if i in rid_of)
        for rid in group:
            out[rid] = group
    return out


def _regrouped(result: RunResult, state: State, reference: RunResult) -> set[str]:
    """Request ids answered by a run whose inputs, or whose requests' user messages, differ
    from those of the fault-free run."""
    try:
        expected_state = reduce(new_state(reference.scenario.conversation_id), reference.records)
    except InvariantViolation:
        return set()
    return _differing(_run_groups(state), _run_groups(expected_state)) | _differing(
        _contexts(result, state), _contexts(reference, expected_state)
    )


def _differing(actual: dict[str, Any], expected: dict[str, Any]) -> set[str]:
    """The keys whose values differ (or that only one side has)."""
    return {key for key in actual.keys() | expected.keys() if actual.get(key) != expected.get(key)}


def _contexts(run: RunResult, state: State) -> dict[str, tuple[str, ...]]:
    """Each request id -> the user messages of the last model request of the run that
    answered it (what the model was shown)."""
    run_of_task = {task.id: task.run_id for task in state.tasks.values()}
    last: dict[str, tuple[str, ...]] = {}
    for call in run.model_calls:
        run_id = run_of_task.get(call.task_id)
        if run_id is not None:
            last[run_id] = call.user_contents
    return {
        sub.request_id: last[sub.run_id]
        for sub in state.submissions.values()
        if sub.request_id and sub.run_id in last
    }


def _aborted(run: RunResult) -> set[str]:
    """Request ids settled as aborted (abandoned) by a client abort (abandon) the client really
    sent. None of a kind when the log holds more such commits than the client sent (a runtime
    that aborts on its own, or re-applies an abort after recovery, gets no excuse)."""
    out: set[str] = set()
    for kind, reason in (("abort", "aborted"), ("abandon", "abandoned")):
        sent = sum(
            1
            for n, action in enumerate(run.scenario.actions)
            if action.kind == kind and ACTION_STEP_BASE + n in run.client.actions_done
        )
        if not sent:
            continue
        if len(_stop_commits(run, reason)) > sent:
            continue
        out |= {rid for rid, outcome in run.outcome.items() if outcome["reason"] == reason}
    return out


def _stop_commits(run: RunResult, reason: str) -> set[str]:
    """The commits in which the runtime acted on an abort (``aborted``) or an abandonment
    (``abandoned``): each settles inputs with that reason or starts a compensation -- except the
    commit that ends a compensation, which belongs to the abandonment that started it."""
    started = {
        r.batch: r.event.task_id
        for r in run.records
        if isinstance(r.event, TaskCreated) and r.event.kind == "compensation"
    }
    compensations = set(started.values())
    ending = {
        r.batch
        for r in run.records
        if isinstance(r.event, TaskSettled) and r.event.task_id in compensations
    }
    settling = {
        r.batch
        for r in run.records
        if isinstance(r.event, InputSettled) and r.event.reason == reason
    }
    if reason == "abandoned":
        settling |= set(started)
    return settling - ending


# -- I11 model calls ---------------------------------------------------------------------------


def check_model_calls(result: RunResult, reference: RunResult) -> list[Violation]:
    """I11: calls bounded by the fault-free count plus crashes that hit a pinned request; a
    retry sent exactly when due -- not before the deadline its checkpoint committed, not after
    it either (or after the recovery, if later): a resume must not reset the backoff."""
    return (
        _retries_sent_when_due(result)
        or _resends_are_the_pinned_request(result)
        or _calls_within_bound(result, reference)
    )


def _retries_sent_when_due(result: RunResult) -> list[Violation]:
    """I11's timing: a retry neither before its committed deadline nor later than due."""
    deadline: dict[tuple[str, int], float] = {}
    for record in result.records:
        event = record.event
        if isinstance(event, TaskCheckpoint) and event.phase == "retry":
            key = (event.task_id, int(event.data["attempt"]))
            deadline[key] = float(event.data["until_s"])
    for call in result.model_calls:
        until_s = deadline.get((call.task_id, call.attempt))
        if until_s is None:
            continue
        if call.time_s < until_s - 1e-9:
            return [
                Violation(
                    "I11",
                    "a retry was sent before the backoff deadline its checkpoint committed",
                    (f"{call.task_id} attempt {call.attempt} at {call.time_s:.3f}s",),
                    expected=f"not before {until_s:.3f}s",
                    actual=f"{call.time_s:.3f}s",
                )
            ]
        # ... and when it is due: at the deadline, or at once if the process that sends it
        # recovered later (a restart must not wait the whole backoff again). A paused process
        # wakes when its pause ends: not judged.
        recovered_s = result.recovered_at_s.get(call.process)
        if recovered_s is None or call.process in result.paused:
            continue
        due_s = max(until_s, recovered_s)
        if call.time_s > due_s + 1e-9:
            return [
                Violation(
                    "I11",
                    "a retry was sent later than due (its committed deadline, or its recovery)",
                    (
                        f"{call.task_id} attempt {call.attempt} at {call.time_s:.3f}s by "
                        f"{call.process}, recovered at {recovered_s:.3f}s",
                    ),
                    expected=f"at {due_s:.3f}s",
                    actual=f"{call.time_s:.3f}s",
                )
            ]
    return []


def _resends_are_the_pinned_request(result: RunResult) -> list[Violation]:
    """A re-send after a crash must be the pinned request itself: same model, options, messages."""
    sent: dict[tuple[str, int], ModelCall] = {}
    for call in result.model_calls:
        first = sent.setdefault((call.task_id, call.attempt), call)
        if call.request_digest and first.request_digest != call.request_digest:
            return [
                Violation(
                    "I11",
                    "a request re-sent after a crash differs from the pinned request it re-sends",
                    (
                        f"{call.task_id} attempt {call.attempt}: first sent at boundary "
                        f"{first.index} by {first.process}, again at boundary {call.index} by "
                        f"{call.process}",
                    ),
                    expected=f"request sha256 {first.request_digest[:16]}",
                    actual=f"request sha256 {call.request_digest[:16]}",
                )
            ]
    return []


def _calls_within_bound(result: RunResult, reference: RunResult) -> list[Violation]:
    """No more calls than the fault-free run's plus one per interruption of a pinned request."""
    # A crash or a takeover (the old worker paused past its lease) that hit a pinned request may
    # each cost one re-sent request; a paused worker's own in-flight request was already sent.
    if _steered(result) != _steered(reference):
        # A crash moved a steering input to the other side of a post-tools boundary (it arrived
        # after the boundary, or the run settled first): the runs took other turns, legitimately.
        return []
    if _compacted(result) != _compacted(reference):
        # A crash changed what the conversation holds (an interrupted tool's result is another
        # text), so its turns compacted other prefixes: other summarisation requests and
        # refusals, legitimately. I19 still bounds each compaction to one request.
        return []
    allowed = (
        len(reference.model_calls)
        + sum(1 for c in result.crashes if c.pinned_request)
        + result.handovers_with_pinned_request
    )
    actual = len(result.model_calls)
    if actual <= allowed:
        return []
    return [
        Violation(
            "I11",
            "more model calls than the fault-free run plus crashes or takeovers that hit a pinned "
            "request",
            tuple(
                f"{c.task_id} attempt {c.attempt} at boundary {c.index}"
                for c in result.model_calls[:4]
            ),
            expected=f"at most {allowed}",
            actual=str(actual),
        )
    ]


def _compacted(run: RunResult) -> list[int]:
    """The prefixes (``through``) of the compactions applied, in order."""
    return [r.event.through for r in run.records if isinstance(r.event, CompactionApplied)]


def check_suffix_loss(result: RunResult) -> list[Violation]:
    """I12 for a mode that does not promise power-loss durability (``fsync=False``: the file
    store without fsync, SQLite with ``synchronous=NORMAL``): a power loss may lose acknowledged
    commits, but only a *suffix* of them -- never one from the middle."""
    final = {r.checksum for r in result.records}
    accepted = {a.boundary for a in result.accepted}
    previous = -1  # what survived an earlier power loss is durable from then on
    for crash in result.crashes:
        if crash.point.kind != "power":
            continue
        before = [
            (index, records)
            for index, records in result.commits
            if index in accepted and previous < index < crash.point.index and records
        ]
        previous = crash.point.index
        kept = [records[0].checksum in final for _, records in before]
        if kept and kept != sorted(kept, reverse=True):
            lost = next(i for i, (idx, _) in enumerate(before) if not kept[i])
            later = next(i for i in range(lost + 1, len(kept)) if kept[i])
            return [
                Violation(
                    "I12",
                    "a power loss dropped an acknowledged commit but kept a later one",
                    (
                        f"lost: commit at boundary {before[lost][0]} "
                        f"(#{before[lost][1][0].sequence})",
                        f"kept: commit at boundary {before[later][0]}",
                    ),
                    expected="only a suffix of acknowledged commits lost",
                    actual="a commit lost from the middle",
                )
            ]
    return []


# -- I12 durability ----------------------------------------------------------------------------


def check_durability(result: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    state = facts.state
    out: list[Violation] = []
    for rid in result.client.lost_acks:
        out.append(Violation("I12", f"acknowledged submission {rid} vanished after a crash", ()))
    for rid, sid in result.client.acked.items():
        if sid not in state.submissions:
            out.append(
                Violation("I12", f"acknowledged submission {rid} ({sid}) is not durable", ())
            )
    for rid, (status, answer, _reason) in result.client.answers.items():
        if status == "rejected" and rid not in result.client.acked:
            continue  # refused as busy: nothing of it is in the log (I16)
        sid = result.client.acked.get(rid)
        sub = state.submissions.get(sid) if sid else None
        if sub is None or sub.status != status or sub.answer != answer:
            out.append(
                Violation(
                    "I12",
                    f"the answer returned for {rid} is not what the log holds",
                    (),
                    expected=f"{status}: {answer}",
                    actual=f"{sub.status}: {sub.answer}" if sub else "missing",
                )
            )
    return out


# -- I13 damaged storage ----------------------------------------------------------------------


def check_refusal(result: RunResult) -> list[Violation]:
    """I13, when a process stopped on corrupt storage: only after a storage fault that damaged
    something, naming a damaged file, and leaving everything it found as it found it (the
    evidence an operator needs). When the runtime goes on instead, every other oracle applies
    as usual: it recovered everything acknowledged, or they say what it lost or acted on."""
    assert result.refusal is not None
    if not result.damage:
        return [
            Violation(
                "I13",
                "the runtime reported corrupt storage, but nothing was damaged",
                (result.refusal[:300],),
            )
        ]
    out: list[Violation] = []
    names = [path.rsplit("/", 1)[-1] for path in result.damage]
    if not any(name in result.refusal for name in names):
        out.append(
            Violation(
                "I13",
                "the corruption error does not name what is damaged",
                (result.refusal[:300], *(f"{p}: {d}" for p, d in result.damage.items())),
                expected=f"an error naming {', '.join(names)}",
                actual=result.refusal[:120],
            )
        )
    if result.evidence_changes:
        out.append(
            Violation(
                "I13",
                "a recovery that stopped on corrupt storage destroyed what it found",
                (*result.evidence_changes, *(f"{p}: {d}" for p, d in result.damage.items())),
            )
        )
    return out


# -- I14-I16 inbox modes -------------------------------------------------------------------------


def check_inbox(result: RunResult) -> list[Violation]:
    """I14-I16 on the final log and the client's record of rejections (they need no reducible
    log: each reads the raw events)."""
    return check_steering_boundary(result) + check_queue_order(result) + check_rejections(result)


def _steered(run: RunResult) -> set[str]:
    """The request ids (or submission ids, for inputs without one) of the inputs placed into a
    running run at a post-tools boundary."""
    names: dict[str, str] = {}
    out: set[str] = set()
    for record in run.records:
        event = record.event
        if isinstance(event, InputAccepted):
            names[event.submission_id] = event.request_id or event.submission_id
        elif isinstance(event, InputsSteered):
            out.update(names.get(sid, sid) for sid in event.inputs)
    return out


@dataclass
class _Turns:
    """What I14 tracks while walking the log: each task's kind, run and phase, the tool calls
    proposed and not yet answered per run, and the tasks settled in the current commit."""

    kind: dict[str, str] = field(default_factory=dict)
    run: dict[str, str] = field(default_factory=dict)
    phase: dict[str, str] = field(default_factory=dict)
    open_calls: dict[str, set[str]] = field(default_factory=dict)
    settled_in_batch: set[str] = field(default_factory=set)
    steering: set[str] = field(default_factory=set)  # accepted steering inputs not yet placed

    def post_tools(self) -> bool:
        """Whether the current commit settled a generation turn that waited on tools."""
        return any(
            self.kind.get(t) == "generation" and self.phase.get(t) == "tools"
            for t in self.settled_in_batch
        )

    def see(self, event: Any) -> None:
        if isinstance(event, InputAccepted) and event.mode == "steer":
            self.steering.add(event.submission_id)
        elif isinstance(event, RunStarted | InputsSteered):
            self.steering.difference_update(event.inputs)
        elif isinstance(event, InputSettled):
            self.steering.discard(event.submission_id)
        elif isinstance(event, TaskCreated):
            self.kind[event.task_id] = event.kind
            self.run[event.task_id] = event.run_id
            self.phase[event.task_id] = event.phase
        elif isinstance(event, TaskCheckpoint):
            self.phase[event.task_id] = event.phase
        elif isinstance(event, ModelCompleted):
            calls = self.open_calls.setdefault(self.run.get(event.task_id, ""), set())
            calls.update(c.call_id for c in event.tool_calls)
        elif isinstance(event, ToolResult):
            self.open_calls.get(self.run.get(event.task_id, ""), set()).discard(event.call_id)
        elif isinstance(event, TaskSettled) and event.outcome == "completed":
            self.settled_in_batch.add(event.task_id)  # a turn that ended, not one aborted


def check_steering_boundary(result: RunResult) -> list[Violation]:
    """I14: a steered input lands at the next post-tools boundary and only there -- in the commit
    that settles a generation task that waited on its turn's tools (after that settlement),
    with every tool call of the run answered, and right before the next turn is created (so
    before the next model request); never between a tool call and its result, and never left
    queued by a post-tools boundary that came after it was accepted."""
    turns = _Turns()
    records = result.records
    batch = None
    for n, record in enumerate(records):
        event = record.event
        if record.batch != batch:
            batch, turns.settled_in_batch = record.batch, set()
            waiting = set(turns.steering)  # queued before this commit
        if isinstance(event, InputsSteered):
            why = _misplaced_steering(turns, event, records[n + 1 :], record.batch)
            if why:
                return [
                    Violation(
                        "I14",
                        f"steered input(s) {', '.join(event.inputs)} placed {why}",
                        tuple(_row(r) for r in records if r.batch == record.batch)[:6],
                        expected="placed in the commit settling a turn that waited on tools",
                        actual=why,
                    )
                ]
        turns.see(event)
        skipped = sorted(waiting & turns.steering)
        if record.last_in_batch and turns.post_tools() and skipped:
            return [
                Violation(
                    "I14",
                    f"steering input {skipped[0]} was queued at a post-tools boundary of its "
                    "run, and the boundary did not place it",
                    tuple(_row(r) for r in records if r.batch == record.batch)[:6],
                    expected=f"{skipped[0]} placed in this commit",
                    actual="still queued after it",
                )
            ]
    return []


def _misplaced_steering(
    turns: _Turns, event: InputsSteered, after: list[EventRecord], batch: str
) -> str:
    """Why a steering placement is not at a post-tools boundary ("" if it is)."""
    task = event.task_id
    if task not in turns.settled_in_batch:
        return f"in a commit that does not settle the turn {task}"
    if turns.kind.get(task) != "generation" or turns.phase.get(task) != "tools":
        return f"after {task}, which was not a generation turn waiting on tools"
    unanswered = sorted(turns.open_calls.get(event.run_id, set()))
    if unanswered:
        return f"between tool call {unanswered[0]} and its result"
    rest = [r.event for r in after if r.batch == batch and not isinstance(r.event, InputsSteered)]
    if not rest or not (isinstance(rest[0], TaskCreated) and rest[0].kind == "generation"):
        return "without the next turn created right after it"
    return ""


def check_queue_order(result: RunResult) -> list[Violation]:
    """I15: inputs of one inbox mode are placed (a run's start, a steering placement) in the
    order they were accepted, whatever crashes came between."""
    accepted: dict[str, tuple[int, str]] = {}
    last: dict[str, tuple[int, str]] = {}
    for record in result.records:
        event = record.event
        if isinstance(event, InputAccepted):
            accepted[event.submission_id] = (record.sequence, event.mode)
            continue
        if isinstance(event, RunStarted | InputsSteered):
            for sid in event.inputs:
                if sid not in accepted:
                    continue  # I2 reports an input placed without being accepted
                seq, mode = accepted[sid]
                prior = last.get(mode)
                if prior is not None and prior[0] > seq:
                    return [
                        Violation(
                            "I15",
                            f"{mode} inputs placed out of acceptance order",
                            (f"{prior[1]} accepted at #{prior[0]}, placed first", _row(record)),
                            expected=f"{sid} (accepted #{seq}) placed before {prior[1]}",
                            actual=f"{prior[1]} (accepted #{prior[0]}) placed before {sid}",
                        )
                    ]
                last[mode] = (seq, sid)
    return []


def check_rejections(result: RunResult) -> list[Violation]:
    """I16: a rejected submission (``ConversationBusy``) wrote nothing: no commit the final log
    holds that began before the rejection mentions its request id."""
    for rid, rejected_at in sorted(result.client.rejected.items()):
        for index, records in durable_commits(result):
            for record in records:
                event = record.event
                if (
                    isinstance(event, InputAccepted)
                    and event.request_id == rid
                    and index < rejected_at
                ):
                    return [
                        Violation(
                            "I16",
                            f"request {rid} was rejected as busy, yet it had been written",
                            (_row(record), f"rejected at boundary {rejected_at}"),
                            expected="no event of a rejected request",
                            actual=f"committed at boundary {index}",
                        )
                    ]
    return []


# -- I17 compensation --------------------------------------------------------------------------


@dataclass
class _Abandoned:
    """What I17 reads of one run from the final log: the boundaries of the commits that
    started and stopped it, and its compensable calls (call id -> the file path it edits)."""

    started_at: int = -1
    stopped_at: int | None = None
    abandoned: bool = False
    calls: dict[str, str] = field(default_factory=dict)


def _abandoned_runs(result: RunResult) -> dict[str, _Abandoned]:
    """The runs of the final log that stopped ``abandoned``, with their compensable calls."""
    runs: dict[str, _Abandoned] = {}
    run_of_task: dict[str, str] = {}
    for index, records in durable_commits(result):
        for record in records:
            event = record.event
            if isinstance(event, RunStarted):
                runs[event.run_id] = _Abandoned(started_at=index)
            elif isinstance(event, TaskCreated):
                run_of_task[event.task_id] = event.run_id
            elif isinstance(event, ToolIntent) and event.compensable:
                run = runs.get(run_of_task.get(event.task_id, ""))
                if run is not None:
                    run.calls[event.call_id] = str(event.arguments.get("path", ""))
            elif isinstance(event, RunStopped) and event.run_id in runs:
                runs[event.run_id].stopped_at = index
                runs[event.run_id].abandoned = event.reason == "abandoned"
    return {run_id: run for run_id, run in runs.items() if run.abandoned}


def _workspace_at(result: RunResult, boundary: int) -> dict[str, str]:
    """The workspace as it was at ``boundary`` (after every workspace effect before it)."""
    files: dict[str, str] = {}
    for index, snapshot in result.workspace_history:
        if index < boundary:
            files = snapshot
    return files


def check_compensation(result: RunResult) -> list[Violation]:
    """I17: once an abandoned run has stopped (its compensations settled), every compensable call
    of it whose effect landed (the ledger) was undone exactly once, after its effect, the
    compensations in the reverse order of the effects, each file those calls edited is what it
    was when the run started (the services' workspace history, not the runtime's pre-image), and
    each charge of theirs is refunded in full.
    A compensation of a call whose effect never landed (an interrupted call) may run, once."""
    for run_id, run in sorted(_abandoned_runs(result).items()):
        assert run.stopped_at is not None
        effects = [e for e in result.ledger if e.applied]
        originals = [e for e in effects if e.call_id in run.calls]
        undo_ids = {compensation_call_id(c): c for c in run.calls}
        undos = [e for e in effects if e.call_id in undo_ids]
        counts = Counter(undo_ids[e.call_id] for e in undos)
        twice = sorted(c for c, n in counts.items() if n > 1)
        missing = sorted({e.call_id for e in originals} - set(counts))
        if twice or missing:
            call = (twice or missing)[0]
            return [
                Violation(
                    "I17",
                    f"run {run_id} was abandoned; the compensation of {call} was applied "
                    f"{counts.get(call, 0)} times",
                    tuple(str(e) for e in originals + undos if call in e.call_id)[:4],
                    expected="every landed compensable call undone exactly once",
                    actual=f"{counts.get(call, 0)} applied compensation(s) of {call}",
                )
            ]
        landed = [e.call_id for e in originals]
        undone = [undo_ids[e.call_id] for e in undos if undo_ids[e.call_id] in landed]
        if undone != landed[::-1]:
            return [
                Violation(
                    "I17",
                    f"run {run_id}: compensations applied out of reverse order",
                    tuple(str(e) for e in undos)[:4],
                    expected=f"undone in the order {', '.join(landed[::-1])}",
                    actual=f"undone in the order {', '.join(undone)}",
                )
            ]
        violation = _workspace_restored(result, run_id, run) or _charges_refunded(
            result, run_id, originals
        )
        if violation is not None:
            return [violation]
    return []


def _charges_refunded(result: RunResult, run_id: str, originals: list[Any]) -> Violation | None:
    """I17 for the payments service: every charge of the run that landed is refunded in full."""
    for effect in originals:
        if (effect.service, effect.op) != ("payments", "charge"):
            continue
        charged, refunded = result.charges.get(effect.key), result.refunds.get(effect.key)
        if refunded != charged:
            return Violation(
                "I17",
                f"run {run_id} was abandoned and compensated, yet charge {effect.key} stands",
                (str(effect),),
                expected=f"refunded {charged}",
                actual=f"refunded {refunded}",
            )
    return None


def _workspace_restored(result: RunResult, run_id: str, run: _Abandoned) -> Violation | None:
    """I17's last part: the files the run's compensable calls edited are, when it stopped, what
    they were when it started."""
    assert run.stopped_at is not None
    before = _workspace_at(result, run.started_at)
    after = _workspace_at(result, run.stopped_at)
    for path in sorted(set(run.calls.values()) - {""}):
        if before.get(path) != after.get(path):
            return Violation(
                "I17",
                f"run {run_id} was abandoned and compensated, yet {path} was not restored",
                (f"{path} when the run started: {before.get(path)!r}"[:200],),
                expected=repr(before.get(path))[:200],
                actual=repr(after.get(path))[:200],
            )
    return None


# -- I19 compaction -------------------------------------------------------------------------------


@dataclass
class _Compactions:
    """What I19 tracks while walking the log: each intent (its record's epoch and event), the
    compactions applied or settled, and the summary message each pinned request must start
    with ("" for a request with no summary)."""

    started: dict[str, tuple[int, CompactionStarted]] = field(default_factory=dict)
    ended: dict[str, str] = field(default_factory=dict)  # compaction id -> applied/outcome
    summaries: dict[str, str] = field(default_factory=dict)  # applied id -> its head digest
    heads: dict[tuple[str, int], str] = field(default_factory=dict)  # (task, attempt) -> head


class CompactionWatcher:
    """I19's walk, on ``reduce_log``'s pass (``Watcher``): judges each application on the
    state before it and, up to the first unfit one, records what later requests must see."""

    def __init__(self) -> None:
        self.seen = _Compactions()
        self.unfit: Violation | None = None  # the first unfit application, if any

    def before(self, state: State, record: EventRecord) -> None:
        event = record.event
        if self.unfit is None and isinstance(event, CompactionApplied):
            why = _unfit_summary(self.seen, state, record, event)
            if why:
                self.unfit = _i19(f"compaction {event.compaction_id} applied {why}", record)

    def after(self, state: State, record: EventRecord) -> None:
        if self.unfit is None:
            _see_compaction(self.seen, record)


def check_compaction(
    result: RunResult, watcher: CompactionWatcher | None = None
) -> list[Violation]:
    """I19: compaction applies fresh summaries only, at boundaries. Every applied summary covers
    exactly the prefix its intent named, unchanged since the intent, and was applied by the
    incarnation that wrote the intent (a crash or takeover in between makes it stale); only at
    a turn boundary (every other live task of its run a turn waiting in ``prepare``, nothing
    pinned, no call unanswered); a settled one is never applied; and every later request starts
    with the summary of the compaction applied when it was pinned, followed by the suffix.
    ``watcher`` is the one given to the run's ``reduce_log``; without it, a pass of its own."""
    if watcher is None:
        watcher = CompactionWatcher()
        reduce_log(result, watchers=[watcher])  # a log that does not reduce: I2 reports it
    if watcher.unfit is not None:
        return [watcher.unfit]
    seen = watcher.seen
    return _one_request_per_intent(result, seen) or _requests_see_their_window(result, seen)


def _i19(explanation: str, record: EventRecord) -> Violation:
    return Violation(
        "I19",
        explanation,
        (_row(record),),
        expected="a fresh summary of its intent's prefix, applied at a turn boundary",
        actual=explanation,
    )


def _see_compaction(seen: _Compactions, record: EventRecord) -> None:
    event = record.event
    if isinstance(event, CompactionStarted):
        seen.started[event.compaction_id] = (record.epoch, event)
        seen.heads[(event.task_id, 1)] = _head(seen, event.window)
    elif isinstance(event, CompactionApplied):
        seen.ended[event.compaction_id] = "applied"
        head = summary_message(event.summary)
        seen.summaries[event.compaction_id] = sha256_hex(canonical_json(head))
    elif isinstance(event, CompactionSettled):
        seen.ended.setdefault(event.compaction_id, event.outcome)
    elif isinstance(event, ModelRequested):
        seen.heads[(event.task_id, event.attempt)] = _head(seen, event.window)


def _head(seen: _Compactions, window: str) -> str:
    return seen.summaries.get(window, "?") if window else ""


def _unfit_summary(
    seen: _Compactions, state: State, record: EventRecord, event: CompactionApplied
) -> str:
    """Why this application breaks I19 ("" if it does not), judged on the state before it."""
    intent = seen.started.get(event.compaction_id)
    if intent is None:
        return "without an intent"
    epoch, started = intent
    if event.compaction_id in seen.ended:
        return f"after it was already {seen.ended[event.compaction_id]}"
    if record.epoch != epoch:
        return f"in epoch {record.epoch}, its intent in epoch {epoch}: the summary is stale"
    if (event.through, event.prefix_digest) != (started.through, started.prefix_digest):
        return f"to messages ..{event.through}, its intent named ..{started.through}"
    if context_digest(state.context(started.through, started.window)) != started.prefix_digest:
        return f"after the prefix ..{started.through} changed since its intent"
    for task in state.tasks.values():
        if task.run_id != started.run_id or task.status == "terminal":
            continue
        if task.id == started.task_id:
            continue
        if task.kind != "generation" or task.phase != "prepare" or task.id in state.pinned:
            return f"while {task.id} ({task.kind}/{task.phase}) is live: not at a turn boundary"
    open_calls = [i.call_id for i in state.unresolved_intents()]
    if open_calls:
        return f"between tool call {open_calls[0]} and its result"
    return ""


def _one_request_per_intent(result: RunResult, seen: _Compactions) -> list[Violation]:
    """A compaction's summarisation request is sent once: its intent is settled stale, never
    re-sent, by a process that did not send it."""
    tasks = {started.task_id for _, started in seen.started.values()}
    sent = Counter(call.task_id for call in result.model_calls if call.task_id in tasks)
    for task_id, count in sorted(sent.items()):
        if count > 1:
            return [
                Violation(
                    "I19",
                    f"compaction task {task_id} sent its summarisation request {count} times",
                    tuple(
                        f"model call at boundary {c.index} by {c.process}"
                        for c in result.model_calls
                        if c.task_id == task_id
                    )[:4],
                    expected="one request per compaction intent",
                    actual=f"{count} requests",
                )
            ]
    return []


def _requests_see_their_window(result: RunResult, seen: _Compactions) -> list[Violation]:
    """Every model request starts with the summary its pin captured (none: no summary)."""
    for call in result.model_calls:
        expected = seen.heads.get((call.task_id, call.attempt))
        if expected is None or not call.request_digest:
            continue  # a request the log never pinned (I11 judges it), or an unrecorded host
        if call.head_digest != expected:
            return [
                Violation(
                    "I19",
                    f"request {call.task_id} attempt {call.attempt} does not start with the "
                    "summary its pinned window names",
                    (f"model call at boundary {call.index} by {call.process}",),
                    expected=f"head {expected[:16] or '(no summary)'}",
                    actual=f"head {call.head_digest[:16] or '(no summary)'}",
                )
            ]
    return []


# -- I18 agent state ------------------------------------------------------------------------------


def check_agent_log(result: RunResult) -> list[Violation]:
    """I18 on the raw log: the mutation revision rises by exactly one per recorded file change
    (so one call's change, recorded once, bumps it once, whatever crashes came between); a
    validation carries the revision of the moment its call was committed (what it can have
    seen), never a later one; a run stops as ``completed`` only if every required criterion's
    latest validation at the then-current revision passed."""
    revision = 0
    seen_at: dict[str, int] = {}  # validation call -> revision at its intent
    latest: dict[tuple[str, int], bool] = {}  # (criterion, revision) -> last verdict
    required = result.scenario.required_criteria
    for record in result.records:
        event = record.event
        if isinstance(event, FileChanged):
            if event.revision != revision + 1:
                return [
                    Violation(
                        "I18",
                        f"call {event.call_id} moved the mutation revision from {revision} to "
                        f"{event.revision}: one applied edit is one revision",
                        (_row(record),),
                        expected=f"revision {revision + 1}",
                        actual=f"revision {event.revision}",
                    )
                ]
            revision = event.revision
        elif isinstance(event, ToolIntent) and event.validates is not None:
            seen_at[event.call_id] = revision
        elif isinstance(event, ValidationRecorded):
            if event.revision != seen_at.get(event.call_id):
                return [
                    Violation(
                        "I18",
                        f"validation {event.call_id} is recorded at revision {event.revision}, "
                        f"but its call was committed at revision {seen_at.get(event.call_id)}",
                        (_row(record),),
                    )
                ]
            latest[(event.criterion, event.revision)] = event.passed
        elif isinstance(event, RunStopped) and event.reason == "completed":
            unmet = [c for c in required if not latest.get((c, revision), False)]
            if unmet:
                return [
                    Violation(
                        "I18",
                        f"run {event.run_id} completed without a passing validation of "
                        f"{unmet[0]!r} at revision {revision}",
                        (_row(record),),
                        expected=f"{unmet[0]!r} passed at revision {revision}",
                        actual="no such validation",
                    )
                ]
    return []


def check_agent_effects(result: RunResult, facts: Facts) -> list[Violation]:
    """I18 against the world (only where the store promised the log survives): a recorded file
    change is an edit the workspace applied, an edit that succeeded is recorded, the final
    workspace holds the hash recorded for the last edit of each path (unless a write the log
    does not record as a change came after it), and every provider cursor a request carried
    was declared resumable by the model."""
    state = facts.state
    assert state is not None
    applied = Counter(e.call_id for e in result.ledger if e.applied and e.op == "replace")
    recorded = {c.call_id for c in state.file_changes}
    for change in state.file_changes:
        if change.after_hash is not None and applied[change.call_id] != 1:
            return [
                Violation(
                    "I18",
                    f"call {change.call_id} is recorded as changing {change.path}, and the "
                    f"workspace applied it {applied[change.call_id]} times",
                    (f"file change at #{change.sequence}, revision {change.revision}",),
                )
            ]
    for call_id, intent in state.intents.items():
        outcome = state.tool_results.get(call_id)
        done = outcome is not None and not outcome.is_error and outcome.source != "operator"
        if intent.edit is not None and done and call_id not in recorded:
            return [
                Violation(
                    "I18",
                    f"edit {call_id} succeeded but no file change (no revision) was recorded",
                    (f"intent at #{intent.sequence}",),
                )
            ]
    return _final_hashes(result, facts) + _cursors_resumable(result)


def _final_hashes(result: RunResult, facts: Facts) -> list[Violation]:
    """I18: each changed path holds its last recorded after-hash, when the last applied write
    to the path is that change's call."""
    state = facts.state
    assert state is not None
    last_writer: dict[str, str] = {}
    for effect in result.ledger:
        intent = state.intents.get(effect.call_id)
        writes = effect.service == "workspace" and effect.op in ("replace", "append_line")
        if effect.applied and writes and intent is not None:
            last_writer[str(intent.arguments.get("path", ""))] = effect.call_id
    for path, change in sorted(state.changed_files.items()):
        if change.after_hash is None or last_writer.get(path) != change.call_id:
            continue
        actual = content_hash(result.files.get(path))
        if actual != change.after_hash:
            return [
                Violation(
                    "I18",
                    f"{path} does not hold the content recorded by its last edit {change.call_id}",
                    (f"file change at #{change.sequence}, revision {change.revision}",),
                    expected=change.after_hash[:16],
                    actual=actual[:16],
                )
            ]
    return []


def _cursors_resumable(result: RunResult) -> list[Violation]:
    """I18: a request carries a provider cursor only if a response in the log returned it as
    resumable."""
    resumable = {
        r.event.cursor
        for r in result.records
        if isinstance(r.event, ModelCompleted) and r.event.cursor and r.event.resumable
    }
    for call in result.model_calls:
        if call.cursor and call.cursor not in resumable:
            return [
                Violation(
                    "I18",
                    f"a request of {call.task_id} continued from cursor {call.cursor}, which the "
                    "model did not declare resumable",
                    (f"model call at boundary {call.index} by {call.process}",),
                    expected="the full request, without the cursor",
                    actual=f"cursor {call.cursor}",
                )
            ]
    return []


# -- I20 sub-agents ---------------------------------------------------------------------------


def delegating_tools(result: RunResult) -> set[str]:
    """The scenario's sub-agent tools (``agent.delegate``) by name."""
    return {t.name for t in result.scenario.tools if t.operation == DELEGATE}


def child_states(result: RunResult) -> dict[str, State | None]:
    """``reduce`` of each child conversation's final log (None: it does not reduce)."""
    out: dict[str, State | None] = {}
    for child, records in sorted(result.child_records.items()):
        try:
            out[child] = reduce(new_state(child), records)
        except InvariantViolation:
            out[child] = None
    return out


def _i20(explanation: str, witness: tuple[str, ...], expected: str, actual: str) -> Violation:
    return Violation("I20", explanation, witness, expected=expected, actual=actual)


def check_subagents(result: RunResult, state: State) -> list[Violation]:
    """I20: one child per delegating call. Every child conversation in the store is the child of
    a delegating call of the conversation, under the id derived from that call (written out here,
    not taken from the runtime: README, "Sub-agents"); its log reduces and accepted exactly one
    input, under the request id derived from the call; and a delegating call recorded as
    executed has the child's answer as its result."""
    conversation = result.scenario.conversation_id
    delegating = delegating_tools(result)
    owners = {
        f"{conversation}.sub.{i.call_id}": i for i in state.intents.values() if i.tool in delegating
    }
    children = child_states(result)
    for child, child_state in children.items():
        intent = owners.get(child)
        if intent is None:
            derived = ", ".join(sorted(owners)) or "none"
            return [_i20(f"child conversation {child} has no delegating call", (), derived, child)]
        if child_state is None:
            return [_i20(f"child conversation {child}'s log does not reduce", (), "a log", "")]
        accepted = [r for r in result.child_records[child] if isinstance(r.event, InputAccepted)]
        rids = [str(r.event.request_id) for r in accepted if isinstance(r.event, InputAccepted)]
        if rids != [f"{intent.call_id}:sub"]:
            return [
                _i20(
                    f"call {intent.call_id}'s child {child} accepted {len(rids)} input(s)",
                    tuple(_row(r) for r in accepted[:3]),
                    f"one input, request {intent.call_id}:sub",
                    ", ".join(rids) or "none",
                )
            ]
    return _results_are_answers(state, owners, children)


def _results_are_answers(
    state: State, owners: dict[str, Intent], children: dict[str, State | None]
) -> list[Violation]:
    """A delegating call executed without error returns its child's answer, word for word."""
    for child, intent in sorted(owners.items()):
        result = state.tool_results.get(intent.call_id)
        if result is None or result.is_error or result.source != "executed":
            continue
        child_state = children.get(child)
        answers = [s.answer for s in child_state.submissions.values()] if child_state else []
        if answers != [result.output]:
            return [
                _i20(
                    f"call {intent.call_id}'s result is not its child's answer",
                    (f"child {child}",),
                    f"{answers[0] if answers else '(no child)'}"[:200],
                    result.output[:200],
                )
            ]
    return []
