"""HTTP effects: calls the app makes to an outside API (``--effect-http 'POST
https://payments.example.com/v1/refunds'``) land on the ledger and never leave the process.

Children run offline (``sim.targets.offline``): a real payment API must not be reached, and a
sweep must not depend on one. So a call whose method and URL match a declared pattern is answered
inside the client, through the clients' own transport hooks -- ``httpx.HTTPTransport`` and
``AsyncHTTPTransport`` (sync and async clients, and ``httpx.post``), ``requests``'
``HTTPAdapter.send``, ``urllib3``'s ``HTTPConnectionPool.urlopen`` -- not by patching sockets: the
call lands on the ledger as the effect (``Landing``), deduplicated by its ``Idempotency-Key``
header (or the header the user named), as a provider with idempotency keys does, and the answer
is the user's stub (``--http-stub``) or ``200 {}``. A call to any other host still meets the
offline guard and its one-line refusal.

A stub route answers with its ``status``, ``headers`` and ``json``; a string in them may hold
the request's fields: ``{json.FIELD}`` (a dotted path into the request's JSON body), ``{header.
NAME}``, ``{key}`` (the idempotency key), ``{method}``, ``{url}``, ``{path}``. A string that is
one placeholder alone takes the field's value as it is (a number stays a number).

Only clients whose library is installed are hooked; importing one here, before the app, costs
what the app's own import would.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sim.targets.kit.landing import Landing
from sim.targets.kit.spec import HTTP_SERVICE, AppSpec, HttpEffectSpec, Json

_PLACEHOLDER = re.compile(r"\{(json(?:\.[^{}.]+)+|header\.[^{}]+|key|method|url|path)\}")


@dataclass(frozen=True)
class Answer:
    """What a stubbed call returns."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Request:
    """A call as the router sees it, whatever client made it."""

    method: str
    url: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes


class Router:
    """Matches calls to the declared patterns, lands them, and answers from the stub."""

    def __init__(self, landing: Landing, spec: AppSpec) -> None:
        self.landing = landing
        self.effects = spec.http
        stub = spec.http_stub.value if spec.http_stub is not None else {"routes": []}
        assert isinstance(stub, dict) and isinstance(stub["routes"], list), "checked by the kit"
        self.routes: list[dict[str, Json]] = [r for r in stub["routes"] if isinstance(r, dict)]

    def declared(self, method: str, url: str) -> HttpEffectSpec | None:
        return next((e for e in self.effects if _matches(e.method, e.url, method, url)), None)

    def answer(self, effect: HttpEffectSpec, request: Request) -> Answer:
        key = request.headers.get(effect.header.lower())
        detail = f"{request.method} {request.url} {request.body[:120]!r}"
        self.landing.land(service=HTTP_SERVICE, name=effect.name, key=key, detail=detail)
        route = next(
            (
                r
                for r in self.routes
                if _matches(str(r["method"]).upper(), str(r["url"]), request.method, request.url)
            ),
            None,
        )
        if route is None:
            return Answer(200, {"content-type": "application/json"}, b"{}")
        fields = _fields(request, key)
        body = _substitute(route.get("json", {}), fields)
        headers = _substitute(route.get("headers", {}), fields)
        assert isinstance(headers, dict), "checked by the kit: a stub's headers are an object"
        shown = {str(k): str(v) for k, v in headers.items()}
        shown.setdefault("content-type", "application/json")
        status = route.get("status", 200)
        assert isinstance(status, int), "checked by the kit"
        return Answer(status, shown, json.dumps(body).encode("utf-8"))


def _matches(pattern_method: str, pattern_url: str, method: str, url: str) -> bool:
    bare = url.split("?", 1)[0].split("#", 1)[0]
    return pattern_method in ("*", method.upper()) and fnmatch.fnmatchcase(bare, pattern_url)


def _fields(request: Request, key: str | None) -> dict[str, Json]:
    try:
        body: Json = json.loads(request.body) if request.body else None
    except ValueError:
        body = None
    fields: dict[str, Json] = {
        "key": key,
        "method": request.method,
        "url": request.url,
        "path": urlsplit(request.url).path,
    }
    fields.update({f"header.{k}": v for k, v in request.headers.items()})
    fields.update(_flatten("json", body))
    return fields


def _flatten(prefix: str, value: Json) -> dict[str, Json]:
    out: dict[str, Json] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out[f"{prefix}.{k}"] = v
            out.update(_flatten(f"{prefix}.{k}", v))
    return out


def _substitute(value: Json, fields: dict[str, Json]) -> Json:
    if isinstance(value, dict):
        return {k: _substitute(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, fields) for v in value]
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    if whole is not None:
        return _field(fields, whole[1])
    return _PLACEHOLDER.sub(lambda m: str(_field(fields, m[1])), value)


def _field(fields: dict[str, Json], name: str) -> Json:
    lowered = name.lower() if name.startswith("header.") else name
    return fields.get(lowered)


def install_http(landing: Landing, spec: AppSpec) -> None:
    """Hook every installed HTTP client (see the module docstring); nothing without
    ``--effect-http``."""
    if not spec.http:
        return
    router = Router(landing, spec)
    for module, hook in (
        ("httpx", _hook_httpx),
        ("requests", _hook_requests),
        ("urllib3", _hook_urllib3),
    ):
        if importlib.util.find_spec(module) is not None:
            hook(router)


def _hook_httpx(router: Router) -> None:
    import httpx

    def respond(request: httpx.Request, effect: HttpEffectSpec, body: bytes) -> httpx.Response:
        seen = Request(request.method, str(request.url), _lower(request.headers), body)
        answer = router.answer(effect, seen)
        return httpx.Response(
            answer.status, headers=answer.headers, content=answer.body, request=request
        )

    sync_send = httpx.HTTPTransport.handle_request
    async_send = httpx.AsyncHTTPTransport.handle_async_request

    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        effect = router.declared(request.method, str(request.url))
        if effect is None:
            return sync_send(self, request)
        return respond(request, effect, request.read())

    async def handle_async_request(
        self: httpx.AsyncHTTPTransport, request: httpx.Request
    ) -> httpx.Response:
        effect = router.declared(request.method, str(request.url))
        if effect is None:
            return await async_send(self, request)
        return respond(request, effect, await request.aread())

    httpx.HTTPTransport.handle_request = handle_request  # type: ignore[method-assign]  # the child's own class
    httpx.AsyncHTTPTransport.handle_async_request = handle_async_request  # type: ignore[method-assign]  # the child's own class


def _hook_requests(router: Router) -> None:
    import requests
    from requests.adapters import HTTPAdapter
    from requests.structures import CaseInsensitiveDict

    send = HTTPAdapter.send

    def hooked(self: HTTPAdapter, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        method, url = str(request.method or "GET"), str(request.url)
        effect = router.declared(method, url)
        if effect is None:
            return send(self, request, **kwargs)
        answer = router.answer(
            effect, Request(method, url, _lower(request.headers), _bytes(request.body))
        )
        response = requests.Response()
        response.status_code = answer.status
        response.headers = CaseInsensitiveDict(answer.headers)
        response._content = answer.body
        response.url, response.request, response.encoding = url, request, "utf-8"
        response.reason = "OK" if answer.status < 400 else "Error"
        return response

    HTTPAdapter.send = hooked  # type: ignore[method-assign, assignment]  # the child's own class


def _hook_urllib3(router: Router) -> None:
    from urllib3.connectionpool import HTTPConnectionPool
    from urllib3.response import HTTPResponse

    urlopen = HTTPConnectionPool.urlopen

    def hooked(self: HTTPConnectionPool, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        port = "" if self.port in (None, 80, 443) else f":{self.port}"
        full = url if "://" in url else f"{self.scheme}://{self.host}{port}{url}"
        effect = router.declared(method, full)
        if effect is None:
            return urlopen(self, method, url, *args, **kwargs)
        raw = _bytes(kwargs.get("body", args[0] if args else None))
        headers = kwargs.get("headers", args[1] if len(args) > 1 else None) or {}
        answer = router.answer(effect, Request(method.upper(), full, _lower(headers), raw))
        return HTTPResponse(
            body=answer.body,
            headers=answer.headers,
            status=answer.status,
            preload_content=True,
            request_method=method,
            request_url=full,
        )

    HTTPConnectionPool.urlopen = hooked  # type: ignore[method-assign]  # the child's own class


def _bytes(body: object) -> bytes:
    """A request body as bytes (a streamed or file body is not read: shown as empty)."""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body) if isinstance(body, bytes | bytearray) else b""


def _lower(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(headers).items()}
