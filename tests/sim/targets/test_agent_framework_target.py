"""The agent-framework target: a Microsoft Agent Framework workflow (dispatcher, fan-out to a
charge and a receipt draft, fan-in to the receipt's sending) checkpointed by
``FileCheckpointStorage``, killed for real and resumed from the latest checkpoint in a fresh
interpreter.

The known duplicate must be found: an executor's effect is durable before the checkpoint at its
superstep's end, and a restore re-runs the whole superstep, so a kill between the two applies the
effect twice while the checkpoints record one result. Effects keyed by the workflow name and the
call id the checkpointed message carries must sweep the same points clean.

The fast tests run the workflow in this process (no kill, no boundary wrapped) to show what the
storage does with a checkpoint it cannot decode: it refuses it whole, and ``get_latest`` skips it
without a word, so a restart resumes an older checkpoint and re-runs what came after it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
from targetkit import applied_rows, just_after
from testkit import needs

from sim.targets.boundaries import TRACE_NAME, Boundaries, TraceLog
from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.ledger import LEDGER_NAME, Ledger
from sim.targets.protocol import ChildContext, TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import sweep_target

pytestmark = [
    needs(
        "agent_framework",
        reason="needs the agent-framework extra: pip install -e '.[agent-framework]'",
    ),
]

CHARGE = "effect:payments.charge#"
RECEIPT = "effect:outbox.send#"
LAST_SAVE = "checkpoint.save#4"


@pytest.mark.slow
def test_a_kill_before_the_superstep_checkpoint_reruns_the_effect() -> None:
    result = sweep_target(
        get_target("agent-framework"), TargetOptions(), choose=just_after(CHARGE, RECEIPT)
    )
    assert [c["verdict"] for c in result.matrix] == ["safety", "safety"]
    after_charge, after_receipt = result.failures
    assert after_charge.invariants == ["I1", "H1"] == after_receipt.invariants
    # One call id (it travels in the checkpointed order), applied by the killed process and
    # again by the one that restored the superstep.
    for failure, call in ((after_charge, "call_p1_1"), (after_receipt, "call_p1_2")):
        applied = applied_rows(failure.witness)
        assert [("by p1" in applied[0]), ("by p2" in applied[1])] == [True, True]
        assert f"call={call} " in applied[0] and f"call={call} " in applied[1]
    charge = after_charge.schedule.split(":")[0]
    repro = f"durable-sim target replay agent-framework --schedule {charge}:after"
    assert after_charge.repro == repro


@pytest.mark.slow
def test_a_kill_after_the_last_checkpoint_loses_the_answer() -> None:
    """Outputs are not checkpointed: the last checkpoint has nothing pending, so the restart has
    nothing to resume and no answer to give -- unless the workflow keeps its answer in the
    shared state, as the fixed (``idempotent``) variant does."""
    target = get_target("agent-framework")
    result = sweep_target(target, TargetOptions(), choose=just_after(LAST_SAVE))
    (failure,) = result.failures
    assert failure.invariants == ["I5"]
    assert failure.actual == "None"
    fixed = sweep_target(target, TargetOptions(variant="idempotent"), choose=just_after(LAST_SAVE))
    assert fixed.verdicts["pass"] == 1, [f.explanation for f in fixed.failures]


@pytest.mark.slow
def test_effects_keyed_by_workflow_and_call_id_sweep_clean() -> None:
    result = sweep_target(
        get_target("agent-framework"),
        TargetOptions(variant="idempotent"),
        choose=just_after(CHARGE, RECEIPT),
    )
    assert result.schedules == 2
    assert result.verdicts["pass"] == 2, [f.explanation for f in result.failures]


def test_options_default_and_refuse() -> None:
    target = get_target("agent-framework")
    options = check_options(target, TargetOptions())
    assert (options.durability, options.saver, options.resume) == ("superstep", "file", "latest")
    for bad in (
        TargetOptions(variant="step"),
        TargetOptions(durability="sync"),
        TargetOptions(saver="sqlite"),
        TargetOptions(app=parse_app("t", AppArgs(app="x:f", effects=("f",)))),
    ):
        with pytest.raises(TargetError):
            check_options(target, bad)


def test_the_target_module_does_not_import_the_library() -> None:
    code = "import sys, sim.targets.agent_framework; print('agent_framework' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _context(point_dir: Path, process: str, variant: str = "as_is") -> ChildContext:
    if not (point_dir / LEDGER_NAME).exists():
        Ledger.create(point_dir / LEDGER_NAME).close()
    options = check_options(get_target("agent-framework"), TargetOptions(variant=variant))
    log = TraceLog(point_dir / TRACE_NAME)
    return ChildContext(
        point_dir, process, options, Boundaries(log, process, None), Ledger(point_dir / LEDGER_NAME)
    )


def _checkpoints(point_dir: Path) -> dict[int, Path]:
    """Each readable checkpoint file of the point by its superstep (one run: one per superstep)."""
    found: dict[int, Path] = {}
    for path in (point_dir / "checkpoints").glob("*.json"):
        try:
            found[json.loads(path.read_text())["iteration_count"]] = path
        except ValueError:
            continue
    return found


def _disallowed(path: Path) -> None:
    """Put a value of a type the restricted unpickler refuses into the checkpoint's state."""
    data = json.loads(path.read_text())
    pickled = base64.b64encode(pickle.dumps(Fraction(1, 3))).decode("ascii")
    data["state"]["note"] = {"__pickled__": pickled, "__type__": "fractions:Fraction"}
    path.write_text(json.dumps(data))


def _truncated(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


@pytest.mark.parametrize("damage", [_disallowed, _truncated], ids=["disallowed", "truncated"])
def test_a_checkpoint_the_storage_cannot_decode_is_refused_whole_and_skipped(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    from agent_framework import FileCheckpointStorage
    from agent_framework.exceptions import WorkflowCheckpointException  # the extra's own

    from sim.targets.agent_framework.workflow import (
        WORKFLOW_NAME,
        allowed_types,
        build_workflow,
        start_or_resume,
    )

    first = _context(tmp_path, "p1")
    assert asyncio.run(start_or_resume(first)) == "start"
    files = _checkpoints(tmp_path)
    assert sorted(files) == [0, 1, 2, 3]
    last = files[3].stem
    damage(files[3])
    storage = FileCheckpointStorage(
        tmp_path / "checkpoints", allowed_checkpoint_types=allowed_types(first.options)
    )
    # Refused whole: loading it raises, and a resume from it runs nothing and saves nothing.
    with pytest.raises(WorkflowCheckpointException):
        asyncio.run(storage.load(last))
    second = _context(tmp_path, "p2")
    workflow = build_workflow(second, storage)
    with pytest.raises(WorkflowCheckpointException):
        asyncio.run(workflow.run(checkpoint_id=last, checkpoint_storage=storage))
    assert len(second.ledger.rows()) == 2
    assert len(list((tmp_path / "checkpoints").glob("*.json"))) == 4
    # But get_latest skips it (a logged warning), so "resume the latest" resumes superstep 2,
    # whose fan-in is still pending, and sends the receipt a second time.
    latest = asyncio.run(storage.get_latest(workflow_name=WORKFLOW_NAME))
    assert latest is not None and latest.iteration_count == 2
    assert asyncio.run(start_or_resume(_context(tmp_path, "p3"))) == "resume"
    sends = [r for r in second.ledger.rows() if r.tool == "send_receipt" and r.applied]
    assert [r.process for r in sends] == ["p1", "p3"]


def test_unregistered_message_types_leave_only_the_last_checkpoint(tmp_path: Path) -> None:
    """Without ``allowed_checkpoint_types``, ``save`` refuses every checkpoint holding one of the
    workflow's messages; the framework logs a warning and runs on, undurable."""
    from sim.targets.agent_framework.workflow import start_or_resume

    ctx = _context(tmp_path, "p1", variant="unregistered")
    assert asyncio.run(start_or_resume(ctx)) == "start"
    assert sorted(_checkpoints(tmp_path)) == [3]
    assert [r.tool for r in ctx.ledger.rows()] == ["charge_card", "send_receipt"]
