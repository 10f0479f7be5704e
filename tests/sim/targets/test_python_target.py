"""The ``python`` target on a user's own program, run unmodified (``examples/orders_job``):
a batch job that keeps its progress in SQLite and charges each order through a function the
user declares as an effect. Its first version charges an order twice after a crash between the
charge and the commit that records it; its keyed fix sweeps clean; a program that refuses to
resume is a liveness finding; bad options are one line each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from targetkit import app_options
from testkit import REPO

from sim.explore.recording import ScenarioSweep
from sim.outputs.cli.main import main
from sim.outputs.report.markdown import app_notes
from sim.targets.host import run_point
from sim.targets.judge import judge_point
from sim.targets.kit.landing import CALLER_NOTE, TOOL_NOTE, undeclared_tools
from sim.targets.kit.options import app_spec, check_options
from sim.targets.kit.spec import AppArgs
from sim.targets.offline import is_local
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.shapes import TraceRow
from sim.targets.sweep import crash_at, reference_run, sweep_target

APPS = REPO / "examples" / "orders_job"


def _sweep(app: str, *, preempt_s: float = 0.0, **kwargs: Any) -> ScenarioSweep:
    """Sweep ``FILE.py:FUNCTION`` of the apps (``FILE.py`` alone: its ``main``)."""
    app = app if ":" in app else f"{app}:main"
    options = app_options("python", f"{APPS / app}", effects=["charge"], preempt_s=preempt_s)
    return sweep_target(get_target("python"), options, **kwargs)


def test_a_charge_the_commit_did_not_record_is_charged_again() -> None:
    result = _sweep("orders.py")
    assert result.reference.labels == [
        "effect:app.charge#charge-1",
        "sqlite.commit#1",
        "effect:app.charge#charge-2",
        "sqlite.commit#2",
    ]
    failing = sorted(f.schedule for f in result.failures)
    assert failing == ["0:after:process", "1:before:process", "2:after:process", "3:before:process"]
    assert {f.invariant for f in result.failures} == {"I1"}
    first = next(f for f in result.failures if f.schedule == "1:before:process")
    applied = [w for w in first.witness if w.startswith("ledger#") and w.endswith("[applied]")]
    assert len(applied) == 3 and "'order-1', 19" in applied[0] and "'order-1', 19" in applied[1]
    assert first.repro.startswith("durable-sim target replay python --app ")
    assert first.repro.endswith("--effect charge=exactly_once --schedule 1:before")


def test_progress_in_a_json_file_has_its_close_and_rename_as_boundaries() -> None:
    """The same job keeping its progress in ``done.json`` (a temporary, then ``os.replace``):
    a kill anywhere from after a charge to before the rename that records it charges again --
    before the temporary's ``close`` too, which loses what Python buffered."""
    result = _sweep("orders_json.py")
    assert result.reference.labels[:3] == [
        "effect:app.charge#charge-1",
        "file.close#1",
        "os.replace#1",
    ]
    failing = sorted(f.schedule for f in result.failures)
    first = ["0:after", "1:before", "1:after", "2:before", "3:after", "4:before", "4:after"]
    assert failing == sorted(f"{p}:process" for p in [*first, "5:before"])


#: Every point where the first version charges twice (the first test): after each charge,
#: before the commit that records it.
CHARGED_TWICE = [(0, "after"), (1, "before"), (2, "after"), (3, "before")]
#: The first order's window of them: after its charge, before its commit.
FIRST_WINDOW = CHARGED_TWICE[:2]


def test_the_keyed_fix_sweeps_clean() -> None:
    result = _sweep("orders.py:main_keyed", points=CHARGED_TWICE)
    assert result.schedules == 4 and not result.failures, result.failures


def test_a_graceful_shutdown_is_what_preemption_needs() -> None:
    """Preempted (SIGTERM, then SIGKILL 5 s later) in the first order's window, the job that
    finishes the order in hand on SIGTERM passes; killed there, it charges twice like the first
    version; and the first version, which has no SIGTERM handler, charges twice when preempted
    there too. (Outside the windows a kill charges nothing twice: the first test's sweep.)"""
    window = ["0:after:process", "1:before:process"]
    graceful = _sweep("orders.py:main_graceful", preempt_s=5.0, points=FIRST_WINDOW)
    assert graceful.name == "python+preempt=5s" and graceful.schedules == 2
    assert not graceful.failures, graceful.failures
    killed = _sweep("orders.py:main_graceful", points=FIRST_WINDOW)
    assert sorted(f.schedule for f in killed.failures) == window
    plain = _sweep("orders.py", preempt_s=5.0, points=FIRST_WINDOW)
    assert sorted(f.schedule for f in plain.failures) == window
    assert plain.failures[0].repro.count("--preempt 5") == 1
    assert any("SIGTERM, then SIGKILL" in line for line in plain.failures[0].timeline)


def test_a_program_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    """Preempted right after its first charge with a 0.3 s grace, the stubborn job (SIGTERM
    ignored, a second per order) is ended by the SIGKILL: it never reaches its end, the next
    process finishes the batch, and its keys make that clean."""
    target = get_target("python")
    app = f"{APPS / 'orders.py'}:main_stubborn"
    options = app_options("python", app, effects=["charge"], preempt_s=0.3)
    reference = reference_run(target, options, timeout_s=60.0)
    run = run_point(target, options, crash_at(reference, 0, "after"))
    assert [c["how"] for c in run.crashes] == ["preempt"] and run.error is None
    assert run.actions == {"p2": "returned"}  # p1 never ended: the SIGKILL took it
    assert judge_point(run, reference, target.tools(options)).verdict == "pass"


def test_a_program_that_refuses_to_resume_does_not_finish() -> None:
    """Killed after the first order's commit, the strict job's next run raises: the second
    order is never charged (I1: fewer charges than declared) and the run does not finish (I7,
    with what the program raised as its pending work): findings on the app, not a harness
    error."""
    result = _sweep("orders.py:main_strict", points=[(1, "after")])
    (failure,) = result.failures
    assert failure.verdict == "safety" and failure.invariants == ["I1", "I7"]
    assert any("the program raised RuntimeError: a half-done batch" in w for w in failure.witness)


def test_sys_exit_0_is_a_return_and_another_status_a_failure() -> None:
    """A program that ends with ``sys.exit``: 0 passes as a return (the fault-free run, and the
    points before the first order is recorded or after the second); 1, from a run that found the
    batch half done, is the program's failure (I7 with the status), never the harness's."""
    result = _sweep("orders.py:main_script")
    failing = sorted(f.schedule for f in result.failures)
    assert failing == [f"{p}:process" for p in ("1:after", "2:after", "2:before", "3:before")]
    for failure in result.failures:
        assert failure.verdict != "error" and "I7" in failure.invariants
        said = [failure.explanation, *failure.witness]
        assert any("the program raised SystemExit: 1" in w for w in said), said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (AppArgs(effects=("charge",)), "--effect need --app"),
        (AppArgs(app="orders.py", effects=("charge",)), "FILE.py:FUNCTION or MODULE:FUNCTION"),
        (AppArgs(app="no/such.py:main", effects=("charge",)), "no file no/such.py"),
        (AppArgs(app="my-app:main", effects=("charge",)), "is not a module name"),
        (AppArgs(app="orders:main", effects=("charge=twice",)), "the policy is one of"),
        (AppArgs(app="orders:main", effects=("charge,charge",)), "declared twice"),
        (AppArgs(app="orders:main", effects=("charge,key=a-b",)), "is not a parameter name"),
        (AppArgs(app="orders:main", effects=("pay:ments:x",)), "is not a module name"),
        (AppArgs(app="orders:main", http=("FETCH https://x.example/a",)), "METHOD URL"),
        (AppArgs(app="orders:main", effects=("charge,retries=3",)), "the policy is one of"),
        (AppArgs(app="orders:main", http=("GET https://x.example/a,retries=3",)), "not an option"),
        (AppArgs(app="orders:main", effects=("charge",), deps="d.json"), "d.json: FileNotFound"),
    ],
)
def test_bad_app_words_are_refused_in_one_line(args: AppArgs, message: str) -> None:
    with pytest.raises(TargetError, match=message) as caught:
        app_spec(get_target("python"), args)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (TargetOptions(), "--app FILE.py:FUNCTION"),
        (TargetOptions(app=app_spec(get_target("python"), AppArgs(app="o:main"))), "needs its"),
        (TargetOptions(variant="idempotent"), "--app FILE.py:FUNCTION"),
    ],
)
def test_bad_options_are_refused_in_one_line(options: TargetOptions, message: str) -> None:
    with pytest.raises(TargetError, match=message) as caught:
        check_options(get_target("python"), options)
    assert "\n" not in str(caught.value)


def test_a_flag_the_target_does_not_take_is_named() -> None:
    spec = app_spec(
        get_target("python"),
        AppArgs(app="o:main", effects=("c",), thread="t-1"),
    )
    with pytest.raises(TargetError, match="python: --thread is not for its --app"):
        check_options(get_target("python"), TargetOptions(app=spec))


def test_an_effect_the_program_does_not_have_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    app = f"{APPS / 'orders.py'}:main"
    status = main(["target", "sweep", "python", "--app", app, "--effect", "refund"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1
    assert "--effect refund: durable_sim_app has no attribute 'refund'" in err


def test_undeclared_tools_are_those_whose_calls_landed_no_declared_effect() -> None:
    def note(**fields: str) -> TraceRow:
        return {"t": "note", "p": "p1", **fields}

    rows: list[TraceRow] = [
        note(what=TOOL_NOTE, tool="lookup"),
        note(what=TOOL_NOTE, tool="refund_order"),
        note(what=CALLER_NOTE, effect="refund", tool="refund_order"),
        note(what=TOOL_NOTE, tool="lookup"),
        {"t": "b", "p": "p1", "label": "effect:app.refund#refund-1"},
    ]
    assert undeclared_tools(rows) == {"lookup": 2}
    (line,) = app_notes({"reference_outcome": {"undeclared_effects": {"lookup": 2}}})
    assert line.startswith("undeclared effects: lookup (2 calls)")
    assert app_notes({"reference_outcome": {}}) == []


CALLS_HOME = """
import urllib.request


def charge(order):
    return order


def main():
    charge("order-1")
    urllib.request.urlopen("http://api.payments.example:8080/v1/charges", timeout=5)
"""


def test_an_app_that_calls_the_network_is_one_line_naming_the_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Sweeps run offline: the child refuses a host that is not this machine and notes it,
    and the sweep says which host the app tried -- one line, exit 2, no traceback."""
    program = tmp_path / "calls_home.py"
    program.write_text(CALLS_HOME, encoding="utf-8")
    status = main(["target", "sweep", "python", "--app", f"{program}:main", "--effect", "charge"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "tried to reach api.payments.example:8080" in err and "offline" in err


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("::1", True),
        (None, True),
        ("0.0.0.0", True),
        ("api.openai.com", False),
        ("10.0.0.1", False),
        (b"example.com", False),
    ],
)
def test_only_this_machine_is_local(host: object, local: bool) -> None:
    assert is_local(host) is local


WRITES_BY_HAND = """
import os


def charge(order_id, idempotency_key=None):
    return order_id


def main():
    if os.path.exists("done.log"):
        done_fd = os.open("done.log", os.O_RDONLY)
        done = os.read(done_fd, 4096).split()
        os.close(done_fd)
    else:
        done = []
    log = os.open("done.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for order_id in ("order-1", "order-2"):
        if order_id.encode() in done:
            continue
        charge(order_id)
        os.write(log, order_id.encode() + b"\\n")
        os.write(1, b"recorded\\n")
        os.fsync(log)
    os.close(log)
    return "done"
"""


def test_an_os_write_to_a_file_opened_for_writing_is_a_boundary(tmp_path: Path) -> None:
    """A job that records its progress with ``os.open`` and ``os.write``: each write to the
    file is ``os.write#n`` (a write to stdout, or a file opened to read, is none), and a kill
    right before the write that records a charge charges it again; right after, it does not."""
    program = tmp_path / "by_hand.py"
    program.write_text(WRITES_BY_HAND, encoding="utf-8")
    options = app_options("python", f"{program}:main", effects=["charge"])

    def points(labels: list[str]) -> list[tuple[int, str]]:
        return [(labels.index("os.write#1"), "before"), (labels.index("os.write#1"), "after")]

    result = sweep_target(get_target("python"), options, choose=points)
    assert result.reference.labels == [
        "effect:app.charge#charge-1",
        "os.write#1",
        "os.fsync#1",
        "effect:app.charge#charge-2",
        "os.write#2",
        "os.fsync#2",
    ]
    assert [f.schedule for f in result.failures] == ["1:before:process"]
    assert result.failures[0].invariant == "I1"
