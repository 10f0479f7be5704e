"""I4, crash-only resume: nothing of a stopped run happens after it stopped -- no event of its
tasks in the log (read raw, so it holds even when the log no longer reduces), no tool effect,
no model call -- and every model request of a run contains the inputs the run had placed.
I22, its other half (docs/architecture.md, 1.5): a graceful shutdown is not a return of control
to the run's caller, so it settles nothing -- the process commits nothing between the start of
its shutdown and its lease release, and the next owner resumes what was in flight.

I4 leaves a zombie's call that was in flight before a newer epoch stopped the run (only a
fencing service can refuse it: I8), and what a summarisation request contains (I19); I22 leaves
work after the lease release (I8).
"""

from __future__ import annotations

from durable.events import InputSettled, InputsSteered, RunStarted, RunStopped, TaskCreated
from sim.judgement.oracles.facts import Facts, durable_commits, row
from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_stopped_runs_stay_stopped(result: RunResult) -> list[Violation]:
    """I4 on the raw log (it must work even when the log no longer reduces): no event for a
    task of a run after that run's ``run_stopped``."""
    run_of_task: dict[str, str] = {}
    stopped_at: dict[str, int] = {}
    for record in result.durable.records:
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
                    (row(record),),
                )
            ]
    return []


def check_shutdown(result: RunResult) -> list[Violation]:
    """I22 on the commits the final log holds: none of a process began after its graceful
    shutdown began and before its lease release (a shutdown that stops or settles the run, or
    records anything else, leaves the next owner a run that no longer is what was in flight;
    the fault-free run cannot tell, as nobody resumes anything there)."""
    boundaries = result.trace.boundaries
    for process, began in result.leases.shutdowns:
        released = next(
            (
                b.index
                for b in boundaries[began:]
                if b.process == process and b.label.startswith("store.lease.release")
            ),
            len(boundaries),
        )
        for index, records in durable_commits(result):
            if began <= index < released and boundaries[index].process == process:
                settles = [r for r in records if isinstance(r.event, RunStopped | InputSettled)]
                what = "settled the run" if settles else "committed"
                return [
                    Violation(
                        "I22",
                        f"{process} {what} during its graceful shutdown",
                        tuple(row(r) for r in (settles or records)[:3]),
                        expected="nothing committed between the shutdown and the lease release",
                        actual=f"a commit at boundary {index} (the shutdown began at {began})",
                    )
                ]
    return []


def check_resume(result: RunResult, facts: Facts) -> list[Violation]:
    assert facts.state is not None
    state = facts.state
    out: list[Violation] = []
    task_of_call = {i.call_id: i.task_id for i in state.intents.values()}
    for effect in result.outside.ledger:
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
    for call in result.outside.model_calls:
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
    for record in result.durable.records:
        event = record.event
        if isinstance(event, RunStarted):
            placed[event.run_id] = list(event.inputs)
        elif isinstance(event, InputsSteered):
            placed.setdefault(event.run_id, []).extend(event.inputs)
        elif isinstance(event, TaskCreated) and event.kind == "generation":
            out[event.task_id] = list(placed.get(event.run_id, []))
    return out
