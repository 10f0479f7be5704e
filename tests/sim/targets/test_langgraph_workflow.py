"""A user's LangGraph *workflow* graph, swept unmodified through ``--app``: a ``TypedDict`` state
without messages, no model, its services in a module of their own, and a human approval by
``interrupt()`` answered from ``--answers`` (``sim/targets/langgraph/app.py``).

The refund desk (``examples/langgraph_refund_desk``) refunds twice after a kill just after the
payment provider's refund; its keyed version passes there. An interrupt is answered once per
interrupt id across a kill right after the answer was sent, a factory is given the scripted model
only when it needs one, and a thread left waiting at an interrupt is not finished. Skipped where
the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from targetkit import app_options
from testkit import REPO, needs

from sim.outputs.cli.main import main
from sim.targets.boundaries import notes_of
from sim.targets.host import Crash, PointRun, run_point
from sim.targets.judge import judge_point
from sim.targets.protocol import TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.shapes import as_int
from sim.targets.sweep import reference_run, sweep_target
from sim.world.faults import When

pytestmark = [
    needs("langgraph", reason="needs the langgraph extra: pip install -e '.[langgraph]'"),
]

DESK = REPO / "examples" / "langgraph_refund_desk"
REFUND = "effect:app.services:PAYMENTS.refund#"
EFFECTS = ("services:PAYMENTS.refund", "services:Mailer.send")
TIMEOUT_S = 60.0

#: A graph that asks two different people in turn: each interrupt's answer lands in the state
#: and the booked effect, so an answer given to the wrong question shows in the judge's I5/I6.
TWO_QUESTIONS = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


def book(manager: str, finance: str, idempotency_key: str | None = None) -> str:
    return f"booked {manager}/{finance}"


class State(TypedDict, total=False):
    order_id: str
    manager: str
    finance: str
    booked: str


def build_graph() -> StateGraph:
    def ask_manager(state: State) -> dict[str, str]:
        return {"manager": interrupt("manager, approve?")}

    def ask_finance(state: State) -> dict[str, str]:
        return {"finance": interrupt("finance, approve?")}

    def book_it(state: State) -> dict[str, str]:
        return {"booked": book(state["manager"], state["finance"])}

    graph = StateGraph(State)
    graph.add_node("ask_manager", ask_manager)
    graph.add_node("ask_finance", ask_finance)
    graph.add_node("book_it", book_it)
    graph.add_edge(START, "ask_manager")
    graph.add_edge("ask_manager", "ask_finance")
    graph.add_edge("ask_finance", "book_it")
    graph.add_edge("book_it", END)
    return graph
"""


def _desk(factory: str = "build_graph", **words: str) -> TargetOptions:
    """The refund desk's sweep options: ``durable-sim target sweep langgraph --app
    graph.py:FACTORY --effect ... --input input.json --answers answers.json``."""
    given: dict[str, Any] = {"input": str(DESK / "input.json")}
    given |= {"answers": str(DESK / "answers.json")} | words
    given = {k: v for k, v in given.items() if v}
    return app_options(
        "langgraph", f"{DESK / 'graph.py'}:{factory}", effects=EFFECTS, durability="sync", **given
    )


@pytest.fixture(scope="module")
def desk_reference() -> PointRun:
    """The as-is refund desk's fault-free run, shared by the tests that judge against it."""
    return reference_run(get_target("langgraph"), _desk(), timeout_s=TIMEOUT_S)


def _after_the_refund(labels: list[str]) -> list[tuple[int, str]]:
    """Just after the payment provider's refund, before LangGraph saved the node's writes (by
    label, so a longer trace moves no test)."""
    refund = next(i for i, label in enumerate(labels) if label.startswith(REFUND))
    return [(refund, "after")]


def test_a_workflow_graph_without_a_model_runs_and_is_judged_on_its_values(
    desk_reference: PointRun,
) -> None:
    """No --model-script, a factory without a parameter: the graph runs, the human's approval
    is sent, and the judge's history, input and answer are the state's values as canonical
    JSON (no id, no time)."""
    state = desk_reference.state
    assert state.finished and not state.pending
    assert not any(label.startswith("model.call") for label in desk_reference.labels)
    final = {
        "amount_eur": 80,
        "approved": True,
        "notified": True,
        "order_id": "A-17",
        "refund_id": "re_A-17_80",
    }
    assert state.answer == json.dumps(final, sort_keys=True)
    assert state.history == [f"{k}: {json.dumps(v)}" for k, v in sorted(final.items())]
    assert state.inputs == ['{"order_id": "A-17"}']
    assert [row.tool for row in desk_reference.ledger] == list(EFFECTS)


def _refund_failure(reference: PointRun) -> Any:
    """The as-is desk swept just after the refund: one failure, I1 on the refund."""
    first = sweep_target(
        get_target("langgraph"),
        _desk(),
        choose=_after_the_refund,
        reference=reference,
        timeout_s=TIMEOUT_S,
    )
    assert [c["verdict"] for c in first.matrix] == ["safety"]
    (failure,) = first.failures
    assert failure.invariant == "I1"
    assert "services:PAYMENTS.refund is declared exactly_once" in failure.explanation
    return failure


def test_the_refund_desk_refunds_twice_after_the_refund(desk_reference: PointRun) -> None:
    failure = _refund_failure(desk_reference)
    assert "--answers " in failure.repro and "--model-script" not in failure.repro


@pytest.mark.slow
def test_the_replay_line_reproduces_the_double_refund(
    desk_reference: PointRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """The failure's repro line, run as a command: the same double refund, exit status 1."""
    repro = _refund_failure(desk_reference).repro
    capsys.readouterr()
    assert main(shlex.split(repro)[1:]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("verdict     safety\n")
    assert "I1: services:PAYMENTS.refund is declared exactly_once, but the app ledger" in printed


@pytest.mark.slow  # 11 s: the fast tier has the as-is desk's finding
def test_the_keyed_refund_desk_passes_there_on_its_own_thread() -> None:
    """The fix: keys made of the thread (``--thread``) and the order, which the provider
    deduplicates when LangGraph runs the refund node again."""
    target = get_target("langgraph")
    options = _desk("build_keyed_graph", thread="desk-7")
    reference = reference_run(target, options, timeout_s=TIMEOUT_S)
    assert [row.key for row in reference.ledger] == ["desk-7:A-17:refund", "desk-7:A-17:notify"]
    keyed = sweep_target(
        target, options, choose=_after_the_refund, reference=reference, timeout_s=TIMEOUT_S
    )
    assert [c["verdict"] for c in keyed.matrix] == ["pass"], keyed.failures


def _answered(run: PointRun) -> list[tuple[str, str, int]]:
    """The answers a run sent: (process, interrupt id, k), in order."""
    return [
        (str(n["p"]), str(n["interrupt"]), as_int(n["k"])) for n in notes_of(run.rows, "answered")
    ]


def _after_the_last_answer(reference: PointRun) -> int:
    """The first boundary after the last answer's note: the process dies with the answer sent
    to LangGraph but not yet saved by it."""
    last_note = max(i for i, row in enumerate(reference.rows) if row.get("what") == "answered")
    later = [row for row in reference.rows[last_note:] if row["t"] == "b"]
    return reference.labels.index(str(later[0]["label"]))


@pytest.mark.parametrize(
    ("saver", "durability"),
    [
        ("sqlite", "sync"),
        pytest.param("aiosqlite", "sync", marks=pytest.mark.slow),
        pytest.param("sqlite", "async", marks=pytest.mark.slow),
        pytest.param("sqlite", "exit", marks=pytest.mark.slow),
    ],
)
def test_each_interrupt_is_answered_once_per_id_across_a_kill(
    tmp_path: Path, saver: str, durability: str
) -> None:
    """Two questions, two different answers; a kill right after the second answer was sent.
    The restarted process finds the same interrupt (LangGraph keeps its id) and gives it the same
    answer -- not the first one again, nor none -- and the run finishes as the fault-free one."""
    (tmp_path / "two_questions.py").write_text(TWO_QUESTIONS, encoding="utf-8")
    (tmp_path / "input.json").write_text('{"order_id": "A-17"}', encoding="utf-8")
    (tmp_path / "answers.json").write_text('["yes, manager", "yes, finance"]', encoding="utf-8")
    target = get_target("langgraph")
    options = app_options(
        "langgraph",
        f"{tmp_path / 'two_questions.py'}:build_graph",
        effects=("book",),
        durability=durability,
        input=str(tmp_path / "input.json"),
        answers=str(tmp_path / "answers.json"),
    )
    options = replace(options, saver=saver)
    reference = reference_run(target, options, timeout_s=TIMEOUT_S)
    assert reference.state.history[1:3] == ['finance: "yes, finance"', 'manager: "yes, manager"']
    index = _after_the_last_answer(reference)
    run = run_point(target, options, Crash(index, When.BEFORE, reference.labels[index]))
    verdict = judge_point(run, reference, target.tools(options))
    assert verdict.verdict == "pass", verdict.violations
    answered = _answered(run)
    before = [(i, k) for p, i, k in answered if p == "p1"]
    after = [(i, k) for p, i, k in answered if p == "p2"]
    assert [k for _, k in before] == [0, 1], answered
    # The restarted process asks the second question again, or finds it answered: the answer's
    # write runs on the saver's executor and may land before the kill or not, in every
    # durability mode (seen both ways in full CI runs: async, then sync). Asked again, it gets
    # the same answer.
    assert after in ([], before[1:]), answered
    assert len({i for _, i, _ in answered}) == 2, answered  # one k per interrupt id


def test_a_factory_that_needs_a_model_without_a_script_fails_in_one_line() -> None:
    """The support agent's factory takes the model; without --model-script its first model call
    is the app's one-line error, naming the flag."""
    apps = REPO / "examples" / "langgraph_support"
    options = app_options(
        "langgraph",
        f"{apps / 'support_graph.py'}:build_graph",
        effects=("refund", "send_email"),
        durability="sync",
        input=str(apps / "input.json"),
    )
    with pytest.raises(TargetError) as caught:
        reference_run(get_target("langgraph"), options, timeout_s=TIMEOUT_S)
    message = str(caught.value)
    assert "\n" not in message
    assert "the graph called the model but no --model-script was given" in message


def test_a_thread_left_waiting_at_an_interrupt_is_not_finished() -> None:
    """No answer for the approval: the run ends waiting at ``interrupt()``, with no refund, and
    the judge says the run did not finish (I7), naming the node and the question."""
    target = get_target("langgraph")
    options = _desk(answers="")
    run = run_point(target, options, None, timeout_s=TIMEOUT_S)
    assert run.error is None and run.ledger == []
    assert not run.state.finished
    verdict = judge_point(run, run, target.tools(options))
    assert [v.invariant for v in verdict.violations] == ["I7"]
    assert "approve (waits at interrupt(): " in verdict.violations[0].explanation
    assert "Refund 80 EUR on order A-17?" in verdict.violations[0].explanation
