"""The real adk target: a Google ADK resumable ``App`` on a ``SqliteSessionService``, with a
scripted ``BaseLlm`` and two function tools, killed for real and resumed in a fresh process with
``run_async(..., invocation_id=...)`` -- in an environment of its own
(``sim.targets.environments``), since google-adk cannot be installed beside the other targets.

The known finding: a kill between the charge and the append of its result event resumes the
invocation, which runs the recorded function call again (same call id): the card is charged
twice and the session shows one result (I1, H1). The replay line reproduces it; the approved
charge of the human-approval flow is charged twice the same way; effects keyed by the invocation
id and the function call id sweep those points clean. A kill between ADK's confirmation request
and the tool's "requires confirmation" placeholder result loses no message of the conversation
(``sim.targets.adk.state``). The parent never imports google.adk. The venv is made once by the
fixture (skipped, with pip's one line, where it cannot be made).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from targetkit import applied_rows, just_after, runnable
from tiers import RELEASE_ENV, release

from sim.outputs.cli.main import main
from sim.targets.host import DEFAULT_TIMEOUT_S, run_point
from sim.targets.judge import judge_point
from sim.targets.protocol import Target, TargetOptions
from sim.targets.sweep import crash_at, reference_run, sweep_target, warm

CHARGE = "effect:payments.charge#"
RECEIPT = "effect:outbox.send#"


# Every test here starts ADK's children in their own venv (made once, ~30 s) and a zygote under
# it (~3 s), then about a second a point on this 2-core machine: the slow tier runs the finding,
# its fix and the point between the confirmation request and its placeholder (5-10 s each); the
# approval sweeps and the lone replay (the sweep's test replays its line too) run in a release
# check.
pytestmark = pytest.mark.slow
only_in_release = pytest.mark.skipif(
    not release(), reason=f"{RELEASE_ENV}=1 runs it: the slow tier checks the finding and its fix"
)


@pytest.fixture(scope="module")
def adk() -> Target:
    return runnable("adk")


#: The kill right after the charge, in the fault-free trace of the default mode (boundaries:
#: the user's event appended, the model's call, its event appended, then the charge).
AFTER_THE_CHARGE = "3:after"


@only_in_release
def test_the_replay_after_the_charge_shows_it_charged_twice(
    adk: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    del adk
    assert main(["target", "replay", "adk", "--schedule", AFTER_THE_CHARGE]) == 1
    said = capsys.readouterr().out
    assert "crash       3:after at effect:payments.charge#call_p1_1" in said, said
    assert "I1: charge_card is declared exactly_once" in said and "H1: " in said, said
    rows = [line.strip() for line in said.splitlines() if line.strip().endswith("[applied]")]
    applied = list(dict.fromkeys(rows))  # each violation's witness shows the ledger
    # The resumed invocation runs the function call the session recorded: the same call id.
    charges = [line for line in applied if "tool=charge_card call=call_p1_1 " in line]
    assert len(charges) == 2 and "by p1" in charges[0] and "by p2" in charges[1], applied
    assert "google.adk" not in sys.modules, "the parent imported the framework"


def test_the_sweep_finds_it_and_its_replay_line_reproduces(
    adk: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    result = sweep_target(adk, TargetOptions(), choose=just_after(CHARGE))
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"], failure.invariants
    applied = applied_rows(failure.witness)
    assert "call=call_p1_1 " in applied[0] and "by p1" in applied[0], applied
    assert "call=call_p1_1 " in applied[1] and "by p2" in applied[1], applied
    replay = f"durable-sim target replay adk --durability resumable --schedule {AFTER_THE_CHARGE}"
    assert failure.repro == replay
    figures = result.reference.outcome["figures"]
    assert isinstance(figures, dict) and figures["session_events"] == 7, figures
    # Forked from a zygote that imported what ADK imports on its first run: a refusal (a module
    # the pin lacks) would still pass, at several seconds a point.
    children = str(result.reference.outcome["children"])
    assert children.startswith("forked from a warm zygote") and "auto_flow" in children, children
    capsys.readouterr()
    assert main(failure.repro.split()[1:]) == 1
    assert "call=call_p1_1" in capsys.readouterr().out
    assert "google.adk" not in sys.modules, "the parent imported the framework"


def test_keyed_by_invocation_and_call_id_the_resume_is_deduplicated(adk: Target) -> None:
    options = TargetOptions(variant="idempotent")
    result = sweep_target(adk, options, choose=just_after(CHARGE))
    assert result.failures == [] and result.schedules == 1


@only_in_release
def test_an_approved_charge_resumed_after_its_effect_is_charged_twice(adk: Target) -> None:
    result = sweep_target(adk, TargetOptions(durability="approval"), choose=just_after(CHARGE))
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"], failure.invariants
    applied = applied_rows(failure.witness)
    assert "call=call_p1_1 " in applied[0] and "call=call_p1_1 " in applied[1], applied
    fixed = TargetOptions(durability="approval", variant="idempotent")
    assert sweep_target(adk, fixed, choose=just_after(CHARGE)).failures == []


def test_it_is_listed_with_its_environment(adk: Target, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["target", "list"]) == 0
    out = capsys.readouterr().out
    assert "adk " in out and "its own environment, made: " in out, out
    assert adk.environment is not None and "google-adk==" in adk.environment.pins[0]


#: The kill right after ADK appended its confirmation request, in the fault-free trace of the
#: approval mode (boundaries: the user's event, the model's call, its call event, the request,
#: then the tool's "requires confirmation" placeholder result, which is never appended).
AFTER_THE_REQUEST = (3, "after")


def _session(path: Path) -> list[dict[str, object]]:
    """The events ADK stored, in its order (read as JSON: the parent never imports ADK)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT event_data FROM events ORDER BY timestamp, rowid")
        return [json.loads(data) for (data,) in rows.fetchall()]
    finally:
        connection.close()


def _parts(events: list[dict[str, object]], kind: str, name: str) -> list[object]:
    """The function calls or responses (``kind``) of one name, in the session's order."""
    found = []
    for event in events:
        content = event.get("content")
        for part in content.get("parts", []) if isinstance(content, dict) else []:
            if kind in part and part[kind]["name"] == name:
                found.append(part[kind].get("response", part[kind].get("args")))
    return found


def test_a_kill_before_the_confirmation_placeholder_loses_no_message(
    adk: Target, tmp_path: Path
) -> None:
    """ADK appends its confirmation request, then the tool's placeholder result: killed between
    the two, the resumed run asks the human once, is approved once and charges once, and the
    session lacks only the placeholder, which is no message (``sim.targets.adk.state``): no I6."""
    options = TargetOptions(durability="approval", variant="idempotent")
    with warm(adk, options) as (zygote, _):
        reference = reference_run(
            adk, options, timeout_s=DEFAULT_TIMEOUT_S, zygote=zygote, keep=tmp_path / "reference"
        )
        crash = crash_at(reference, *AFTER_THE_REQUEST)
        point = run_point(adk, options, crash, keep=tmp_path / "point", zygote=zygote)
    killed = [str(b["details"]["what"]) for b in point.boundaries if b["p"] == "p1"]
    assert killed[-1].startswith("payer: call adk_request_confirmation"), killed
    fault_free = _session(tmp_path / "reference" / "sessions.sqlite")
    resumed = _session(tmp_path / "point" / "sessions.sqlite")
    for events in (fault_free, resumed):
        assert len(_parts(events, "function_call", "adk_request_confirmation")) == 1
        assert _parts(events, "function_response", "adk_request_confirmation") == [
            {"confirmed": True}
        ]
    charged = {"result": "charged 42 EUR for INV-42"}
    placeholder = {"error": "This tool call requires confirmation, please approve or reject."}
    assert _parts(fault_free, "function_response", "charge_card") == [placeholder, charged]
    assert _parts(resumed, "function_response", "charge_card") == [charged]
    assert point.state.history == reference.state.history
    assert judge_point(point, reference, adk.tools(options)).verdict == "pass"
