"""The oracles that apply to a foreign runtime, with minimal witnesses.

A foreign runtime's log format is its own, so the reference runtime's I2-I4, I8 and I10-I13 do
not apply; what does is what its user sees, read from ground truth only -- the ledger outside
the child, and the runtime's durable state as a fresh reader sees it -- compared with the
fault-free run of the same target and options:

- I1 effects per tool against the policy the user declares for it (``exactly_once``: as many
  applied effects as the fault-free run; ``at_most_once``: no more; ``at_least_once``: no fewer;
  a recovery policy of the reference runtime's is held to the one it promises,
  ``sim.targets.protocol.RECOVERY_GUARANTEES``);
- H1 the runtime's own state hides a duplicate: its checkpointed history records fewer results of
  a tool than the ledger shows applied effects, so nothing the runtime offers (its state, its
  history, its UI) can tell the user the effect happened twice;
- P1 progress lost: a process applied effects, yet the next one found no durable record of the
  run at all and started it over;
- I5 the input is in the durable state once and answered as in the fault-free run;
- I6 the durable history (one row per message) is the fault-free run's: nothing lost, nothing
  duplicated;
- I7 liveness: the run finished within the processes the host allows (each bounded in time);
  its witness shows what each resuming process found in the runtime's state (for LangGraph:
  ``next`` and the tasks whose writes were saved), which is how a restart decides to resume.

A harness error (a child that hung and was killed, a child that raised) is verdict ``error``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from sim.judgement.invariants import target_order
from sim.judgement.oracles import Violation, verdict_of
from sim.targets.boundaries import notes_of
from sim.targets.host import PointRun
from sim.targets.ledger import LedgerRow
from sim.targets.protocol import TargetTool

#: The order a schedule's violations are listed in (its first is the failure's headline): the
#: registry's, each finding only a foreign runtime has (H1, P1) right after the one it explains.
ORDER = target_order()


@dataclass
class PointVerdict:
    verdict: str
    violations: list[Violation]


def judge_point(run: PointRun, reference: PointRun, tools: tuple[TargetTool, ...]) -> PointVerdict:
    """Every oracle on ``run``, against the fault-free ``reference``."""
    if run.error is not None:
        return PointVerdict("error", [Violation("I0", f"harness error: {run.error}")])
    found: list[Violation] = []
    found += check_effects(run, reference, tools)
    found += check_hidden(run, tools)
    found += check_progress(run)
    found += check_input(run, reference)
    found += check_history(run, reference)
    found += check_liveness(run)
    found.sort(key=lambda v: ORDER.index(v.invariant))
    return PointVerdict(verdict_of(found), found)


def crash_rows(run: PointRun) -> list[str]:
    """Where the run was killed and what each next process did, as witness rows."""
    rows = [
        f"crash: {c['when']} {c['label']} (boundary {run.crash.index if run.crash else '?'}) "
        f"{'preempted' if c.get('how') == 'preempt' else 'killed'} {c['p']}"
        for c in run.crashes
    ]
    rows += [f"{p}: {action}" for p, action in sorted(run.actions.items())]
    return rows


def resume_rows(run: PointRun) -> list[str]:
    """What each resuming process found in the runtime's state before it decided."""
    return [
        f"{row['p']} found: next={row['next']} tasks={row['tasks']} with saved writes="
        f"{row['saved']}"
        for row in notes_of(run.rows, "resume_state")
    ]


def _applied(rows: list[LedgerRow], tool: str) -> int:
    return sum(1 for r in rows if r.tool == tool and r.applied)


def check_effects(
    run: PointRun, reference: PointRun, tools: tuple[TargetTool, ...]
) -> list[Violation]:
    out: list[Violation] = []
    for tool in tools:
        applied = _applied(run.ledger, tool.name)
        expected = _applied(reference.ledger, tool.name)
        ok = {
            "exactly_once": applied == expected,
            "at_most_once": applied <= expected,
            "at_least_once": applied >= expected,
        }[tool.policy]
        if ok:
            continue
        rows = [r.text() for r in run.ledger if r.tool == tool.name]
        out.append(
            Violation(
                "I1",
                f"{tool.name} is declared {tool.promise()}, but the {tool.service} ledger shows "
                f"{applied} applied effects where the fault-free run has {expected}",
                tuple(rows + crash_rows(run)),
                expected=f"{expected} applied {tool.service} effect(s) ({tool.promise()})",
                actual=f"{applied} applied {tool.service} effect(s)",
            )
        )
    return out


def check_hidden(run: PointRun, tools: tuple[TargetTool, ...]) -> list[Violation]:
    state = run.state
    if not state.exists:
        return []
    out: list[Violation] = []
    for tool in tools:
        if state.hidden_judged is not None and tool.name not in state.hidden_judged:
            continue
        applied = _applied(run.ledger, tool.name)
        recorded = state.results.get(tool.name, [])
        if applied <= len(recorded):
            continue
        rows = [f"state: one {tool.name} result, for call {cid}" for cid in recorded]
        rows += [r.text() for r in run.ledger if r.tool == tool.name and r.applied]
        out.append(
            Violation(
                "H1",
                f"the runtime's own state hides it: its durable history records "
                f"{len(recorded)} {tool.name} result(s), the ledger {applied} applied effects",
                tuple(rows),
                expected=f"{applied} {tool.name} result(s) in the runtime's history",
                actual=f"{len(recorded)} {tool.name} result(s) in the runtime's history",
            )
        )
    return out


def check_progress(run: PointRun) -> list[Violation]:
    out: list[Violation] = []
    for crash in run.crashes:
        killed = str(crash["p"])
        landed = [r for r in run.ledger if r.process == killed and r.applied]
        next_process = f"p{int(killed[1:]) + 1}"
        if landed and run.actions.get(next_process) == "start":
            out.append(
                Violation(
                    "P1",
                    f"{killed} applied {len(landed)} effect(s) before it was killed, but the "
                    f"runtime kept no durable record of the run: {next_process} started it over",
                    tuple([r.text() for r in landed] + crash_rows(run)),
                    expected="the run resumed from a checkpoint",
                    actual=f"no checkpoint of the thread; {next_process} started from scratch",
                )
            )
    return out


def check_input(run: PointRun, reference: PointRun) -> list[Violation]:
    state, want = run.state, reference.state
    if state.inputs != want.inputs:
        return [
            Violation(
                "I5",
                f"the runtime's state holds {len(state.inputs)} copies of the user's input, "
                f"the fault-free run's {len(want.inputs)}",
                tuple(f"state input: {text}" for text in state.inputs) + tuple(crash_rows(run)),
                expected=f"{len(want.inputs)} input(s)",
                actual=f"{len(state.inputs)} input(s)",
            )
        ]
    if state.finished and state.answer != want.answer:
        return [
            Violation(
                "I5",
                "the input was answered differently from the fault-free run",
                tuple(crash_rows(run)),
                expected=str(want.answer),
                actual=str(state.answer),
            )
        ]
    return []


def check_history(run: PointRun, reference: PointRun) -> list[Violation]:
    got, want = run.state.history, reference.state.history
    if not run.state.finished or got == want:
        return []
    diff = [
        line
        for line in difflib.ndiff(want, got)
        if line.startswith(("- ", "+ "))  # only what differs
    ]
    return [
        Violation(
            "I6",
            "the runtime's durable history differs from the fault-free run's (- missing, + extra)",
            tuple(diff[:12]),
            expected=f"{len(want)} messages",
            actual=f"{len(got)} messages",
        )
    ]


def check_liveness(run: PointRun) -> list[Violation]:
    if run.state.finished:
        return []
    pending = ", ".join(run.state.pending) or "nothing (no checkpoint)"
    return [
        Violation(
            "I7",
            f"the run did not finish after {run.processes} process(es); the runtime's state "
            f"has pending: {pending}",
            (*crash_rows(run), *resume_rows(run)),
            expected="the run finished",
            actual="pending: " + pending,
        )
    ]


#: How a crash row came to be, as a timeline says it (a kill, when the row says nothing).
CRASH_HOW = {
    "preempt": "SIGTERM, then SIGKILL after its grace",
    "recorded": "recorded: the fault-free run's files at this instant, recovered from",
}


def timeline(run: PointRun) -> list[str]:
    """The point as one run: every boundary, the crash, what each process did."""
    lines: list[str] = []
    for row in run.rows:
        t = row["t"]
        if t == "b":
            what = row.get("details", {}).get("what")
            lines.append(
                f"[{row['i']:>3}] {row['p']} {row['label']}" + (f"  {what}" if what else "")
            )
        elif t == "crash":
            how = CRASH_HOW.get(str(row.get("how")), "SIGKILL")
            lines.append(f"CRASH ({how}) {row['when']} {row['label']} in {row['p']}")
        elif t == "spawn":
            lines.append(f"--- {row['p']} starts")
        elif t == "ended":
            lines.append(f"--- {row['p']} ended ({row['action']})")
        elif t == "error":
            lines.append(f"--- {row['p']} raised: {row['msg']}")
    return lines
