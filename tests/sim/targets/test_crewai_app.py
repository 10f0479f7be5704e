"""A user's own CrewAI flow (``examples/crewai_orders``, a package not in ``sim/``), swept
unmodified through ``--app MODULE:FACTORY`` (``sim/targets/crewai/app.py``): a ``Flow`` with
structured state under ``@persist()``, whose charge is a method of a client object that POSTs
to the payment API with httpx (``--effect-http``, answered by ``--http-stub``) and whose
confirmation a ``crewai.LLM`` writes (answered from ``--model-script``) and a mailer sends
(``--effect``).

Its first version charges twice after a kill just after the charge (I1, and the saved state
shows one completed charge: H1), and the replay line reproduces it; the version keyed by the
flow's state id passes there. Those and the flows the harness cannot run (one line each, exit 2)
start CrewAI's children in the target's own venv: slow. Options it refuses are refused before
any venv is made.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from targetkit import app_options, applied_rows, installed, just_after, runnable
from testkit import REPO

from sim.outputs.cli.main import main
from sim.targets.host import DEFAULT_TIMEOUT_S
from sim.targets.kit.options import app_spec, check_options
from sim.targets.kit.spec import AppArgs
from sim.targets.protocol import Target, TargetError, TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import reference_run, sweep_target, warm

EXAMPLE = REPO / "examples" / "crewai_orders"
CHARGES = "POST https://api.payments.example.com/v1/charges"
CHARGE = f"effect:http.{CHARGES}#"
MAILER = "orders_flow.clients:MAILER.send"
INPUT = str(EXAMPLE / "input.json")
SCRIPT = str(EXAMPLE / "script.json")


def _options(factory: str) -> TargetOptions:
    """The example as its README sweeps it, from its directory (``--app`` names a module)."""
    return app_options(
        "crewai",
        factory,
        effects=[MAILER],
        http=[CHARGES],
        input=INPUT,
        model_script=SCRIPT,
        http_stub=str(EXAMPLE / "stub.json"),
        workdir=str(EXAMPLE),
    )


@pytest.fixture(scope="module")
def crewai() -> Target:
    return runnable("crewai")


@pytest.mark.slow
def test_the_users_flow_charges_twice_and_its_replay_line_reproduces_it(
    crewai: Target, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = sweep_target(
        crewai, _options("orders_flow.flow:build_flow"), choose=just_after(CHARGE)
    )
    assert result.name == "crewai+app"
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"], failure.invariants
    assert failure.explanation.startswith(f"{CHARGES} is declared exactly_once"), failure
    # The restart runs the flow from its start over the state saved before the charge: the
    # charge method runs again and the provider gets the same POST, with no key.
    applied = applied_rows(failure.witness)
    assert [row.split(" by ")[1][:2] for row in applied] == ["p1", "p2"], applied
    assert all("key=- " in row and "by tool charge_payment: " in row for row in applied), applied
    assert failure.repro.startswith("durable-sim target replay crewai "), failure.repro
    assert "--app orders_flow.flow:build_flow " in failure.repro
    assert failure.repro.endswith(" --schedule 1:after"), failure.repro
    monkeypatch.chdir(EXAMPLE)  # the replay names the app's module, found where it runs
    capsys.readouterr()
    assert main(shlex.split(failure.repro)[1:]) == 1
    said = capsys.readouterr().out
    assert f"I1: {CHARGES} is declared exactly_once" in said and "H1: " in said, said
    assert "crewai" not in sys.modules, "the parent imported the framework"


@pytest.mark.slow
def test_keyed_by_the_flow_state_id_it_charges_once(crewai: Target) -> None:
    options = _options("orders_flow.keyed_flow:build_keyed_flow")
    result = sweep_target(crewai, options, choose=just_after(CHARGE))
    assert result.schedules == 1 and result.failures == [], result.failures


#: Flows the harness cannot run, written as a user might: each is refused by the fault-free
#: run's child in one line naming the app and what is wrong.
BAD_FLOWS = """
from crewai import LLM
from crewai.flow.flow import Flow, start
from crewai.flow.persistence import FlowPersistence, persist


def send(to, idempotency_key=None):
    return f"sent to {to}"


class Chatty(Flow):
    @start()
    def greet(self):
        send(LLM(model="gpt-4o-mini").call("Say hello."))


class Elsewhere(FlowPersistence):
    def init_db(self):
        pass

    def save_state(self, flow_uuid, method_name, state_data):
        pass

    def load_state(self, flow_uuid):
        return None


@persist(Elsewhere())
class Remote(Flow):
    @start()
    def greet(self):
        send("ada@example.com")


def chatty():
    return Chatty


def an_instance():
    return Chatty()


def wrong_type():
    return {"flow": "orders"}


def remote():
    return Remote
"""

REFUSED = [
    ("bad_flows:build_flow", [], "--app bad_flows:build_flow: the module has no function"),
    ("bad_flows:wrong_type", [], "returned a dict, not a crewai Flow class"),
    ("bad_flows:an_instance", [], "returned a Chatty instance; return its class"),
    ("bad_flows:remote", [], "its @persist saves to a Elsewhere"),
    ("bad_flows:chatty", [], "the flow called an LLM; give --model-script"),
    ("bad_flows:chatty", ["--model-script", "empty.json"], "--model-script has 0 turns"),
    ("broken:build_flow", [], "--app broken:build_flow: importing it raised ZeroDivisionError"),
]


@pytest.mark.slow
def test_a_flow_it_cannot_run_is_one_line_exit_2(
    crewai: Target,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each refusal is the fault-free run's (the parent never imports the app): one line, no
    traceback; the command line exits 2 with it. One zygote forks every case's child."""
    (tmp_path / "bad_flows.py").write_text(BAD_FLOWS, encoding="utf-8")
    (tmp_path / "broken.py").write_text("RATE = 1 / 0\n", encoding="utf-8")
    (tmp_path / "empty.json").write_text("[]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # where a user runs it: --app names a module found there

    def options(app: str, words: list[str]) -> TargetOptions:
        return _checked(app=app, words=["--effect", "bad_flows:send", *words], workdir=tmp_path)

    with warm(crewai, options(REFUSED[0][0], [])) as (zygote, _):
        for app, words, says in REFUSED:
            with pytest.raises(TargetError, match=r"^crewai: the fault-free run fails") as caught:
                reference_run(
                    crewai, options(app, words), timeout_s=DEFAULT_TIMEOUT_S, zygote=zygote
                )
            assert says in str(caught.value) and "\n" not in str(caught.value), caught.value
    capsys.readouterr()
    out = ["--out", str(tmp_path / "out"), "--quiet"]
    words = ["--effect", "bad_flows:send", *out]
    status = main(["target", "sweep", "crewai", "--app", "broken:build_flow", *words])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "--app broken:build_flow: importing it raised ZeroDivisionError" in err, err


def _checked(*, app: str, words: list[str], workdir: Path = EXAMPLE) -> TargetOptions:
    """``durable-sim target sweep crewai --app APP WORDS...`` as the command line checks it."""
    flags: dict[str, list[str]] = {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        flags.setdefault(flag, []).append(value)

    def one(flag: str) -> str:
        return flags.get(flag, [""])[-1]

    target = get_target("crewai")
    args = AppArgs(
        app=app,
        effects=tuple(flags.get("--effect", ())),
        http=tuple(flags.get("--effect-http", ())),
        input=one("--input"),
        model_script=one("--model-script"),
        answers=one("--answers"),
        workdir=str(workdir),
    )
    given = TargetOptions(variant=one("--variant"), app=app_spec(target, args))
    return check_options(target, given)


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--variant", "idempotent"], "crewai: --variant is the bundled agent's"),
        (["--input", SCRIPT], "crewai: --input .*: expected a JSON object"),
        (["--model-script", INPUT], "crewai: --model-script .*: expected a JSON list of turns"),
        (["--answers", SCRIPT], "crewai: --answers is not for its --app"),
    ],
)
def test_options_it_refuses_are_refused_before_its_venv_is_made(
    words: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused by the parent in one line, before ``check_options`` makes the target's venv: a
    refusal costs no pip, and is tested without one."""
    installed("crewai")

    def no_venv(environment: object) -> None:
        raise AssertionError(f"refused only after making {environment}")

    monkeypatch.setattr("sim.targets.kit.options.ensure", no_venv)
    with pytest.raises(TargetError, match=says) as caught:
        _checked(app="orders_flow.flow:build_flow", words=["--effect", MAILER, *words])
    assert "\n" not in str(caught.value)
