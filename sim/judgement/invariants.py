"""The invariant registry: every invariant the oracles judge, one record each, in one place.

A record says what must hold (``verifies``), what it leaves to the other invariants (``leaves``,
so two oracles never judge one thing twice and no gap hides between them), which verdict a
violation of it is, where it applies (the reference runtime, a foreign target, or both) and
which functions implement it. Reports take titles from here, ``Violation`` its verdict, the
target judge its order, and the two documents' tables (docs/architecture.md 2.6, the README's
"The invariants") are rendered from here and checked against it (tests/project/test_docs.py).

The records live here, not in the oracle families that implement them: ``Violation`` checks its
code and reads its verdict here, and the families build violations, so a registry that collected
records from the families would close an import cycle (tests/project/test_layers.py). This
module imports nothing of ``sim``, so reports and the target judge read it without the oracles.

Order: I0..I23, then the findings only a foreign target has (H1, P1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

InvariantVerdict = Literal["safety", "liveness", "nondeterminism"]
"""The verdict an invariant's violation gives (``sim.judgement.violation.Verdict`` holds every
verdict of a schedule: these, ``error``, the harness's own, and ``pass``)."""

Scope = Literal["runtime", "target", "both"]
"""Where an invariant is judged: the reference runtime (``sim.judgement.oracles``), a foreign
runtime (``sim.targets.judge``), or both."""

_ORACLES = "sim.judgement.oracles"
_TARGETS = "sim.targets.judge"


@dataclass(frozen=True, kw_only=True)
class Invariant:
    code: str  # "I1"
    title: str  # the short name reports show after the code
    verdict: InvariantVerdict
    scope: Scope
    verifies: str  # what must hold after every schedule
    leaves: str  # what it leaves to other invariants (TigerBeetle's "what it does not check")
    implemented_by: tuple[str, ...]  # dotted paths of the functions that judge it
    explains: str = ""  # a finding listed right after the invariant whose violation it explains
    # Judged on how a run ends (I7: it settled): a run stopped early (``--prune rejoin``,
    # ``sim.explore.pruning``) cannot be judged by it, and the fault-free run it rejoined stands
    # for it. False: a violation on a run's prefix is one on the whole run, so a stopped run's
    # window is judged by it (an oracle's part that needs a settled world -- I5's every
    # submission answered, I6's every intent -- skips an unsettled run itself).
    judged_at_end: bool = False


class UnknownInvariant(KeyError):
    """A code no record has: a typo in an oracle, or a document from another version."""

    def __str__(self) -> str:
        return f"unknown invariant {self.args[0]!r}; registered: {', '.join(_BY_CODE)}"


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        code="I0",
        title="runtime integrity",
        verdict="safety",
        scope="both",
        verifies=(
            "the runtime never raises instead of recovering: on its own data, its internal "
            "assertions hold"
        ),
        leaves="what made it raise: I0 is listed last, after the violation that usually caused it",
        implemented_by=(f"{_ORACLES}.check", f"{_TARGETS}.judge_point"),
    ),
    Invariant(
        code="I1",
        title="effects match policy",
        verdict="safety",
        scope="both",
        verifies=(
            "per call, the ledger's applied effects match the tool's policy: exactly once "
            "(`idempotent`, `verify_then_continue`), at most once (`unsafe`, `manual`), at least "
            "once (`replay_safe`); a sub-agent's calls obey their own policies"
        ),
        leaves=(
            "an effect before its intent was durable (I6), after its run stopped (I4) or under a "
            "stale fencing token (I8); a delegating call's own outcome (I20); a crash the store "
            "mode does not promise to survive, which may legitimately redo calls (I12)"
        ),
        implemented_by=(f"{_ORACLES}.effects.check_effects", f"{_TARGETS}.check_effects"),
    ),
    Invariant(
        code="I2",
        title="log intact",
        verdict="safety",
        scope="runtime",
        verifies=(
            "the log is intact: sequences contiguous from 1, every record verifies, whole batches "
            "only (no partial commit visible), and it reduces"
        ),
        leaves=(
            "whether what the log says is right (the other invariants judge its content); a "
            "process that stopped on damaged storage (I13)"
        ),
        implemented_by=(f"{_ORACLES}.log.check_log",),
    ),
    Invariant(
        code="I3",
        title="checkpoints consistent",
        verdict="safety",
        scope="runtime",
        verifies=(
            "every valid checkpoint is `reduce` of the log prefix it claims; every recovery "
            "rebuilds exactly `reduce` of the log its store returned"
        ),
        leaves=(
            "a log that does not reduce (I2); a checkpoint that fails its checksum or claims more "
            "than the log holds is not compared (a recovery that used one rebuilds a wrong state, "
            "which I3 sees)"
        ),
        implemented_by=(f"{_ORACLES}.checkpoints.check_checkpoints",),
    ),
    Invariant(
        code="I4",
        title="crash-only resume",
        verdict="safety",
        scope="runtime",
        verifies=(
            "only a crash resumes: nothing of a stopped run happens after it stopped (no event of "
            "its tasks, no effect, no model call), and every request of a run contains the inputs "
            "the run had placed"
        ),
        leaves=(
            "a zombie's call in flight before a newer epoch stopped the run (only a fencing "
            "service can refuse it: I8); what a summarisation request contains (I19)"
        ),
        implemented_by=(
            f"{_ORACLES}.resume.check_stopped_runs_stay_stopped",
            f"{_ORACLES}.resume.check_resume",
        ),
    ),
    Invariant(
        code="I5",
        title="inputs settled, no duplicates",
        verdict="safety",
        scope="both",
        verifies=(
            "every submission ends `done` or `unanswered`; a request id is accepted once and a "
            "re-sent one maps to its first submission; no user entry appears more often than it "
            "was sent"
        ),
        leaves=(
            "a re-send remapped after a power loss the store mode does not promise to survive "
            "(I12's suffix check); whether a rejected input wrote anything (I16)"
        ),
        implemented_by=(f"{_ORACLES}.inputs.check_inputs", f"{_TARGETS}.check_input"),
    ),
    Invariant(
        code="I6",
        title="one result per intent, no effect without intent",
        verdict="safety",
        scope="both",
        verifies=(
            "one recorded result per intent, every intent of a settled world answered (or waiting "
            "for reconciliation), no effect before its intent was durable -- the conversation's "
            "calls, their compensations and its sub-agents' calls alike"
        ),
        leaves="how many effects a call may have (I1)",
        implemented_by=(f"{_ORACLES}.effects.check_results", f"{_TARGETS}.check_history"),
    ),
    Invariant(
        code="I7",
        title="liveness",
        verdict="liveness",
        scope="both",
        verifies=(
            "everything settles within the scenario's liveness bound of virtual time after the "
            "last fault"
        ),
        leaves="a runtime that raised (I0); whether what settled is right (every other invariant)",
        implemented_by=(f"{_ORACLES}.liveness.check_liveness", f"{_TARGETS}.check_liveness"),
        judged_at_end=True,
    ),
    Invariant(
        code="I8",
        title="fencing",
        verdict="safety",
        scope="runtime",
        verifies=(
            "epochs strictly increase and every record carries the lease acquired before it; every "
            "append a store accepted carried the current lease; a lease is never granted while "
            "another owner's is live, nor an epoch skipped; a renewal only extends the lease its "
            "caller holds; a fenced service never applies a stale token; no work after a lease "
            "release"
        ),
        leaves=(
            "what an unfenced service does with a zombie's call already on its way (I4 excuses it, "
            "I1 counts its effects)"
        ),
        implemented_by=(
            f"{_ORACLES}.fencing.check_fencing",
            f"{_ORACLES}.fencing.stale_appends",
            f"{_ORACLES}.fencing.out_of_fence_effects",
        ),
    ),
    Invariant(
        code="I9",
        title="transparency",
        verdict="safety",
        scope="runtime",
        verifies=(
            "when every interruption was recoverable, the outcome equals the fault-free run's, "
            "except for the submissions a crash legitimately moved: settled by a timed client "
            "abort or abandon in one run only, answered by a run with other inputs or context, or "
            "rejected as busy in one run only"
        ),
        leaves=(
            "interruptions of `unsafe` or `manual` calls and reconciliations (their outcome may "
            "differ: I1 bounds their effects); crashes the store mode does not promise to survive "
            "(I12)"
        ),
        implemented_by=(f"{_ORACLES}.transparency.check_transparency",),
    ),
    Invariant(
        code="I10",
        title="determinism",
        verdict="nondeterminism",
        scope="runtime",
        verifies=(
            "the same scenario, seed and schedule give the same fingerprint (by default re-run on "
            "a seeded 1 in 16 of the crash points plus every failing one, as FoundationDB samples; "
            "`--determinism full` for all)"
        ),
        leaves="what the run did (every other invariant judges one run)",
        implemented_by=(
            f"{_ORACLES}.determinism.check_determinism",
            f"{_ORACLES}.determinism.compare_fingerprints",
        ),
    ),
    Invariant(
        code="I11",
        title="model calls bounded",
        verdict="safety",
        scope="runtime",
        verifies=(
            "at most the fault-free run's model calls plus one per crash or takeover that hit a "
            "pinned request, and per request a crash let a run pin before the client's abort "
            "stopped it (not counted when a crash moved a steering input or changed which "
            "prefixes were compacted: the runs then took other turns); a re-sent request is byte "
            "for byte the pinned one (model, options, messages); a retry is sent when due, neither "
            "before its committed deadline nor later than it (or than the recovery, if later)"
        ),
        leaves=(
            "one summarisation request per compaction (I19); a crash the store mode does not "
            "promise to survive, whose lost commits legitimately redo calls (I12)"
        ),
        implemented_by=(f"{_ORACLES}.model_calls.check_model_calls",),
    ),
    Invariant(
        code="I12",
        title="durability of acknowledgements",
        verdict="safety",
        scope="runtime",
        verifies=(
            "acknowledged data (submissions, answers) survives every later crash the store mode "
            "promises to survive; a mode without a sync per commit (`FileStore(fsync=False)`, "
            "SQLite `synchronous=NORMAL`; `StoreKind.promises_power`) loses at most a suffix of "
            "acknowledged commits to a power loss"
        ),
        leaves=(
            "what the surviving log says (I2-I6); a rejected input, which was never acknowledged "
            "(I16)"
        ),
        implemented_by=(
            f"{_ORACLES}.durability.check_durability",
            f"{_ORACLES}.durability.check_suffix_loss",
        ),
    ),
    Invariant(
        code="I13",
        title="damaged storage detected",
        verdict="safety",
        scope="runtime",
        verifies=(
            "a process stops with `CorruptStore` only after a storage fault damaged something, "
            "names a damaged file and leaves every file of the damaged conversation (the damaged "
            "file's directory) as it found it (the disk after any later power loss; a stray "
            "temporary, never acknowledged, excepted)"
        ),
        leaves=(
            "a recovery that goes on (every other invariant judges it), including another "
            "conversation's in the same process: a refusal is about the conversation it refuses, "
            "and a parent that cut its own unacknowledged torn tail before its sub-agent's log "
            "was found damaged did what its recovery may do (I2-I12 judge it); the leases granted "
            "before the stop (I8)"
        ),
        implemented_by=(f"{_ORACLES}.refusal.check_refusal",),
    ),
    Invariant(
        code="I14",
        title="steering lands at a post-tools boundary",
        verdict="safety",
        scope="runtime",
        verifies=(
            "every steered input (`inputs_steered`) is placed in the commit that settles a "
            "generation turn that waited on tools, after that settlement, with every tool call of "
            "the run answered, right before the next turn is created; none is left queued by such "
            "a boundary"
        ),
        leaves=(
            "the order of the inputs placed (I15); how many model calls a run makes (I11, whose "
            "bound is off when a crash moved a steering input)"
        ),
        implemented_by=(f"{_ORACLES}.inbox.check_steering_boundary",),
    ),
    Invariant(
        code="I15",
        title="queue order preserved",
        verdict="safety",
        scope="runtime",
        verifies=(
            "inputs of one inbox mode are placed (a run's start, a steering placement) in the "
            "order they were accepted, whatever crashes came between"
        ),
        leaves=(
            "an input placed without being accepted (I2: the log does not reduce); where a steered "
            "input lands (I14)"
        ),
        implemented_by=(f"{_ORACLES}.inbox.check_queue_order",),
    ),
    Invariant(
        code="I16",
        title="a rejected input wrote nothing",
        verdict="safety",
        scope="runtime",
        verifies=(
            "no commit that began before a `ConversationBusy` rejection mentions the rejected "
            "request id (a later accepted re-send of it is fine)"
        ),
        leaves=(
            "the rejected input's outcome, which a crash may legitimately change (I9 excuses it)"
        ),
        implemented_by=(f"{_ORACLES}.inbox.check_rejections",),
    ),
    Invariant(
        code="I17",
        title="abandoned run restores the workspace",
        verdict="safety",
        scope="runtime",
        verifies=(
            "once a run abandoned with compensation has stopped, every compensable call of it "
            "whose effect landed was undone exactly once, after its effect, in the reverse order "
            "of the effects; each file those calls edited is what it was when the run started (the "
            "services' own history, not the runtime's pre-image) and each charge of theirs is "
            "refunded in full"
        ),
        leaves=(
            "how often the original call took effect (I1); a compensation's effect before its "
            "intent was durable (I6)"
        ),
        implemented_by=(f"{_ORACLES}.compensation.check_compensation",),
    ),
    Invariant(
        code="I18",
        title="agent state follows the log",
        verdict="safety",
        scope="runtime",
        verifies=(
            "the mutation revision rises by exactly one per recorded edit (never twice for one "
            "call across crashes); a recorded change is an edit the workspace applied exactly "
            "once, and the last recorded hash of a path is what the workspace holds (unless a "
            "write not recorded as a change came later); a validation carries the revision its "
            "call was committed at, and a run completes only if every required criterion's latest "
            "validation at the current revision passed; a request carries a provider cursor only "
            "if the model declared it resumable"
        ),
        leaves=(
            "how often other workspace effects landed (I1); the world after a crash the store mode "
            "does not promise to survive (I12)"
        ),
        implemented_by=(
            f"{_ORACLES}.agent_state.check_agent_log",
            f"{_ORACLES}.agent_state.check_agent_effects",
        ),
    ),
    Invariant(
        code="I19",
        title="compaction applies fresh summaries only, at boundaries",
        verdict="safety",
        scope="runtime",
        verifies=(
            "every applied summary covers exactly the prefix its intent (`compaction_started`) "
            "named, unchanged since the intent, applied by the incarnation (lease epoch) that "
            "wrote the intent and only at a turn boundary (no tool call unanswered, nothing "
            "pinned); a stale or otherwise settled compaction is never applied; each intent's "
            "summarisation request is sent once; every later request starts with the summary its "
            "pin captured, followed by the suffix"
        ),
        leaves=(
            "requests the log never pinned, and how many model calls a run makes (I11, whose bound "
            "is off when a crash moved the compactions)"
        ),
        implemented_by=(f"{_ORACLES}.compaction.check_compaction",),
    ),
    Invariant(
        code="I20",
        title="one child per delegating call",
        verdict="safety",
        scope="runtime",
        verifies=(
            "every child conversation in the store belongs to a delegating call (`agent.delegate`) "
            "of the conversation, under the id derived from the call "
            "(`{conversation}.sub.{call_id}`); its log reduces and accepted exactly one input, "
            "under the request id derived from the call (`{call_id}:sub`); a delegating call "
            "recorded as executed has its child's answer, word for word, as its result"
        ),
        leaves="the child's own calls (I1 and I6 judge them like the parent's)",
        implemented_by=(
            f"{_ORACLES}.subagents.check_subagents",
            f"{_ORACLES}.effects.check_effects",
            f"{_ORACLES}.effects.check_results",
        ),
    ),
    Invariant(
        code="I21",
        title="only a steering input is steered",
        verdict="safety",
        scope="runtime",
        verifies=(
            "every input placed into a running run (`inputs_steered`) was accepted with "
            '`mode="steer"`: a follow-up waits for the next run'
        ),
        leaves=(
            "where a steered input lands (I14) and in which order (I15); an input placed without "
            "being accepted (I2: the log does not reduce)"
        ),
        implemented_by=(f"{_ORACLES}.inbox.check_steering_mode",),
    ),
    Invariant(
        code="I22",
        title="a graceful shutdown settles nothing",
        verdict="safety",
        scope="runtime",
        verifies=(
            "once a process begins its graceful shutdown (its runtime's context exits), no commit "
            "of that process begins before its lease release: it stops no run, settles no input "
            "and records nothing, so the next owner resumes exactly what was in flight"
        ),
        leaves=(
            "work after the lease release (I8); what the next owner does with what it resumes "
            "(every other invariant)"
        ),
        implemented_by=(f"{_ORACLES}.resume.check_shutdown",),
    ),
    Invariant(
        code="I23",
        title="the damage table kept",
        verdict="safety",
        scope="runtime",
        verifies=(
            "under a storage fault the store answers as the damage table (`durable.store.damage`) "
            "says its mode answers that damage: it refuses what the table refuses, for the "
            "table's reason, goes on where the table goes on, and a recovery that goes on keeps "
            "every acknowledged commit before the damage (judged for a schedule's single storage "
            "fault with no power loss after it); after any storage fault or power loss, a "
            "recovery that cuts log bytes the table or a checkpoint proves acknowledged first "
            "copies them to a quarantine file, durably, and deletes no checkpoint that proves "
            "them, nor one the fault damaged"
        ),
        leaves=(
            "whether a refusal names the damage and leaves the evidence as found (I13); whether "
            "what a recovery kept is what the log holds (I2, I12 and the others)"
        ),
        implemented_by=(f"{_ORACLES}.damage_table.check_damage_table",),
    ),
    Invariant(
        code="H1",
        title="runtime state hides a duplicate",
        verdict="safety",
        scope="target",
        verifies=(
            "the runtime's own durable history records as many results of each tool as the ledger "
            "shows applied effects, so what it offers its user can show an effect that happened "
            "twice"
        ),
        leaves="whether the effects break the tool's declared policy (I1)",
        implemented_by=(f"{_TARGETS}.check_hidden",),
        explains="I1",
    ),
    Invariant(
        code="P1",
        title="progress lost after effects landed",
        verdict="safety",
        scope="target",
        verifies=(
            "a process killed after it applied effects left a durable record of the run: the next "
            "process resumes it instead of starting it over"
        ),
        leaves="the effects applied again (I1)",
        implemented_by=(f"{_TARGETS}.check_progress",),
        explains="I1",
    ),
)

_BY_CODE = {i.code: i for i in INVARIANTS}


def invariant(code: str) -> Invariant:
    """The record of ``code``; ``UnknownInvariant`` if there is none."""
    try:
        return _BY_CODE[code]
    except KeyError:
        raise UnknownInvariant(code) from None


def is_registered(code: str) -> bool:
    return code in _BY_CODE


def title_of(code: str) -> str:
    return invariant(code).title


def verdict_of_code(code: str) -> InvariantVerdict:
    return invariant(code).verdict


def target_order() -> tuple[str, ...]:
    """The codes judged on a foreign target, in the order its violations are listed (the first is
    a failure's headline): registry order, each finding right after the invariant it explains."""
    applies = [i for i in INVARIANTS if i.scope != "runtime"]
    out: list[str] = []
    for record in applies:
        if not record.explains:
            out.append(record.code)
            out += [f.code for f in applies if f.explains == record.code]
    return tuple(out)


# -- the documents' tables ------------------------------------------------------------------------

_APPLIES = {"runtime": "runtime", "target": "targets", "both": "runtime, targets"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _implementations(record: Invariant) -> str:
    """``judgement/oracles/effects.py: `check_effects`; targets/judge.py: ...`` (paths under sim/,
    functions grouped by module, in the record's order)."""
    modules: dict[str, list[str]] = {}
    for path in record.implemented_by:
        module, function = path.rsplit(".", 1)
        modules.setdefault(module, []).append(f"`{function}`")
    parts = []
    for module, functions in modules.items():
        relative = module.removeprefix("sim.").replace(".", "/")
        file = f"{relative}/__init__.py" if module == _ORACLES else f"{relative}.py"
        parts.append(f"{file}: {', '.join(functions)}")
    return "; ".join(parts)


def architecture_table() -> str:
    """docs/architecture.md 2.6: what each invariant verifies, leaves, and where it is judged."""
    lines = [
        "| invariant | what must hold | what it leaves to others | implemented by (under `sim/`) |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {i.code} | {_cell(i.verifies)} | {_cell(i.leaves)} | {_implementations(i)} |"
        for i in INVARIANTS
    ]
    return "\n".join(lines) + "\n"


def readme_table() -> str:
    """The README's "The invariants": the names reports show, verdicts, where each applies."""
    lines = [
        "| id | name | verdict | applies to | what must hold after every schedule |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {i.code} | {_cell(i.title)} | {i.verdict} | {_APPLIES[i.scope]} | {_cell(i.verifies)} |"
        for i in INVARIANTS
    ]
    return "\n".join(lines) + "\n"
