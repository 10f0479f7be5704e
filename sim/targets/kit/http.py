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

A call through ``requests`` lands once: its adapter answers it, so the ``urllib3`` pool under
the adapter never sees it. The answer is each client's own response type, built the way the
client builds one from the wire (``requests`` from a ``urllib3`` response, through the adapter's
``build_response``), so ``.json()``, ``.status_code``, ``.reason``, ``.raise_for_status()``,
``.headers``, streaming and ``with`` behave as they do against a server.

A stub route answers with its ``status``, ``headers`` and ``json``; a string in them may hold
the request's fields: ``{json.FIELD}`` (a dotted path into the request's JSON body, a list
index a number), ``{header.NAME}``, ``{key}`` (the idempotency key), ``{method}``, ``{url}``,
``{path}``. A string that is one placeholder alone takes the field's value as it is (a number
stays a number); inside a longer string a missing field is empty. A URL pattern's only wildcard
is ``*`` (any run of characters); the query string and fragment are ignored on both sides, and
the scheme, the host and a default port are compared as a server does (case-insensitively,
``:443`` as no port).

A call whose key the ledger deduplicates gets the answer the *first* call with that key got,
as a provider replays its stored response, even when its body differs: each keyed answer is
kept in the point's trace (a note, ``ANSWER_NOTE``: the harness's own file, shared by the
point's processes, never the app's) before the call lands, and the ledger's applied row says
whose it was. An answer kept by a process killed before its call landed is never replayed.

A client is hooked when the app (or its framework) imports it, not before: a program that uses
only ``httpx`` does not pay for importing ``requests`` in every child.

Where the app made a declared call is the line of its own code under the client's frames: the
landing's note (``sim.targets.kit.landing.app_site``) looks past this module's hooks and the
client library to it, so a report points at ``requests.post(...)`` in the app.
"""

from __future__ import annotations

import functools
import http
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import io
import json
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.kit.landing import Landing
from sim.targets.kit.spec import HTTP_SERVICE, AppSpec, HttpEffectSpec
from sim.targets.shapes import Json, as_int, as_object

if TYPE_CHECKING:
    from urllib3.connectionpool import HTTPConnectionPool
    from urllib3.response import BaseHTTPResponse, HTTPResponse

_PLACEHOLDER = re.compile(r"\{(json(?:\.[^{}.]+)+|header\.[^{}]+|key|method|url|path)\}")
#: The trace note that keeps a keyed call's answer, for the calls that repeat its key.
ANSWER_NOTE = "http_answer"
#: The ports a URL leaves out, by scheme.
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}
#: How much of a request's body a ledger row shows.
_DETAIL_BODY = 120


@dataclass(frozen=True)
class Answer:
    """What a stubbed call returns."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def reason(self) -> str:
        """The reason phrase a server sends with ``status`` ("" for a code it has none for)."""
        try:
            return http.HTTPStatus(self.status).phrase
        except ValueError:
            return ""

    def to_json(self) -> dict[str, Json]:
        return {"status": self.status, "headers": dict(self.headers), "body": self.body.decode()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Json]) -> Answer:
        """An answer a trace note kept (``to_json``: the headers were written as text)."""
        headers = {name: str(value) for name, value in as_object(doc["headers"]).items()}
        return cls(as_int(doc["status"]), headers, str(doc["body"]).encode())


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
        self._lock = threading.Lock()  # a keyed answer is kept and landed in one step

    def declared(self, method: str, url: str) -> HttpEffectSpec | None:
        """The first declared pattern the call matches (None: the call goes out as it is)."""
        return next((e for e in self.effects if _matches(e.method, e.url, method, url)), None)

    def answer(self, effect: HttpEffectSpec, request: Request) -> Answer:
        """Land the call on the ledger and answer it: the stub's answer, or the first answer
        to its key when the ledger deduplicates it (see the module docstring)."""
        key = request.headers.get(effect.header.lower())
        answer = self.stubbed(request, key)
        body = request.body[:_DETAIL_BODY].decode("utf-8", "replace")
        detail = f"{request.method} {request.url} {body}".rstrip()
        with self._lock:
            if key is not None:
                self._keep(key, answer)
            applied = self.landing.land(
                service=HTTP_SERVICE,
                name=effect.name,
                short=request.method,
                key=key,
                detail=detail,
            )
        if applied or key is None:
            return answer
        return self._first(key) or answer

    def stubbed(self, request: Request, key: str | None) -> Answer:
        """The stub's answer to ``request``: its first route that matches, or ``200 {}``."""
        route = next(
            (
                r
                for r in self.routes
                if _matches(str(r["method"]).upper(), str(r["url"]), request.method, request.url)
            ),
            None,
        )
        if route is None:
            return _answer(200, {}, {})
        fields = _fields(request, key)
        headers = _substitute(route.get("headers", {}), fields)
        assert isinstance(headers, dict), "checked by the kit: a stub's headers are an object"
        status = route.get("status", 200)
        assert isinstance(status, int), "checked by the kit"
        return _answer(status, headers, _substitute(route.get("json", {}), fields))

    def _keep(self, key: str, answer: Answer) -> None:
        """Note this process's answer to ``key`` in the trace (one row: a kill leaves it whole
        or absent; the harness's own file, so no boundary of the app's is crossed)."""
        self.landing.ctx.boundaries.note(what=ANSWER_NOTE, key=key, **answer.to_json())

    def _first(self, key: str) -> Answer | None:
        """The answer kept by the process whose call with ``key`` the ledger applied: that
        process's first call with the key (an earlier one would have been the applied one)."""
        ctx = self.landing.ctx
        applied = [r for r in ctx.ledger.rows() if r.key == key and r.applied]
        if not applied:
            return None
        kept = notes_of(read_trace(ctx.point_dir / TRACE_NAME), ANSWER_NOTE)
        return next(
            (
                Answer.from_json(note)
                for note in kept
                if note["p"] == applied[0].process and note["key"] == key
            ),
            None,
        )


def _answer(status: int, headers: Mapping[str, Json], body: Json) -> Answer:
    """An answer with the headers a JSON API sends (the stub's own win)."""
    content = json.dumps(body).encode()
    shown = {str(k).lower(): str(v) for k, v in headers.items()}
    shown.setdefault("content-type", "application/json")
    shown["content-length"] = str(len(content))
    return Answer(status, shown, content)


def _matches(pattern_method: str, pattern_url: str, method: str, url: str) -> bool:
    if pattern_method not in ("*", method.upper()):
        return False
    return _glob(pattern_url).fullmatch(_bare(url)) is not None


@functools.lru_cache(maxsize=64)
def _glob(pattern: str) -> re.Pattern[str]:
    """A URL pattern as a regular expression: ``*`` is any run of characters, nothing else is
    special (a ``?`` or ``[`` is the URL's own)."""
    return re.compile(".*".join(re.escape(part) for part in _bare(pattern).split("*")))


def _bare(url: str) -> str:
    """``url`` as the matching compares it: without its query string and fragment, its scheme
    and host in lower case, without a default port, its empty path ``/``."""
    url = url.split("#", 1)[0].split("?", 1)[0]
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    scheme = scheme.lower()
    host, slash, path = rest.partition("/")
    host = host.lower()
    if scheme in _DEFAULT_PORTS:
        host = host.removesuffix(_DEFAULT_PORTS[scheme])
    return f"{scheme}://{host}{slash}{path}" if slash else f"{scheme}://{host}/"


def _fields(request: Request, key: str | None) -> dict[str, Json]:
    try:
        body: Json = json.loads(request.body) if request.body else None
    except ValueError:
        body = None
    fields: dict[str, Json] = {
        "key": key,
        "method": request.method,
        "url": request.url,
        "path": urlsplit(request.url).path or "/",
    }
    fields.update({f"header.{k}": v for k, v in request.headers.items()})
    fields.update(_flatten("json", body))
    return fields


def _flatten(prefix: str, value: Json) -> dict[str, Json]:
    """Every field of a JSON body by its dotted path (``json.refund.amount``, ``json.items.0``)."""
    items: Iterable[tuple[str, Json]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((str(n), v) for n, v in enumerate(value))
    else:
        return {}
    out: dict[str, Json] = {}
    for k, v in items:
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
    return _PLACEHOLDER.sub(lambda m: _text(_field(fields, m[1])), value)


def _field(fields: dict[str, Json], name: str) -> Json:
    lowered = name.lower() if name.startswith("header.") else name
    return fields.get(lowered)


def _text(value: Json) -> str:
    """A field inside a longer string: a string as it is, a missing field empty, else JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value)


def install_http(landing: Landing, spec: AppSpec) -> None:
    """Hook every HTTP client (see the module docstring): one already imported now, the others
    when they are imported; nothing without ``--effect-http``."""
    if not spec.http:
        return
    router = Router(landing, spec)
    waiting: dict[str, Callable[[Router], None]] = {}
    for module, hook in _HOOKS.items():
        if module in sys.modules:
            hook(router)
        else:
            waiting[module] = hook
    if waiting:
        sys.meta_path.insert(0, _HookOnImport(router, waiting))


class _HookOnImport(importlib.abc.MetaPathFinder):
    """Hooks a client right after its module is first executed, whoever imports it: the spec
    is the other finders', with its loader's ``exec_module`` followed by the hook (the import
    system, and the module's ``__loader__``, are otherwise untouched)."""

    def __init__(self, router: Router, waiting: dict[str, Callable[[Router], None]]) -> None:
        self.router = router
        self.waiting = waiting

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        hook = self.waiting.pop(fullname, None)
        if hook is None:
            return None
        found = importlib.util.find_spec(fullname)  # the finders after this one: popped above
        if found is None or found.loader is None:
            return found
        loader = found.loader
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            if module.__name__ == fullname:
                hook(self.router)

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this module's loader
        return found


def _hook_httpx(router: Router) -> None:
    # the app's HTTP client: installed only where the app uses it
    import httpx

    def respond(request: httpx.Request, effect: HttpEffectSpec, body: bytes) -> httpx.Response:
        seen = Request(request.method, str(request.url), _lower(request.headers), body)
        answer = router.answer(effect, seen)
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            content=answer.body,
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason.encode()},
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

    sync, aio = httpx.HTTPTransport, httpx.AsyncHTTPTransport
    sync.handle_request = handle_request  # type: ignore[method-assign]  # this child's own class
    aio.handle_async_request = handle_async_request  # type: ignore[method-assign]  # the child's


def _hook_requests(router: Router) -> None:
    """``HTTPAdapter.send`` answers a declared call with what the adapter builds from a
    ``urllib3`` response (``build_response``): a real ``requests.Response`` whose ``raw``
    reads the stub's body, for ``stream=True`` too."""
    # the app's HTTP client: installed only where the app uses it
    import requests
    from requests.adapters import HTTPAdapter

    send = HTTPAdapter.send

    def hooked(
        self: HTTPAdapter, request: requests.PreparedRequest, *args: Any, **kwargs: Any
    ) -> requests.Response:
        method = str(request.method or "GET").upper()
        url = request.url.decode() if isinstance(request.url, bytes) else str(request.url)
        effect = router.declared(method, url)
        if effect is None:
            return send(self, request, *args, **kwargs)
        seen = Request(method, url, _lower(request.headers), _bytes(request.body))
        answer = router.answer(effect, seen)
        raw = _urllib3_response(answer, method, url, preload=False, decode=False)
        return self.build_response(request, raw)

    HTTPAdapter.send = hooked  # type: ignore[method-assign]  # the child's own class


def _hook_urllib3(router: Router) -> None:
    """``HTTPConnectionPool.urlopen`` (which ``PoolManager`` and ``urllib3.request`` reach)
    answers a declared call with a ``urllib3`` response, honouring ``preload_content``."""
    # the app's HTTP client: installed only where the app uses it
    from urllib3.connectionpool import HTTPConnectionPool

    urlopen = HTTPConnectionPool.urlopen
    signature = inspect.signature(urlopen)

    def hooked(
        self: HTTPConnectionPool, method: str, url: str, *args: Any, **kwargs: Any
    ) -> BaseHTTPResponse:
        full = url if "://" in url else _pool_url(self) + url
        effect = router.declared(method, full)
        if effect is None:
            return urlopen(self, method, url, *args, **kwargs)
        call = signature.bind(self, method, url, *args, **kwargs)
        call.apply_defaults()
        given = call.arguments
        headers = given["headers"] if given["headers"] is not None else self.headers
        seen = Request(method.upper(), full, _lower(headers), _bytes(given["body"]))
        answer = router.answer(effect, seen)
        return _urllib3_response(
            answer,
            method.upper(),
            full,
            preload=bool(given["preload_content"]),
            decode=bool(given["decode_content"]),
        )

    HTTPConnectionPool.urlopen = hooked  # type: ignore[method-assign]  # the child's own class


_HOOKS: dict[str, Callable[[Router], None]] = {
    "httpx": _hook_httpx,
    "requests": _hook_requests,
    "urllib3": _hook_urllib3,
}


def _pool_url(pool: HTTPConnectionPool) -> str:
    """``https://host[:port]`` of a ``urllib3`` pool (no default port), as the request's URL
    starts."""
    host = f"[{pool.host}]" if ":" in str(pool.host) else str(pool.host)
    port = "" if pool.port is None else f":{pool.port}"
    if port == _DEFAULT_PORTS.get(str(pool.scheme)):
        port = ""
    return f"{pool.scheme}://{host}{port}"


def _urllib3_response(
    answer: Answer, method: str, url: str, *, preload: bool, decode: bool
) -> HTTPResponse:
    """A ``urllib3`` response as the pool returns one from the wire: its body read from a
    stream, so ``read``, ``stream``, ``data`` and ``json`` work as they do there."""
    # the app's HTTP client: installed only where the app uses it
    from urllib3.response import HTTPResponse

    return HTTPResponse(
        body=io.BytesIO(answer.body),
        headers=answer.headers,
        status=answer.status,
        version=11,
        version_string="HTTP/1.1",
        reason=answer.reason,
        preload_content=preload,
        decode_content=decode,
        request_method=method,
        request_url=url,
    )


def _bytes(body: object) -> bytes:
    """A request body as bytes, as the client would send it: text encoded, a file or an
    iterable of chunks read (it is never sent, so reading it up costs the app nothing)."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if hasattr(body, "read"):
        return _bytes(body.read())
    if isinstance(body, Iterable):
        return b"".join(_bytes(chunk) for chunk in body)
    return b""


def _lower(headers: Mapping[str, object]) -> dict[str, str]:
    """Headers by lower-case name, values as text (``requests`` and ``urllib3`` take bytes)."""
    return {_str(k).lower(): _str(v) for k, v in dict(headers).items()}


def _str(value: object) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)
