"""Declared effects wherever the app makes them (``sim.targets.kit.effects``): a function of
another module, a method of a class (plain, classmethod, staticmethod, inherited), a method of an
object; the idempotency key read from the parameter the user names; one line for a path that
does not resolve. Most checks wrap a module in this process with a recording ``Landing``; the
last ones run the python target's children for real.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from targetkit import app_options

from sim.outputs.report.markdown import app_notes
from sim.targets.kit.declarations import AppError
from sim.targets.kit.effects import wrap_effects
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.registry import get_target
from sim.targets.sweep import reference_run, sweep_target

PAYMENTS = """
class BaseClient:
    def post(self, path, invoice_id):
        return f"posted {path} for {invoice_id}"


class Stripe(BaseClient):
    pass


class Mailer:
    sent = 0

    def send(self, to, body, *, idempotency_key=None):
        Mailer.sent += 1
        return f"sent {body} to {to}"

    @classmethod
    def create(cls, name, idempotency_key=None):
        return f"created {name} by {cls.__name__}"

    @staticmethod
    def ping(host, idempotency_key=None):
        return f"pong {host}"

    async def send_later(self, to, idempotency_key=None):
        return f"queued for {to}"


def issue_refund(order_id, amount, idempotency_key=None):
    return f"refunded {amount} on {order_id}"


def charge(invoice_id, amount, **options):
    return f"charged {amount} for {invoice_id}"


MAILER = Mailer()
"""


class Recording:
    """A ``Landing`` that records each landed call instead of writing a ledger."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str]] = []

    def land(self, *, service: str, name: str, short: str, key: str | None, detail: str) -> bool:
        assert service == "app"
        self.calls.append((name, key, detail))
        return True


@pytest.fixture
def payments(tmp_path: Path) -> Iterator[Any]:
    """A module ``payments_N`` of the app's, imported fresh for each test and dropped after."""
    name = f"payments_{len(sys.modules)}"
    (tmp_path / f"{name}.py").write_text(PAYMENTS, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        yield __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def _wrap(module: Any, *effects: str) -> Recording:
    spec = parse_app("python", AppArgs(app="job:main", effects=effects))
    landing = Recording()
    wrap_effects(landing, spec, None)  # type: ignore[arg-type]  # Landing's one method
    return landing


def test_a_function_of_another_module_is_wrapped_for_callers_that_imported_it(
    payments: Any,
) -> None:
    """``from payments import issue_refund`` before the wrap still gets the wrapper: every app
    module that holds the function is rebound."""
    caller = type(sys)("early_caller")
    caller.__file__ = "/app/early_caller.py"
    vars(caller)["issue_refund"] = payments.issue_refund  # as `from payments import` binds it
    sys.modules["early_caller"] = caller
    try:
        landing = _wrap(payments, f"{payments.__name__}:issue_refund")
        assert caller.issue_refund("o-1", 5, idempotency_key="k-1") == "refunded 5 on o-1"
    finally:
        del sys.modules["early_caller"]
    assert payments.issue_refund("o-2", 7) == "refunded 7 on o-2"
    name = f"{payments.__name__}:issue_refund"
    assert [(n, k) for n, k, _ in landing.calls] == [(name, "k-1"), (name, None)]


def test_a_method_of_a_class_lands_for_instances_made_before_and_after(payments: Any) -> None:
    before = payments.Mailer()
    landing = _wrap(payments, f"{payments.__name__}:Mailer.send")
    assert before.send("ada", "hi", idempotency_key="m-1") == "sent hi to ada"
    assert payments.Mailer().send("bob", "yo") == "sent yo to bob"
    assert payments.MAILER.send("cy", "ok") == "sent ok to cy"
    assert [k for _, k, _ in landing.calls] == ["m-1", None, None]
    assert "0x" not in landing.calls[0][2], "the instance's repr (an address) is left out"
    assert payments.Mailer.sent == 3


def test_a_classmethod_a_staticmethod_and_an_inherited_method_stay_what_they_are(
    payments: Any,
) -> None:
    module = payments.__name__
    landing = _wrap(
        payments,
        f"{module}:Mailer.create",
        f"{module}:Mailer.ping",
        f"{module}:Stripe.post,key=invoice_id",
    )
    assert payments.Mailer.create("acme", idempotency_key="c-1") == "created acme by Mailer"
    assert payments.Mailer.ping("h") == "pong h"
    assert payments.Stripe().post("/v1/charges", "inv-9") == "posted /v1/charges for inv-9"
    assert payments.BaseClient().post("/x", "inv-0") == "posted /x for inv-0"  # not the subclass
    assert [(n.split(":")[1], k) for n, k, _ in landing.calls] == [
        ("Mailer.create", "c-1"),
        ("Mailer.ping", None),
        ("Stripe.post", "inv-9"),
    ]


def test_a_method_of_one_object_and_a_coroutine_method(payments: Any) -> None:
    import asyncio

    module = payments.__name__
    landing = _wrap(payments, f"{module}:MAILER.send", f"{module}:Mailer.send_later")
    payments.MAILER.send("ada", "hi")
    payments.Mailer().send("not", "this one")  # another object: not the declared one
    assert asyncio.run(payments.Mailer().send_later("ada", idempotency_key="q-1")) == (
        "queued for ada"
    )
    assert [(n.split(":")[1], k) for n, k, _ in landing.calls] == [
        ("MAILER.send", None),
        ("Mailer.send_later", "q-1"),
    ]


def test_the_key_is_the_parameter_named_by_position_keyword_or_kwargs(payments: Any) -> None:
    module = payments.__name__
    landing = _wrap(payments, f"{module}:issue_refund,key=order_id", f"{module}:charge")
    payments.issue_refund("o-1", 3)
    payments.issue_refund(order_id="o-2", amount=4)
    payments.charge("inv-1", 9, idempotency_key="from-kwargs")
    assert [k for _, k, _ in landing.calls] == ["o-1", "o-2", "from-kwargs"]


@pytest.mark.parametrize(
    ("effect", "message"),
    [
        ("{m}:Mailer.sendx", "--effect {m}:Mailer.sendx: {m}.Mailer has no attribute 'sendx'"),
        ("{m}:Nobody.send", "--effect {m}:Nobody.send: {m} has no attribute 'Nobody'"),
        ("{m}:issue_refund,key=invoice", "key=invoice is not a parameter of it"),
        ("{m}:Mailer.sent", "it is a int, not callable"),
        ("no_such_module_x:charge", "importing no_such_module_x raised ModuleNotFoundError"),
    ],
)
def test_a_path_that_does_not_resolve_is_one_line(payments: Any, effect: str, message: str) -> None:
    module = payments.__name__
    with pytest.raises(AppError) as caught:
        _wrap(payments, effect.format(m=module))
    assert message.format(m=module) in str(caught.value)
    assert "\n" not in str(caught.value)


JOB = """
from payments_job import issue_refund, MAILER, Mailer


def main():
    issue_refund("o-1", 5)
    MAILER.send("ada", "refund sent")
    return "done"
"""


def _job(tmp_path: Path) -> str:
    (tmp_path / "payments_job.py").write_text(PAYMENTS, encoding="utf-8")
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    return f"{tmp_path / 'job.py'}:main"


def test_in_a_child_effects_of_another_module_land_as_the_app_calls_them(tmp_path: Path) -> None:
    """The app imports the client at its top: the child wraps it first, so the calls land (with
    the labels that name them), and a method of a class the app never calls is noted as never
    called in the report."""
    options = app_options(
        "python",
        _job(tmp_path),
        effects=[
            "payments_job:issue_refund",
            "payments_job:Mailer.send",
            "payments_job:Stripe.post",
        ],
    )
    target = get_target("python")
    result = sweep_target(target, options, choose=lambda labels: [])
    assert result.reference.labels == [
        "effect:app.payments_job:issue_refund#issue_refund-1",
        "effect:app.payments_job:Mailer.send#Mailer.send-1",
    ]
    notes = app_notes({"reference_outcome": result.reference.outcome})
    assert any(n.startswith("never called: payments_job:Stripe.post") for n in notes), notes
    reference = reference_run(target, options, timeout_s=60.0)
    assert [row.tool for row in reference.ledger] == [
        "payments_job:issue_refund",
        "payments_job:Mailer.send",
    ]


def test_in_a_child_a_missing_attribute_is_the_sweeps_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.outputs.cli.main import main

    app = _job(tmp_path)
    status = main(
        ["target", "sweep", "python", "--app", app, "--effect", "payments_job:Mailer.snd"]
    )
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "--effect payments_job:Mailer.snd: payments_job.Mailer has no attribute 'snd'" in err


def test_words_round_trip_through_the_spec() -> None:
    """What a replay line repeats parses back to the same spec."""
    words = AppArgs(
        app="job:main",
        effects=("billing:charge=idempotent,key=invoice_id", "refund"),
    )
    spec = parse_app("python", words)
    again = spec.words()
    assert again == [
        "--app",
        "job:main",
        "--effect",
        "billing:charge=idempotent,key=invoice_id",
        "--effect",
        "refund=exactly_once",
    ]
    effects = tuple(again[i + 1] for i, w in enumerate(again) if w == "--effect")
    assert parse_app("python", AppArgs(app="job:main", effects=effects)) == spec


def test_the_spec_crosses_to_the_child_whole() -> None:
    from sim.targets.kit.spec import AppSpec

    spec = parse_app(
        "python",
        AppArgs(
            app="job:main", effects=("a:B.c=unsafe,key=k",), http=("POST https://x.example/*",)
        ),
    )
    assert AppSpec.from_json(spec.to_json()) == spec
    assert textwrap.dedent(spec.http[0].text()) == "POST https://x.example/*=exactly_once"
