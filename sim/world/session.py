"""One process's life, on either host of a world (``sim.world.host``): the runtime wired to the
host's store, ports, the fake model and the tools; and the client session on it (the client's
steps, the wait for every answer, the operator).

Written once: the simulator (``sim.run.runner``) and the real-process child of ``durable-sim
realcrash`` (``sim.run.realchild``) both run a process with ``run_process``, so the
client's behaviour, the model, the tools and the runtime's configuration cannot drift apart.
Time is the process's (``SimProcess.now``/``sleep_until``: the machine's clock); a graceful
shutdown's deadline is trio's (the real host refuses shutdown scenarios).
"""

from __future__ import annotations

from typing import Any, Literal

import trio

from durable.errors import ConversationBusy, Fenced
from durable.ports import Ports
from durable.runtime import Conversation, SubmissionHandle
from durable.state import InvariantViolation, new_state, reduce
from durable.store.base import CorruptStore, LeaseHeld
from sim.errors import UserError
from sim.world import seams
from sim.world.host import Host, shutdown_at_s
from sim.world.injector import SimulatedCrash
from sim.world.model import FakeModel
from sim.world.process import (
    InstrumentedStore,
    ProcessDead,
    ProcessFS,
    SimClock,
    SimIds,
    SimProcess,
    describe_exception,
    is_cancel_only,
    is_crash_only,
    only,
)
from sim.world.scenario import (
    ACTION_STEP_BASE,
    RESEND_STEP_BASE,
    ActionDef,
    InputDef,
    ResendDef,
)
from sim.world.tools import build_tools

#: How a process's life ended: its client session ended, it crashed, the runtime raised, or it
#: stopped on storage the disk damaged (a refusal, judged by I13).
ProcessEnd = Literal["ended", "crashed", "error", "refused"]


def process_ports(host: Host, process: SimProcess) -> Ports:
    """The runtime's ports for ``process``: its machine's clock, the store's file system with
    every mutation a boundary, the host's blocking calls, the world's ids."""
    place = host.place()
    return Ports(
        clock=SimClock(process),
        fs=ProcessFS(process, place.fs, place.root),
        blocking=host.blocking(process),
        ids=SimIds(process, host.world),
    )


async def run_process(host: Host, process: SimProcess) -> ProcessEnd:
    """Open the runtime for ``process`` on the host's store and run the client session on it."""
    scenario = host.scenario
    store = host.store_kind.open(process, host.place(), host.blocking(process))
    ports = process_ports(host, process)
    model = FakeModel(scenario, process, host.model_log)
    tools = build_tools(scenario, host.services, process)
    try:
        with process.scope:
            async with seams.open_runtime(
                store=store,
                model=model,
                tools=tools,
                ports=ports,
                config=host.config,
                owner_id=process.owner_id,
            ) as runtime:
                process.runtime = runtime
                await client_session(host, process, runtime, store)
                # Leaving the ``async with`` now is the runtime's graceful shutdown (I22).
                host.machine.evidence.shutdown_began(process.id)
    except BaseException as exc:  # the machine is the OS here: it must see every way a process ends
        if not process.alive and is_crash_only(exc):
            return "crashed"
        if is_cancel_only(exc):
            raise  # the world's liveness bound (or the world ending): not the process's doing
        if only(exc, UserError):
            raise  # user code at a seam could not be run (sim.world.seams): not the runtime's act
        if only(exc, (Exception, SimulatedCrash, ProcessDead, trio.Cancelled)):
            process.error = f"{type(exc).__name__}: {describe_exception(exc)}"
            damaged = host.machine.injector.damaged is not None  # a storage fault happened
            if damaged and only(exc, (CorruptStore, trio.Cancelled)):
                return "refused"
            return "error"
        raise  # KeyboardInterrupt, a test timeout, SystemExit: the harness's, never the process's
    return "crashed" if not process.alive else "ended"


async def client_session(
    host: Host, process: SimProcess, runtime: Any, store: InstrumentedStore
) -> None:
    """The client talking to this process: open the conversation (this recovers it), perform the
    client's steps that were not acknowledged yet (inputs with their request ids, actions) at their
    times, then wait for every submission to settle. A standby worker that cannot get the lease,
    or a worker that loses it, ends its session."""
    scenario, client, world = host.scenario, host.client, host.world
    try:
        conversation = await runtime.conversation(scenario.conversation_id)
    except LeaseHeld:
        world.record("standby", process.id)
        return
    except Fenced:
        # Paused past its lease while it opened (a ``pause`` crash point): another owner took
        # the lease over before this process's first commit, and the store refused it.
        world.record("fenced", process.id)
        return
    host.recovered_at_s[process.id] = process.now()
    await audit_recovery(host, process, conversation, store)
    shutdown_s = shutdown_at_s(scenario, process.slot)
    async with trio.open_nursery() as nursery:
        if scenario.operator is not None:
            nursery.start_soon(operator, host, process, conversation)
        # A graceful shutdown ends the session at its time: the runtime then exits normally.
        # So does a preemption (the real host's SIGTERM, ``sim.run.realchild``), at its instant.
        with trio.move_on_at(shutdown_s) as stop:
            process.stop_session = stop
            if process.preempted:
                stop.cancel()
            try:
                await client_steps(host, process, conversation)
                for spec in scenario.inputs:
                    if spec.request_id not in client.acked:
                        # Refused (ConversationBusy) and never accepted since: that refusal is
                        # the input's answer -- reported to the client, not lost (I5, I16).
                        client.answers[spec.request_id] = ("rejected", None, "conversation busy")
                        continue
                    handle = conversation.submission(client.acked[spec.request_id])
                    settled = await handle.wait()
                    client.answers[spec.request_id] = (
                        settled.status,
                        settled.answer,
                        settled.reason,
                    )
                    world.record("answer", spec.request_id, settled.status, settled.answer)
            except Fenced:
                world.record("fenced", process.id)
        if process.now() >= shutdown_s:
            world.record("shutdown", process.id)
        nursery.cancel_scope.cancel()


async def audit_recovery(
    host: Host, process: SimProcess, conversation: Any, store: InstrumentedStore
) -> None:
    """For I3: the state a recovery rebuilt must be ``reduce`` of the log it stands on. Read at
    the same instant (neither the read nor the comparison yields to other tasks on the
    simulator), in every process but the first (which opens an empty conversation)."""
    if process.number == 1 or not hasattr(conversation, "state"):
        return
    records = await store.read_records(host.scenario.conversation_id, 0)
    try:
        expected = reduce(new_state(host.scenario.conversation_id), records)
    except InvariantViolation:
        return  # I2 reports a log that does not reduce
    rebuilt = conversation.state.model_dump(mode="json")
    if rebuilt != expected.model_dump(mode="json"):
        differing = sorted(
            k for k, v in expected.model_dump(mode="json").items() if rebuilt.get(k) != v
        )
        host.recovery_mismatches.append(
            f"{process.id}: state through #{conversation.state.last_sequence}, the store returns "
            f"{len(records)} records; they differ in: {', '.join(differing) or '?'}"
        )


async def client_steps(host: Host, process: SimProcess, conversation: Conversation) -> None:
    """The client's timed steps in time order: inputs (submitted again, with the same request
    id, when the client never saw the acknowledgement, or always with ``client_resends``),
    re-sends of acknowledged inputs, and aborts; a step already done is not done again."""
    scenario, client, world = host.scenario, host.client, host.world
    steps: list[tuple[float, int, Any]] = [(i.at_s, n, i) for n, i in enumerate(scenario.inputs)]
    steps += [(a.at_s, ACTION_STEP_BASE + n, a) for n, a in enumerate(scenario.actions)]
    steps += [(r.at_s, RESEND_STEP_BASE + n, r) for n, r in enumerate(scenario.resends)]
    by_request = {i.request_id: i for i in scenario.inputs}
    for at_s, number, step in sorted(steps, key=lambda t: (t[0], t[1])):
        if isinstance(step, ResendDef):
            known = client.acked.get(step.request_id)
            rejected = known is None and step.request_id in client.rejected
            if number in client.actions_done or (known is None and not rejected):
                continue  # never acknowledged: the input step itself sends it again
            await process.sleep_until(at_s)
            original = by_request[step.request_id]
            handle = await _send(host, conversation, original)
            client.actions_done.add(number)
            if handle is None:
                continue
            if known is None:
                client.acked[step.request_id] = handle.id  # refused before, accepted now
            elif handle.id != known:
                client.remapped.append((step.request_id, known, handle.id))
            world.record("resend", step.request_id, handle.id)
            continue
        if isinstance(step, ActionDef):
            if number in client.actions_done:
                continue
            await process.sleep_until(at_s)
            if step.kind == "abandon":
                await conversation.abandon(reason="client abandon")
            else:
                await conversation.abort(reason="client abort")
            client.actions_done.add(number)
            world.record("action", step.kind, at_s)
            continue
        known = client.acked.get(step.request_id)
        if known is None and step.request_id in client.rejected:
            continue  # refused: only a ``resends`` entry sends it again
        if known is not None and known in conversation.state.submissions:
            if not scenario.client_resends:
                continue
        elif known is not None:
            client.lost_acks.append(step.request_id)
        await process.sleep_until(at_s)
        handle = await _send(host, conversation, step)
        if handle is None:
            continue
        if known is not None and handle.id != known:
            client.remapped.append((step.request_id, known, handle.id))
        client.acked[step.request_id] = handle.id
        world.record("ack", step.request_id, handle.id)


async def _send(host: Host, conversation: Conversation, spec: InputDef) -> SubmissionHandle | None:
    """Submit ``spec`` in its mode; None if the runtime refused it (``ConversationBusy``: a
    reject-mode input while a run is active), which the client records with the boundary index
    it happened at (I16: nothing the runtime wrote before that may mention the request id)."""
    try:
        return await conversation.submit(spec.content, request_id=spec.request_id, mode=spec.mode)
    except ConversationBusy:
        host.client.rejected[spec.request_id] = host.machine.next_index
        host.world.record("rejected", spec.request_id)
        return None


async def operator(host: Host, process: SimProcess, conversation: Conversation) -> None:
    """The human operator: resolves calls waiting for reconciliation, after a delay."""
    spec = host.scenario.operator
    assert spec is not None
    while True:
        # Re-scan after every resolution: a call may ask for reconciliation while the operator
        # sleeps on another, and waiting for the next commit then would miss it for ever.
        pending = conversation.pending_reconciliations()
        if not pending:
            await conversation.journal.wait_changed()
            continue
        intent = pending[0]
        await process.sleep_until(process.now() + spec.delay_s)
        if intent.result_sequence is not None:
            continue
        if spec.decision == "reject":
            await conversation.reject(intent.call_id, reason="operator rejected the call")
            host.world.record("rejected_call", intent.call_id)
            continue
        applied = host.services.effects_of(intent.call_id)
        if spec.decision == "check_ledger" and applied:
            output, is_error = f"operator confirmed: {intent.tool} was applied", False
        else:
            output, is_error = f"operator: {intent.tool} not applied, skipped", True
        await conversation.resolve(intent.call_id, output=output, is_error=is_error)
        host.world.record("resolved", intent.call_id, is_error)
