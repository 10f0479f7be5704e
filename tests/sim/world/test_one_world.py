"""The pieces both hosts of a world share: one table of tool operations over either host's
services, the store kinds, and the real host's self-persisting record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durable.tools import ToolContext, ToolError
from sim.world.pointlog import PointLog, read_entries, replay
from sim.world.process import SimProcess
from sim.world.services import Services
from sim.world.sqlite_services import SQLiteServices
from sim.world.stores import StoreKind, store_kind
from sim.world.tools import OPERATIONS


class _World:
    def now(self) -> float:
        return 0.0

    def record(self, kind: str, *fields: Any) -> None:
        del kind, fields


class _Machine:
    """Numbers boundaries and never crashes: enough to run an effect outside a world."""

    def __init__(self) -> None:
        self.world = _World()
        self.labels: list[str] = []

    def before(self, process: Any, label: str) -> int:
        self.labels.append(label)
        return len(self.labels) - 1

    def after(self, process: Any, index: int, label: str) -> None:
        del process, index, label


class _Process:
    def __init__(self) -> None:
        self.machine = _Machine()

    def now(self) -> float:
        return 0.0


def _as_sim_process(process: _Process) -> SimProcess:
    """The stand-in where a ``SimProcess`` is asked for: ``Services.effect`` reads only its
    ``machine``, so a test runs an effect without a world."""
    return process  # type: ignore[return-value]  # duck-typed, as the docstring says


CALLS: list[tuple[str, dict[str, Any], str, int]] = [
    ("workspace.read", {"path": "a.txt"}, "k1", 1),
    ("workspace.read", {"path": "missing.txt"}, "k2", 1),
    ("workspace.append_line", {"path": "a.txt", "line": "x"}, "k3", 1),
    ("workspace.append_line", {"path": "a.txt", "line": "x"}, "k3", 1),
    ("payments.charge", {"amount": 40}, "k4", 2),
    ("payments.charge", {"amount": 40}, "k4", 2),  # deduplicated
    ("payments.charge", {"amount": 7}, "k5", 1),  # fenced: a lower epoch than seen
    ("outbox.send", {"to": "a@example.com", "subject": "hi"}, "k6", 2),
    ("counter.increment", {}, "k7", 2),
    ("counter.increment", {}, "k8", 2),
]


def _run(services: Any) -> tuple[list[str], list[tuple[Any, ...]], list[str]]:
    process = _Process()
    outputs: list[str] = []
    for n, (op, arguments, key, epoch) in enumerate(CALLS):
        operation = OPERATIONS[op]
        ctx = ToolContext(
            conversation_id="c1",
            call_id=f"call-{n}",
            idempotency_key=key,
            epoch=epoch,
            attempt="first",
        )
        apply = operation.effect(arguments, ctx)
        try:
            outputs.append(services.effect(process, operation.service, operation.op, ctx, apply))
        except ToolError as exc:
            outputs.append(f"error: {exc}")
    ledger = services.ledger if isinstance(services, Services) else services.ledger()
    rows = [
        (e.service, e.op, e.call_id, e.key, e.epoch, e.boundary, e.applied, e.note) for e in ledger
    ]
    return outputs, rows, process.machine.labels


def test_both_hosts_services_run_the_same_operations_alike(tmp_path: Path) -> None:
    files = {"a.txt": "first"}
    memory = Services(files=dict(files))
    sqlite = SQLiteServices.create(tmp_path / "services.sqlite", files)
    try:
        assert _run(memory) == _run(sqlite)
        assert memory.files == sqlite.files()
        assert [e.call_id for e in memory.effects_of("call-2")] == ["call-2"]
        assert [e.call_id for e in sqlite.effects_of("call-2")] == ["call-2"]
    finally:
        sqlite.close()
    outputs, rows, labels = _run(Services(files=dict(files)))
    assert outputs[1] == "error: no such file: missing.txt"
    assert outputs[5] == "charged 40" and rows[5][-1] == "deduplicated"
    assert outputs[6].startswith("error: stale fencing token 1 < 2")
    assert labels[4] == "tool.effect:payments.charge#call-4"


def test_store_kinds_know_what_the_simulator_can_inject() -> None:
    assert store_kind("file") is StoreKind.FILE
    assert StoreKind.FILE == "file"  # type: ignore[comparison-overlap]  # a member is its text
    assert StoreKind.FILE.can_inject("power") and StoreKind.FILE.can_inject("storage")
    assert StoreKind.SQLITE.can_inject("process")
    assert StoreKind.SQLITE.can_inject("power") and StoreKind.SQLITE.can_inject("storage")
    with pytest.raises(ValueError, match="unknown store kind 'tape'"):
        store_kind("tape")


def test_the_point_log_replays_what_its_containers_recorded(tmp_path: Path) -> None:
    path = tmp_path / "world.jsonl"
    log = PointLog(path)
    acked, calls, done = log.dict("acked"), log.list("calls"), log.set("done")
    acked["r1"] = "sub-1"
    acked["r1"] = "sub-2"
    calls.append(("model", 1))
    done.add(3)
    with path.open("ab") as f:
        f.write(b'{"n": "calls", "op": "app')  # a line cut short by a kill
    again = PointLog(path)
    assert again.dict("acked") == {"r1": "sub-2"}
    assert again.list("calls") == [("model", 1)]
    assert again.set("done") == {3}
    assert len(read_entries(path)) == 4
    assert replay(read_entries(path))["acked"] == {"r1": "sub-2"}


def _undo_run(services: Any) -> list[str]:
    """Append to a file and to a new one, then undo both twice (the second undo of each under
    the same compensation key, as a re-run after a crash): the service dedupes it."""
    process = _Process()
    operation = OPERATIONS["workspace.append_line"]
    undoing = operation.undoing
    assert undoing is not None
    outputs: list[str] = []
    pre_images = []
    for n, path in enumerate(("a.txt", "new.txt")):
        ctx = ToolContext(
            conversation_id="c1",
            call_id=f"call-{n}",
            idempotency_key=f"k{n}",
            epoch=1,
            attempt="first",
        )
        pre_images.append(undoing.capture(services.view(), {"path": path, "line": "x"}, ctx))
        outputs.append(
            services.effect(
                process, "workspace", "append_line", ctx, operation.effect({"path": path}, ctx)
            )
        )
    for n in (1, 1, 0, 0):
        ctx = ToolContext(
            conversation_id="c1",
            call_id=f"call-{n}.undo",
            idempotency_key=f"k{n}:undo",
            epoch=1,
            attempt="first",
        )
        apply = undoing.undo({}, pre_images[n], ctx)
        outputs.append(services.effect(process, "workspace", undoing.op, ctx, apply))
    return outputs


def test_both_hosts_restore_a_pre_image_once(tmp_path: Path) -> None:
    files = {"a.txt": "first"}
    memory = Services(files=dict(files))
    sqlite = SQLiteServices.create(tmp_path / "services.sqlite", files)
    try:
        outputs = _undo_run(memory)
        assert outputs == _undo_run(sqlite)
        assert memory.files == sqlite.files() == files  # new.txt deleted again
        assert outputs[2:] == [
            "restored new.txt",
            "new.txt already restored",
            "restored a.txt",
            "a.txt already restored",
        ]
        notes = [(e.op, e.applied, e.note) for e in memory.ledger[2:]]
        assert notes == [(e.op, e.applied, e.note) for e in sqlite.ledger()[2:]]
        assert [applied for _, applied, _ in notes] == [True, False, True, False]
    finally:
        sqlite.close()


def test_both_hosts_refund_a_charge_once(tmp_path: Path) -> None:
    """A charge's compensation refunds it in full, once per compensation key; a charge that never
    landed has nothing to refund."""
    operation = OPERATIONS["payments.charge"]
    undoing = operation.undoing
    assert undoing is not None
    memory = Services()
    sqlite = SQLiteServices.create(tmp_path / "services.sqlite", {})
    try:
        outputs = []
        for services in (memory, sqlite):
            process = _as_sim_process(_Process())
            ctx = ToolContext(
                conversation_id="c1",
                call_id="call-1",
                idempotency_key="k1",
                epoch=1,
                attempt="first",
            )
            pre = undoing.capture(services.view(), {"amount": 30}, ctx)
            services.effect(
                process, "payments", "charge", ctx, operation.effect({"amount": 30}, ctx)
            )
            ran = []
            for charge_key, key in (("k1", "k1:undo"), ("k1", "k1:undo"), ("k9", "k9:undo")):
                undo_ctx = ToolContext(
                    conversation_id="c1", call_id="u", idempotency_key=key, epoch=1, attempt="first"
                )
                apply = undoing.undo({}, {**pre, "charge_key": charge_key}, undo_ctx)
                ran.append(services.effect(process, "payments", undoing.op, undo_ctx, apply))
            outputs.append(ran)
        assert (
            outputs[0]
            == outputs[1]
            == [
                "refunded 30",
                "k1 already refunded",
                "nothing charged under k9",
            ]
        )
        assert memory.refunds == {"k1": 30} and sqlite.view().refunded("k1") == 30
    finally:
        sqlite.close()
