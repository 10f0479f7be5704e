"""A user's own Google ADK app (``examples/adk_payments``, a package not in ``sim/``), swept
unmodified through ``--app MODULE:FACTORY`` (``sim/targets/adk/app.py``): an ``LlmAgent`` whose
tools live in a module of their own, the charge a method of a client object that POSTs to the
payment API with httpx (``--effect-http``, answered by ``--http-stub``), the receipt a method of
a mailer object (``--effect``). The harness swaps the agent's Gemini model for the scripted one.

Its first version charges twice after a kill just after the charge (I1, and the session shows
one result: H1), and the replay line reproduces it; the version keyed by
``tool_context.invocation_id`` and ``tool_context.function_call_id`` passes there. Those and the
apps the harness cannot run (one line each, exit 2) start ADK's children in the target's own
venv: slow. Options it refuses are refused before any venv is made: fast.
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

EXAMPLE = REPO / "examples" / "adk_payments"
CHARGES = "POST https://api.payments.example.com/v1/charges"
CHARGE = f"effect:http.{CHARGES}#"
MAILER = "payments_agent.clients:MAILER.send"
INPUT = str(EXAMPLE / "input.json")
SCRIPT = str(EXAMPLE / "script.json")
#: The words every app of these tests is run with: the user's message and the model's turns.
RUN = ["--input", INPUT, "--model-script", SCRIPT]


def _options(factory: str) -> TargetOptions:
    """The example as its README sweeps it, from its directory (``--app`` names a module)."""
    return app_options(
        "adk",
        f"payments_agent.agent:{factory}",
        effects=[MAILER],
        http=[CHARGES],
        input=INPUT,
        model_script=SCRIPT,
        http_stub=str(EXAMPLE / "stub.json"),
        workdir=str(EXAMPLE),
    )


@pytest.fixture(scope="module")
def adk() -> Target:
    return runnable("adk")


@pytest.mark.slow
def test_the_users_app_charges_twice_and_its_replay_line_reproduces_it(
    adk: Target, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = sweep_target(adk, _options("build_app"), choose=just_after(CHARGE))
    assert result.name == "adk+app"
    (failure,) = result.failures
    assert failure.invariants == ["I1", "H1"], failure.invariants
    assert failure.explanation.startswith(f"{CHARGES} is declared exactly_once"), failure
    # The resumed invocation runs the function call the session recorded: the provider gets the
    # same POST again, with no key to deduplicate it by.
    applied = applied_rows(failure.witness)
    assert [row.split(" by ")[1][:2] for row in applied] == ["p1", "p2"], applied
    assert all("key=- " in row and "by tool charge_card: " in row for row in applied), applied
    assert failure.repro.startswith("durable-sim target replay adk --durability resumable ")
    assert "--app payments_agent.agent:build_app " in failure.repro
    assert failure.repro.endswith(" --schedule 3:after"), failure.repro
    monkeypatch.chdir(EXAMPLE)  # the replay names the app's module, found where it runs
    capsys.readouterr()
    assert main(shlex.split(failure.repro)[1:]) == 1
    said = capsys.readouterr().out
    assert f"I1: {CHARGES} is declared exactly_once" in said and "H1: " in said, said
    assert "google.adk" not in sys.modules, "the parent imported the framework"


@pytest.mark.slow
def test_keyed_by_invocation_and_function_call_id_it_charges_once(adk: Target) -> None:
    result = sweep_target(adk, _options("build_keyed_app"), choose=just_after(CHARGE))
    assert result.schedules == 1 and result.failures == [], result.failures


#: Apps the harness cannot run, written as a user might: each is refused by the fault-free run's
#: child in one line naming the app and what is wrong.
BAD_APPS = """
from google.adk.agents import LlmAgent
from google.adk.apps import App


def send(to, idempotency_key=None):
    return f"sent to {to}"


def wrong_type():
    return {"agent": "billing"}


def without_tools():
    return LlmAgent(name="idle", model="gemini-2.5-flash", instruction="Chat.")


def not_resumable():
    agent = LlmAgent(name="billing", model="gemini-2.5-flash", tools=[send])
    return App(name="billing", root_agent=agent)


def two_agents():
    helper = LlmAgent(name="mailer", model="gemini-2.5-flash", tools=[send])
    return LlmAgent(name="billing", model="gemini-2.5-flash", sub_agents=[helper])


def needs_model(model):
    return LlmAgent(name="billing", model=model, tools=[send])


def raises():
    raise RuntimeError("no API key")
"""

REFUSED = [
    ("bad_apps:build_app", "--app bad_apps:build_app: the module has no function 'build_app'"),
    ("bad_apps:wrong_type", "returned a dict, not a google.adk App or agent"),
    ("bad_apps:without_tools", "no LlmAgent of it has a tool"),
    ("bad_apps:not_resumable", "its App is not resumable"),
    ("bad_apps:two_agents", "scripts one LlmAgent; this app has 2: billing, mailer"),
    ("bad_apps:needs_model", "the factory takes model; it is called with no argument"),
    ("bad_apps:raises", "calling it raised RuntimeError: no API key"),
    ("broken:build_app", "--app broken:build_app: importing it raised ZeroDivisionError"),
]


@pytest.mark.slow
def test_an_app_it_cannot_run_is_one_line_exit_2(
    adk: Target,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each refusal is the fault-free run's (the parent never imports the app): one line, no
    traceback; the command line exits 2 with it. One zygote forks every case's child."""
    (tmp_path / "bad_apps.py").write_text(BAD_APPS, encoding="utf-8")
    (tmp_path / "broken.py").write_text("RATE = 1 / 0\n", encoding="utf-8")
    words = ["--effect", "bad_apps:send", *RUN]

    def options(app: str) -> TargetOptions:
        return _checked(app=app, words=words, workdir=str(tmp_path))

    with warm(adk, options(REFUSED[0][0])) as (zygote, _):
        for app, says in REFUSED:
            with pytest.raises(TargetError, match=r"^adk: the fault-free run fails") as caught:
                reference_run(adk, options(app), timeout_s=DEFAULT_TIMEOUT_S, zygote=zygote)
            assert says in str(caught.value) and "\n" not in str(caught.value), caught.value
    monkeypatch.chdir(tmp_path)  # where a user runs it: --app names a module found there
    capsys.readouterr()
    out = ["--out", str(tmp_path / "out"), "--quiet"]
    status = main(["target", "sweep", "adk", "--app", "broken:build_app", *words, *out])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "--app broken:build_app: importing it raised ZeroDivisionError" in err, err


def _checked(*, app: str, words: list[str], workdir: str = str(EXAMPLE)) -> TargetOptions:
    """``durable-sim target sweep adk --app APP WORDS...`` as the command line checks it."""
    flags: dict[str, list[str]] = {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        flags.setdefault(flag, []).append(value)

    def one(flag: str) -> str:
        return flags.get(flag, [""])[-1]

    target = get_target("adk")
    args = AppArgs(
        app=app,
        effects=tuple(flags.get("--effect", ())),
        http=tuple(flags.get("--effect-http", ())),
        input=one("--input"),
        model_script=one("--model-script"),
        answers=one("--answers"),
        workdir=workdir,
    )
    given = TargetOptions(
        durability=one("--durability"), variant=one("--variant"), app=app_spec(target, args)
    )
    return check_options(target, given)


@pytest.mark.parametrize(
    ("words", "says"),
    [
        ([*RUN, "--durability", "approval"], "adk: --durability approval is the bundled agent's"),
        ([*RUN, "--variant", "idempotent"], "adk: --variant is the bundled agent's"),
        (["--model-script", SCRIPT], "adk: --app needs --input"),
        (["--input", INPUT], "adk: --app needs --model-script"),
        (["--input", SCRIPT, "--model-script", SCRIPT], "adk: --input .*: expected a JSON string"),
        ([*RUN, "--answers", SCRIPT], "adk: --answers is not for its --app"),
    ],
)
def test_options_it_refuses_are_refused_before_its_venv_is_made(
    words: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused by the parent in one line, before ``check_options`` makes the target's venv: a
    refusal costs no pip, and is tested without one."""
    installed("adk")

    def no_venv(environment: object) -> None:
        raise AssertionError(f"refused only after making {environment}")

    monkeypatch.setattr("sim.targets.kit.options.ensure", no_venv)
    with pytest.raises(TargetError, match=says) as caught:
        _checked(app="payments_agent.agent:build_app", words=["--effect", MAILER, *words])
    assert "\n" not in str(caught.value)
