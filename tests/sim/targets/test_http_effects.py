"""HTTP effects of a user's program (``--effect-http``, ``--http-stub``; ``sim.targets.kit.http``):
a call through httpx, requests or urllib3 that matches a declared pattern lands on the ledger
once, keyed by its header, is answered by the stub inside the client and never leaves the
process; any other host is still refused offline. The worked example
(``examples/http_refunds``) refunds a charge twice after a crash between its POST and its
commit, and its keyed fix does not; bad stubs and declarations are one line each.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from targetkit import app_options
from testkit import REPO

from sim.outputs.cli.main import main
from sim.outputs.report.markdown import app_notes
from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import app_outcome, reference_run, sweep_target

EXAMPLE = REPO / "examples" / "http_refunds"
REFUNDS = "POST https://payments.example.com/v1/refunds"


def _example(function: str) -> TargetOptions:
    return app_options(
        "python",
        f"{EXAMPLE / 'refunds.py'}:{function}",
        http=[REFUNDS],
        http_stub=str(EXAMPLE / "stub.json"),
    )


def _after_first_refund(labels: list[str]) -> list[tuple[int, str]]:
    """The kill right after the provider accepted the first refund: by its label, not an index
    that moves when the job changes."""
    first = next(i for i, label in enumerate(labels) if label.startswith(f"effect:http.{REFUNDS}#"))
    return [(first, "after")]


def test_the_job_refunds_twice_after_a_crash_there(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Killed right after the first refund's POST, the first version POSTs it again (I1 on the
    HTTP effect, with both refunds of the charge as its witness), and its replay line
    reproduces it."""
    pytest.importorskip("httpx", reason="the example job calls its API with httpx")
    monkeypatch.chdir(tmp_path)  # the replay's files, if any, stay out of the checkout
    result = sweep_target(get_target("python"), _example("main"), choose=_after_first_refund)
    (failure,) = result.failures
    assert failure.invariants == ["I1"] and failure.explanation.startswith(REFUNDS), failure
    assert failure.crash_labels[0].startswith(f"effect:http.{REFUNDS}#")
    refunds = [w for w in failure.witness if w.startswith("ledger#") and w.endswith("[applied]")]
    assert [w.count('{"charge":"ch_1001"') for w in refunds] == [1, 1, 0], refunds
    assert failure.repro.startswith("durable-sim target replay python --app ")
    assert f"--effect-http '{REFUNDS}=exactly_once' --http-stub " in failure.repro
    capsys.readouterr()
    assert main(shlex.split(failure.repro)[1:]) == 1
    assert "I1: " + REFUNDS in capsys.readouterr().out


def test_the_keyed_job_refunds_once_there() -> None:
    """Killed at the same point, the keyed version's next process POSTs the refund again with
    the same key: the ledger deduplicates it, and the answer is the first's, so the job records
    the refund id the fault-free run records."""
    pytest.importorskip("httpx", reason="the example job calls its API with httpx")
    keyed = sweep_target(get_target("python"), _example("main_keyed"), choose=_after_first_refund)
    assert keyed.schedules == 1 and not keyed.failures, keyed.failures


#: The stub of the client programs: refunds are created (201) and echo the request; a declined
#: one is a 402.
STUB = {
    "routes": [
        {
            "method": "POST",
            "url": "https://payments.example.com/v1/declined",
            "status": 402,
            "json": {"error": "card_declined"},
        },
        {
            "method": "POST",
            "url": "https://payments.example.com/v1/*",
            "status": 201,
            "json": {"id": "re_{json.charge}", "amount": "{json.amount}", "key": "{key}"},
            "headers": {"X-Refund": "re_{json.charge}"},
        },
    ]
}

#: Each program refunds ch_1 (key k-1), ch_2 (k-2), then ch_9 with k-1 again -- a repeated key
#: the provider deduplicates, answering as it answered ch_1 -- and tries a declined refund
#: (k-3). It returns what it saw: per call the status, reason, the body's id and amount, the
#: header; for the declined one the status and what ``raise_for_status`` did.
PROGRAMS = {
    "httpx": """
import httpx

URL = "https://payments.example.com/v1/"


def seen(r):
    r.raise_for_status()
    body = r.json()
    return (r.status_code, r.reason_phrase, body["id"], body["amount"], r.headers["x-refund"])


def declined(r):
    try:
        r.raise_for_status()
    except httpx.HTTPStatusError:
        return (r.status_code, "raised")
    return (r.status_code, "passed")


def main():
    first = httpx.post(
        URL + "refunds", json={"charge": "ch_1", "amount": 5}, headers={"{H}": "k-1"}
    )
    with httpx.Client() as client:
        rest = [
            client.post(URL + "refunds", json={"charge": c, "amount": 7}, headers={"{H}": k})
            for c, k in (("ch_2", "k-2"), ("ch_9", "k-1"))
        ]
        no = client.post(URL + "declined", json={"charge": "ch_3"}, headers={"{H}": "k-3"})
    return [seen(r) for r in [first, *rest]] + [declined(no)]
""",
    "httpx-async": """
import asyncio

import httpx

URL = "https://payments.example.com/v1/"


def seen(r):
    r.raise_for_status()
    body = r.json()
    return (r.status_code, r.reason_phrase, body["id"], body["amount"], r.headers["x-refund"])


async def calls():
    async with httpx.AsyncClient() as client:
        made = []
        for c, k, amount in (("ch_1", "k-1", 5), ("ch_2", "k-2", 7), ("ch_9", "k-1", 7)):
            body = {"charge": c, "amount": amount}
            made.append(await client.post(URL + "refunds", json=body, headers={"{H}": k}))
        no = await client.post(URL + "declined", json={"charge": "ch_3"}, headers={"{H}": "k-3"})
    try:
        no.raise_for_status()
        outcome = (no.status_code, "passed")
    except httpx.HTTPStatusError:
        outcome = (no.status_code, "raised")
    return [seen(r) for r in made] + [outcome]


def main():
    return asyncio.run(calls())
""",
    "requests": """
import requests

URL = "https://payments.example.com/v1/"


def seen(r):
    r.raise_for_status()
    body = r.json()
    return (r.status_code, r.reason, body["id"], body["amount"], r.headers["X-Refund"])


def post(session, path, body, key, **kwargs):
    return session.post(URL + path, json=body, headers={"{H}": key}, **kwargs)


def main():
    first = post(requests, "refunds", {"charge": "ch_1", "amount": 5}, "k-1")
    with requests.Session() as session:
        with post(session, "refunds", {"charge": "ch_2", "amount": 7}, "k-2") as second:
            made = [first, second]
        made.append(post(session, "refunds", {"charge": "ch_9", "amount": 7}, b"k-1", stream=True))
        no = post(session, "declined", {"charge": "ch_3"}, "k-3")
    try:
        no.raise_for_status()
        outcome = (no.status_code, "passed")
    except requests.HTTPError:
        outcome = (no.status_code, "raised")
    return [seen(r) for r in made] + [outcome]
""",
    "urllib3": """
import json

import urllib3

URL = "https://payments.example.com:443/v1/"


def seen(r):
    return (r.status, r.reason, r.json()["id"], r.json()["amount"], r.headers["X-Refund"])


def main():
    pool = urllib3.PoolManager()
    body = json.dumps({"charge": "ch_1", "amount": 5})
    made = [
        pool.request("POST", URL + "refunds?expand=charge", body=body, headers={"{H}": "k-1"}),
        urllib3.request(
            "POST", URL + "refunds", json={"charge": "ch_2", "amount": 7}, headers={"{H}": "k-2"}
        ),
        pool.request(
            "POST",
            URL + "refunds",
            json={"charge": "ch_9", "amount": 7},
            headers={"{H}": "k-1"},
            preload_content=False,
        ),
    ]
    no = pool.request("POST", URL + "declined", json={"charge": "ch_3"}, headers={"{H}": "k-3"})
    return [seen(r) for r in made] + [(no.status, no.reason)]
""",
}
#: The header that carries the key: the default one, or a header the user names.
HEADERS = {
    "httpx": "Idempotency-Key",
    "httpx-async": "Idempotency-Key",
    "requests": "X-Request-Id",
    "urllib3": "Idempotency-Key",
}
REFUNDED = [
    (201, "Created", "re_ch_1", 5, "re_ch_1"),
    (201, "Created", "re_ch_2", 7, "re_ch_2"),
    (201, "Created", "re_ch_1", 5, "re_ch_1"),  # k-1 again: the first answer to k-1
]
SEEN = {
    "httpx": [*REFUNDED, (402, "raised")],
    "httpx-async": [*REFUNDED, (402, "raised")],
    "requests": [*REFUNDED, (402, "raised")],
    "urllib3": [*REFUNDED, (402, "Payment Required")],
}
PATTERN = "POST https://payments.example.com/v1/*"
NEVER = "DELETE https://payments.example.com/v1/*"


def _program(tmp_path: Path, client: str) -> tuple[str, Path]:
    """The client's program and the stub, written in ``tmp_path``: ``FILE.py:main``, stub."""
    program = tmp_path / f"{client.replace('-', '_')}_job.py"
    program.write_text(PROGRAMS[client].replace("{H}", HEADERS[client]), encoding="utf-8")
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(STUB), encoding="utf-8")
    return f"{program}:main", stub


@pytest.mark.parametrize("client", sorted(PROGRAMS))
def test_a_declared_call_lands_once_by_its_key_and_gets_the_stubs_answer(
    client: str, tmp_path: Path
) -> None:
    """A fault-free run: one ledger row per call, keyed by the header (the third repeats the
    first's key: deduplicated, and answered as the first was), each answer the stub's -- status,
    reason, JSON body with the request's fields, headers -- as the client's own response type;
    and a declared pattern no call matched is named in the report's notes."""
    pytest.importorskip(client.split("-")[0], reason=f"the {client} program needs it")
    app, stub = _program(tmp_path, client)
    declared = PATTERN if HEADERS[client] == "Idempotency-Key" else f"{PATTERN},header=X-Request-Id"
    options = app_options("python", app, http=[declared, NEVER], http_stub=str(stub))
    reference = reference_run(get_target("python"), options, timeout_s=60.0)
    assert reference.state.answer == repr(SEEN[client]), reference.state.answer
    rows = [(r.service, r.tool, r.key, r.applied) for r in reference.ledger]
    assert rows == [
        ("http", PATTERN, "k-1", True),
        ("http", PATTERN, "k-2", True),
        ("http", PATTERN, "k-1", False),
        ("http", PATTERN, "k-3", True),
    ]
    assert '"charge": "ch_9"' in reference.ledger[2].detail.replace('":"', '": "')
    notes = app_notes({"reference_outcome": app_outcome(options, reference)})
    assert f"no call matched: {NEVER} -- declared HTTP effects the fault-free run never made" in (
        notes
    )
    assert not any(PATTERN in n for n in notes if n.startswith("no call matched")), notes


CALLS_ELSEWHERE = """
import httpx


def main():
    declared = httpx.post("https://payments.example.com/v1/refunds", json={"charge": "ch_1"})
    assert (declared.status_code, declared.json()) == (200, {}), "no stub: 200 {}"
    return httpx.get("https://api.ledger.example:8443/v1/balance").json()
"""


def test_a_call_to_an_undeclared_host_is_still_refused_offline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only declared calls are answered (without a stub, ``200 {}``: the program checks it
    before it goes on): a call to another host reaches the offline guard, and the sweep says in
    one line, exit 2, which host the app tried."""
    pytest.importorskip("httpx", reason="the program calls with httpx")
    monkeypatch.chdir(tmp_path)
    program = tmp_path / "elsewhere.py"
    program.write_text(CALLS_ELSEWHERE, encoding="utf-8")
    status = main(
        ["target", "sweep", "python", "--app", f"{program}:main", "--effect-http", REFUNDS]
    )
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "the app tried to reach api.ledger.example:8443" in err and "offline" in err


@pytest.mark.parametrize(
    ("stub", "message"),
    [
        ("{not json", "stub.json: JSONDecodeError: Expecting property name"),
        ("[]", 'expected {"routes": \\[...\\]}'),
        ('{"routes": [], "default": {}}', 'expected {"routes": \\[...\\]}'),
        ('{"routes": [{"method": "POST"}]}', "route 1 is not"),
        (
            '{"routes": [{"method": "POST", "url": "https://x.example/a", "status": 700}]}',
            "route 1",
        ),
        ('{"routes": [{"method": "GET", "url": "https://x.example/a"}, "POST /a"]}', "route 2"),
    ],
)
def test_a_bad_stub_is_one_line_exit_2(
    stub: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "stub.json"
    path.write_text(stub, encoding="utf-8")
    app = f"{EXAMPLE / 'refunds.py'}:main"
    words = ["target", "sweep", "python", "--app", app, "--effect-http", REFUNDS]
    status = main([*words, "--http-stub", str(path)])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"durable-sim: python: --http-stub {path}: "), err
    assert re.search(message, err), err


@pytest.mark.parametrize(
    "declared",
    [
        "https://payments.example.com/v1/refunds",
        "POST",
        "POST payments.example.com/v1/refunds",
        "FETCH https://payments.example.com/v1/refunds",
        "POST https://payments.example.com/v1/refunds,header=Idempotency Key",
    ],
)
def test_a_malformed_http_declaration_is_one_line_exit_2(
    declared: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = f"{EXAMPLE / 'refunds.py'}:main"
    status = main(["target", "sweep", "python", "--app", app, "--effect-http", declared])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"durable-sim: python: --effect-http {declared!r}: "), err
