"""Mutation tests for the oracles: each oracle must catch a broken runtime
(docs/architecture.md, 2.6).

Each case patches one piece of ``durable/`` with ``monkeypatch`` (a *mutant*: a realistic bug),
runs the smallest schedule that exposes it and asserts the oracle reports its invariant; the same
schedule on the unbroken runtime must pass. A schedule is named by a boundary *label* of the
fault-free trace (resolved to its index at run time, so an added boundary elsewhere does not break
the test); ``caught_at`` records the schedule text it resolves to today. ``also`` lists the other
invariants the same schedule reports (cascades), so a new, unexpected report fails the test.

The reference run of each case is the *mutated* runtime's fault-free run, exactly what a sweep
over the broken runtime would compare against (so I9/I11 only see what a crash changes).

The mutants themselves live in ``sim/explore/mutants.py`` (the catalogue ``durable-sim mutants``
runs).
Limits found while writing these, and how they were closed: power outcomes were drawn once per
seed (now per crash point); I4's "task ran again" check needed a log that reduces (now it reads
the raw log); I8 read only the log a reader returns (now every accepted append is checked against
the lease grants).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from sim.explore.mutants import (
    acquire_ignores_live_lease,
    acquire_keeps_epoch,
    append_skips_fsync,
    checkpoint_claims_one_more,
    checkpoint_restore_drops_request_ids,
    checkpoint_without_wal_sync,
    compensate_forward_order,
    compensation_key_per_attempt,
    corruption_unnamed,
    cursor_reused_without_resume,
    damage_read_as_torn_tail,
    effect_before_intent,
    idempotency_key_per_attempt,
    no_request_id_dedupe,
    no_request_id_dedupe_strict_reducer,
    process_global_counter,
    recover_without_progress,
    recovery_rewrites_output,
    reject_writes,
    release_before_drain,
    renew_without_fence,
    repair_before_refusing,
    resend_differs_on_recovery,
    resend_twice_on_recovery,
    retry_after_fatal_error,
    retry_waits_again,
    revision_bumped_on_replay,
    scheduler_skips_execute,
    sqlite_off_as_full,
    stale_context_window,
    stale_summary_applied,
    steer_anywhere,
    steer_lost_on_settle,
    steer_queue_in_memory,
    steer_reversed,
    subagent_fresh_request_id,
    trust_torn_tail,
    unsafe_replays_on_recovery,
    vfs_sync_noop,
)
from sim.explore.sweep import ScheduleOutcome, judge, sweep
from sim.run.runner import RunResult, run_scenario
from sim.world.faults import CrashKind, CrashPoint, Schedule, When
from sim.world.scenario import Scenario, load_scenario

Mutant = Callable[[pytest.MonkeyPatch], None]


# -- mutants (the catalogue's functions: sim/explore/mutants.py) -----------------------------------

# -- scenarios -----------------------------------------------------------------------------------


def resubmitting_client() -> Scenario:
    """The client re-sends every request id after each crash (like ``request_id_resubmit``)."""
    return Scenario.model_validate(
        {
            "name": "mutant_resubmit",
            "description": "The client re-sends its request ids after every crash.",
            "tools": [{"name": "bump", "operation": "counter.increment", "policy": "unsafe"}],
            "client_resends": True,
            "inputs": [
                {"content": "Open a ticket", "request_id": "ticket-1"},
                {"content": "Add a note to it", "request_id": "note-2", "at_s": 5},
            ],
            "script": [
                [{"calls": [{"tool": "bump"}]}, {"answer": "Ticket opened."}],
                [{"answer": "Note added."}],
            ],
        }
    )


def bundled(name: str) -> Callable[[], Scenario]:
    return lambda: load_scenario(name)


# -- harness -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Crash:
    """One crash at the ``nth`` boundary whose label starts with ``label`` (fault-free trace)."""

    label: str
    when: When
    kind: CrashKind
    nth: int = 1


def resolve(reference: RunResult, crash: Crash | None) -> Schedule:
    if crash is None:
        return Schedule()
    hits = [b for b in reference.boundaries if b.label.startswith(crash.label)]
    assert len(hits) >= crash.nth, f"no boundary #{crash.nth} labelled {crash.label!r}"
    return Schedule.of(CrashPoint(hits[crash.nth - 1].index, crash.when, crash.kind))


def run_case(
    scenario: Scenario, crash: Crash | None, *, seed: int, determinism: bool, store: str = "file"
) -> ScheduleOutcome:
    """Judge one schedule against the fault-free run of the runtime as currently patched."""
    reference = run_scenario(scenario, seed=seed, store=store)  # type: ignore[arg-type]
    schedule = resolve(reference, crash)
    result = reference
    if schedule.points:
        result = run_scenario(scenario, seed=seed, store=store, schedule=schedule)  # type: ignore[arg-type]
    return judge(result, reference, determinism=determinism)


def found(outcome: ScheduleOutcome) -> set[str]:
    return {v.invariant for v in outcome.violations}


def describe(outcome: ScheduleOutcome) -> str:
    lines = [f"schedule {outcome.schedule.text()} -> {outcome.verdict}"]
    lines += [f"  {v.invariant}: {v.explanation} {v.witness[:2]}" for v in outcome.violations]
    return "\n".join(lines)


@dataclass(frozen=True)
class Case:
    oracle: str
    name: str
    mutant: Mutant
    scenario: Callable[[], Scenario]
    crash: Crash | None
    caught_at: str  # the schedule text the crash resolves to today, and the boundary it names
    seed: int = 0
    determinism: bool = False
    also: frozenset[str] = frozenset()  # other invariants the same schedule reports (cascades)
    expect: frozenset[str] | None = None  # what must be reported, if not just ``oracle``
    store: str = "file"

    @property
    def expected(self) -> frozenset[str]:
        return self.expect if self.expect is not None else frozenset({self.oracle})

    @property
    def id(self) -> str:
        return f"{self.oracle}-{self.name}"


CASES = [
    Case(
        "I0",
        "recover-without-progress",
        recover_without_progress,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "24:after:process (after tool.effect:payments.charge#call-1): the recovered task 'made no "
        "progress'",
    ),
    Case(
        "I1",
        "unsafe-replays",
        unsafe_replays_on_recovery,
        bundled("read_edit_answer"),
        Crash("tool.effect:workspace.append_line", "after", "process"),
        "47:after:process (after tool.effect:workspace.append_line#call-2): 2 effects, unsafe",
    ),
    Case(
        "I1",
        "key-per-attempt",
        idempotency_key_per_attempt,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "24:after:process (after tool.effect:payments.charge#call-1): charged twice",
    ),
    Case(
        "I2",
        "trust-torn-tail",
        trust_torn_tail,
        bundled("read_edit_answer"),
        # The 4th append is commit #4 (model_completed, task_checkpoint, task_created,
        # task_waiting); seed 3's power loss at this point keeps the file's first 2560 bytes: a
        # torn batch. (Each crash point draws its own power outcome.)
        Crash("fs.append:c1/events.jsonl", "after", "power", nth=4),
        "19:after:power, seed 3 (after the append of store.commit#4, torn:2560): CorruptStore",
        seed=3,
        also=frozenset({"I0", "I6", "I9", "I12"}),
    ),
    Case(
        "I3",
        "checkpoint-claims-next",
        checkpoint_claims_one_more,
        bundled("read_edit_answer"),
        None,  # the periodic checkpoint after commit #9 claims #20 and the log has #20
        "none (fault-free: checkpoint through #19 saved as #20)",
    ),
    Case(
        "I3",
        "checkpoint-restore-drops-request-ids",
        checkpoint_restore_drops_request_ids,
        bundled("read_edit_answer"),
        Crash("store.checkpoint", "after", "process"),
        "after the first store.checkpoint: the recovered state lacks the request-id index",
    ),
    Case(
        "I4",
        "stale-window",
        stale_context_window,
        bundled("model_error_then_message"),
        None,
        "none (fault-free: run-2's request lacks 'Never mind, just say hello')",
    ),
    Case(
        "I4",
        "model-after-stop",
        retry_after_fatal_error,
        bundled("model_error_then_message"),
        None,
        "none (fault-free: model call at boundary 25 for run-1, stopped at boundary 17)",
    ),
    Case(
        "I5",
        "no-request-id-dedupe",
        no_request_id_dedupe,
        resubmitting_client,
        Crash("store.commit#3", "after", "process"),
        "14:after:process (after store.commit#3, the first model_requested): the re-sent "
        "ticket-1 is accepted twice",
        also=frozenset({"I9"}),
    ),
    Case(
        "I5",
        "no-request-id-dedupe-strict-reducer",
        no_request_id_dedupe_strict_reducer,
        resubmitting_client,
        Crash("store.commit#3", "after", "process"),
        "14:after:process: I0 + I2 (the reducer rejects the duplicate request id)",
        expect=frozenset({"I0", "I2"}),
    ),
    Case(
        "I6",
        "effect-before-intent",
        effect_before_intent,
        bundled("idempotent_payment"),
        None,
        "none (fault-free: effect at boundary 20, its intent committed at boundary 21)",
    ),
    Case(
        "I7",
        "scheduler-skips-execute",
        scheduler_skips_execute,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "24:after:process (after tool.effect:payments.charge#call-1): pay-1 never settles",
    ),
    Case(
        "I8",
        "acquire-ignores-live-lease",
        acquire_ignores_live_lease,
        bundled("idempotent_payment"),
        Crash("store.lease.acquire", "after", "process"),
        "0:after:process (after store.lease.acquire#1): owner-2 granted while owner-1's is live",
    ),
    Case(
        "I8",
        "acquire-keeps-epoch",
        acquire_keeps_epoch,
        bundled("idempotent_payment"),
        Crash("store.commit#2", "after", "process"),
        "11:after:process (after store.commit#2): owner-2 gets epoch 1 again",
        also=frozenset({"I0", "I2"}),
    ),
    Case(
        "I8",
        "renew-without-fence",
        renew_without_fence,
        bundled("lease_takeover"),
        None,
        "none (fault-free: the paused worker's heartbeat puts epoch 1 back over epoch 2)",
        also=frozenset({"I0"}),
    ),
    Case(
        "I9",
        "recovery-rewrites-output",
        recovery_rewrites_output,
        bundled("idempotent_payment"),
        Crash("tool.effect:payments.charge", "after", "process"),
        "24:after:process (after tool.effect:payments.charge#call-1): answer digest differs",
    ),
    Case(
        "I10",
        "process-global-counter",
        process_global_counter,
        bundled("idempotent_payment"),
        None,
        "none (fault-free, run twice: the fingerprints differ)",
        determinism=True,
    ),
    Case(
        "I11",
        "resend-twice-on-recovery",
        resend_twice_on_recovery,
        bundled("idempotent_payment"),
        Crash("model.call#1", "after", "process"),
        "17:after:process (after model.call#1, response not committed): 4 calls, at most 3",
    ),
    Case(
        "I11",
        "resend-differs-on-recovery",
        resend_differs_on_recovery,
        bundled("idempotent_payment"),
        Crash("model.call#1", "after", "process"),
        "17:after:process (after model.call#1): the re-sent request has another sha256",
    ),
    Case(
        "I12",
        "append-skips-fsync",
        append_skips_fsync,
        bundled("idempotent_payment"),
        # The mutant's trace has no fsync boundaries: store.commit#3 is boundary 10 there.
        Crash("store.commit#3", "before", "power"),
        "11:before:power (before store.commit#3, after pay-1 was acknowledged): pay-1 vanished",
        # The client re-sends the lost pay-1 and gets a new submission: I5 reports the remap.
        also=frozenset({"I5"}),
    ),
    Case(
        "I11",
        "retry-waits-again",
        retry_waits_again,
        bundled("retry_backoff"),
        Crash("store.lease.renew", "after", "process", nth=6),
        "51:after:process (after store.lease.renew#6, in the backoff): the restarted process "
        "waits a whole backoff again instead of retrying at the committed deadline",
    ),
    Case(
        "I8",
        "release-before-drain",
        release_before_drain,
        bundled("graceful_shutdown_takeover"),
        None,
        "none (fault-free: the shutdown releases the lease, then the charge takes effect)",
    ),
    Case(
        "I13",
        "repair-before-refusing",
        repair_before_refusing,
        bundled("read_edit_answer"),
        # The storage fault at this point flips a bit in line 2 of the log (seeded: see
        # SimFS.damage_synced); the mutant cuts the log there, then refuses.
        Crash("store.commit#3", "after", "storage"),
        "14:after:storage (after store.commit#3): events.jsonl cut at the damaged line",
    ),
    Case(
        "I13",
        "corruption-unnamed",
        corruption_unnamed,
        bundled("read_edit_answer"),
        Crash("store.commit#3", "after", "storage"),
        "14:after:storage (after store.commit#3): 'the store is corrupt' names no file",
    ),
    Case(
        "I12",
        "damage-as-torn-tail",
        damage_read_as_torn_tail,
        bundled("read_edit_answer"),
        Crash("store.commit#3", "after", "storage"),
        "14:after:storage (after store.commit#3): the damaged line and the commit after it are "
        "truncated as a torn tail; fix-config-1's acknowledgement is lost",
        also=frozenset({"I5"}),
    ),
    Case(
        "I14",
        "steer-anywhere",
        steer_anywhere,
        bundled("steer_mid_tools"),
        None,
        "none (fault-free: steer-2 placed in its own commit while the read is in flight)",
    ),
    Case(
        "I14",
        "steer-anywhere-after-crash",
        steer_anywhere,
        bundled("steer_mid_tools"),
        Crash("tool.effect:workspace.read", "before", "process"),
        "before tool.effect:workspace.read#call-1: the re-sent steer-2 lands mid-read again",
    ),
    Case(
        "I14",
        "steer-queue-in-memory",
        steer_queue_in_memory,
        bundled("steer_mid_tools"),
        Crash("store.lease.renew", "before", "process"),
        "27:before:process (before store.lease.renew#1, steer-2 queued, the read in flight): "
        "the restarted process forgets steer-2 at the post-tools boundary",
    ),
    Case(
        "I15",
        "steer-reversed",
        steer_reversed,
        bundled("steer_and_follow_up_queued"),
        Crash("tool.effect:workspace.read", "after", "process"),
        "after tool.effect:workspace.read#call-1: the recovered turn places steer-4 before steer-3",
    ),
    Case(
        "I16",
        "reject-writes",
        reject_writes,
        bundled("reject_while_busy"),
        None,
        "none (fault-free: ping-2 committed, then refused as busy)",
    ),
    Case(
        "I7",
        "steer-lost-on-settle",
        steer_lost_on_settle,
        bundled("steer_misses_the_run"),
        None,
        "none (fault-free: steer-2 stays queued after run-1 settles)",
    ),
    Case(
        "I17",
        "compensate-forward-order",
        compensate_forward_order,
        bundled("abandon_restores_files"),
        None,
        "none (fault-free: config.yaml, edited twice, is put back to the pre-image of its second "
        "edit last)",
    ),
    Case(
        "I17",
        "compensation-key-per-attempt",
        compensation_key_per_attempt,
        bundled("abandon_restores_files"),
        Crash("tool.effect:workspace.restore", "after", "process"),
        "100:after:process (after tool.effect:workspace.restore#call-4.undo): the recovery's "
        "re-run carries a new key and is applied a second time",
    ),
    Case(
        "I19",
        "stale-summary-applied",
        stale_summary_applied,
        bundled("compaction_mid_conversation"),
        Crash("store.commit", "before", "process", nth=17),
        "86:before:process (before store.commit#17, the first summary back, not applied): the "
        "recovered process applies the summary its dead predecessor asked for",
    ),
    Case(
        "I18",
        "revision-bumped-on-replay",
        revision_bumped_on_replay,
        bundled("plan_edit_validate"),
        Crash("tool.effect:workspace.replace", "after", "process"),
        "24:after:process (after tool.effect:workspace.replace#call-1): the verified edit "
        "moves the mutation revision from 0 to 2",
    ),
    Case(
        "I18",
        "cursor-reused-without-resume",
        cursor_reused_without_resume,
        bundled("plan_edit_validate"),
        None,
        "none (fault-free: the second request continues from resp-1-0, declared not resumable)",
    ),
    Case(
        "I20",
        "subagent-fresh-request-id",
        subagent_fresh_request_id,
        bundled("delegate_to_subagent"),
        Crash("tool.effect:workspace.append_line", "after", "process"),
        "71:after:process (after the child's edit, tool.effect:workspace.append_line#call-3): the "
        "recovered delegation submits a second task to its child, whose second answer (script "
        "exhausted) becomes the call's result",
        also=frozenset({"I9", "I11"}),
    ),
    Case(
        "I12",
        "sqlite-off-as-full",
        sqlite_off_as_full,
        bundled("idempotent_payment"),
        Crash("store.commit#3", "before", "power"),
        "28:before:power on sqlite (before store.commit#3): acknowledged pay-1 vanished (nothing "
        "was ever synced)",
        also=frozenset({"I5"}),
        store="sqlite",
    ),
    Case(
        "I12",
        "vfs-sync-noop",
        vfs_sync_noop,
        bundled("idempotent_payment"),
        Crash("store.commit#3", "before", "power"),
        "28:before:power on sqlite (before store.commit#3): acknowledged pay-1 vanished (every "
        "sync a no-op)",
        also=frozenset({"I5"}),
        store="sqlite",
    ),
    Case(
        "I2",
        "checkpoint-without-wal-sync",
        checkpoint_without_wal_sync,
        bundled("weak_durability_nofsync"),
        # The third checkpoint's log truncate, after the database's sync: the copied pages are
        # durable, the unsynced log comes back as an older prefix that recovery replays over them.
        Crash("fs.truncate:store.sqlite-wal", "before", "power", nth=3),
        "92:before:power on sqlite, synchronous=NORMAL (before the 3rd log truncate): the store "
        "reads back corrupt",
        also=frozenset({"I0"}),
        store="sqlite",
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_oracle_catches_mutant(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    case.mutant(monkeypatch)
    outcome = run_case(
        case.scenario(), case.crash, seed=case.seed, determinism=case.determinism, store=case.store
    )
    invariants = found(outcome)
    missing = case.expected - invariants
    assert not missing, f"{case.id}: expected at {case.caught_at}\n{describe(outcome)}"
    assert invariants <= case.expected | case.also, describe(outcome)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_unbroken_runtime_passes_the_same_schedule(case: Case) -> None:
    outcome = run_case(
        case.scenario(), case.crash, seed=case.seed, determinism=case.determinism, store=case.store
    )
    assert outcome.violations == [], describe(outcome)
    assert outcome.verdict == "pass"


# -- sweeps: the same mutants found by a sweep, first failure first ------------------------------

SWEEPS = [
    # (case id, crash kinds, label of the first failing schedule's crash)
    ("I1-unsafe-replays", ("process",), "tool.effect:workspace.append_line#call-2"),
    ("I1-key-per-attempt", ("process",), "tool.effect:payments.charge#call-1"),
    ("I8-acquire-ignores-live-lease", ("process",), "store.lease.acquire#1"),
    ("I9-recovery-rewrites-output", ("process",), "store.commit#5"),
    ("I11-resend-twice-on-recovery", ("process",), "store.commit#3"),
    ("I12-append-skips-fsync", ("power",), "store.commit#3"),
    ("I13-repair-before-refusing", ("storage",), "store.commit#2"),
    ("I12-damage-as-torn-tail", ("storage",), "store.commit#3"),
    ("I18-revision-bumped-on-replay", ("process",), "tool.effect:workspace.replace#call-1"),
]
# The compensation mutants, swept with the default crash kinds (process and power) on both
# stores: (case id, the first failing schedule's crash labels on the file store).
COMPENSATION_SWEEPS = [
    ("I17-compensate-forward-order", []),
    ("I17-compensation-key-per-attempt", ["tool.effect:workspace.restore#call-4.undo"]),
]
# The inbox mutants fail already on the fault-free run, the sweep's first schedule.
INBOX_SWEEPS = ["I14-steer-anywhere", "I15-steer-reversed", "I16-reject-writes"]
# The compaction mutant needs a crash between a compaction's intent and its application.
COMPACTION_SWEEPS = [("I19-stale-summary-applied", "store.commit#16")]
# The sub-agent mutant: the first schedule that re-runs a delegation (a crash after its intent).
SUBAGENT_SWEEPS = [("I20-subagent-fresh-request-id", ["store.commit#5"])]
# Mutants the default depth-1 sweep (process and power crashes) must kill on both stores, with
# the first failing schedule's crash labels on the file store.
DEFAULT_SWEEPS = COMPENSATION_SWEEPS + SUBAGENT_SWEEPS
BY_ID = {c.id: c for c in CASES}


@pytest.mark.parametrize(("case_id", "kinds", "first_label"), SWEEPS, ids=[s[0] for s in SWEEPS])
def test_sweep_finds_mutant(
    case_id: str, kinds: tuple[CrashKind, ...], first_label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = BY_ID[case_id]
    case.mutant(monkeypatch)
    result = sweep(
        case.scenario(),
        store="file",
        seed=case.seed,
        crash_kinds=kinds,
        determinism=False,
        stop_at_first_failure=True,
    )
    assert result.failures, f"{case_id}: the sweep found nothing"
    first = result.failures[0]
    assert first.invariant == case.oracle, (first.schedule, first.invariant, first.explanation)
    assert first.crash_labels == [first_label], first.schedule


@pytest.mark.parametrize(("case_id", "kinds", "first_label"), SWEEPS, ids=[s[0] for s in SWEEPS])
def test_unbroken_runtime_passes_the_sweep(
    case_id: str, kinds: tuple[CrashKind, ...], first_label: str
) -> None:
    case = BY_ID[case_id]
    result = sweep(
        case.scenario(), store="file", seed=case.seed, crash_kinds=kinds, determinism=False
    )
    assert result.failures == [], [(f.schedule, f.invariant) for f in result.failures[:3]]
    assert result.verdicts["pass"] == result.schedules


@pytest.mark.parametrize("case_id", INBOX_SWEEPS)
def test_sweep_finds_inbox_mutant(case_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = BY_ID[case_id]
    case.mutant(monkeypatch)
    result = sweep(case.scenario(), store="file", determinism=False, stop_at_first_failure=True)
    assert result.failures, f"{case_id}: the sweep found nothing"
    assert result.failures[0].invariant == case.oracle, result.failures[0].explanation


@pytest.mark.parametrize(
    ("case_id", "first_labels"), DEFAULT_SWEEPS, ids=[c for c, _ in DEFAULT_SWEEPS]
)
@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_default_sweep_finds_mutant(
    case_id: str, first_labels: list[str], store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """I17's mutants (``abandon_restores_files``) and I20's (``delegate_to_subagent``: the first
    delegation re-run after a crash names its child's input by its attempt) are killed by the
    default depth-1 sweep of their scenario on both stores."""
    case = BY_ID[case_id]
    case.mutant(monkeypatch)
    result = sweep(
        case.scenario(),
        store=store,  # type: ignore[arg-type]
        determinism=False,
        stop_at_first_failure=True,
    )
    assert result.failures, f"{case_id}: the sweep found nothing on {store}"
    first = result.failures[0]
    assert first.invariant == case.oracle, (first.schedule, first.invariant, first.explanation)
    if store == "file":
        assert first.crash_labels == first_labels, first.schedule


@pytest.mark.parametrize(("case_id", "first_label"), COMPACTION_SWEEPS)
def test_sweep_finds_compaction_mutant(
    case_id: str, first_label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = BY_ID[case_id]
    case.mutant(monkeypatch)
    result = sweep(
        case.scenario(),
        store="file",
        crash_kinds=("process",),
        determinism=False,
        stop_at_first_failure=True,
    )
    assert result.failures, f"{case_id}: the sweep found nothing"
    first = result.failures[0]
    assert first.invariant == case.oracle, (first.schedule, first.explanation)
    assert first.crash_labels == [first_label], first.schedule
