"""A user's app as the harness runs it: one typed ``AppSpec``, parsed and checked once in the
parent from the command line's words, and handed to every child whole (``to_json`` in the
point's ``point.json``, ``from_json`` there) -- so a child never parses a flag again, and a bad
flag is refused in one line before any child starts.

What the parent cannot check without importing the user's code (does ``payments:Mailer.send``
exist?) is checked by the first child, the fault-free run, which stops at the first such error
with one line that names the module and the attribute (``sim.targets.kit.effects``): the parent
never imports the user's code, which may import a framework, start a runtime or open files.

The grammar of a declaration (``--effect`` and ``--effect-http``) is one for both:
``WHAT[=POLICY][,OPTION=VALUE...]``. ``WHAT`` is ``NAME`` (a function of the app's own module),
``module.path:qualname`` (a function of any module, ``payments:Mailer.send`` a method of a
class, ``payments:MAILER.send`` a method of an object), or for HTTP ``METHOD URL``. The policy is
one of ``POLICIES`` or a recovery policy of the reference runtime's (held to the guarantee it
promises, ``RECOVERY_GUARANTEES``); the default is ``exactly_once``. Options: ``key=PARAM`` (the
parameter that carries the idempotency key; default ``idempotency_key``) and, for HTTP,
``header=NAME`` (default ``Idempotency-Key``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from sim.targets.kit.declarations import (
    POLICIES,
    RECOVERY_GUARANTEES,
    Policy,
    TargetError,
    TargetTool,
)
from sim.targets.shapes import Json

#: ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION`` (a dotted module on the caller's path).
_APP = re.compile(r"^(?P<where>[^:]+):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "*")
#: Declared effects an app may have at most (each is a column of the report's effects).
MAX_EFFECTS = 16
#: The ledger services app effects act on: a function's, and an HTTP call's.
SERVICE = "app"
HTTP_SERVICE = "http"
#: Where an effect's idempotency key is read by default: the parameter, and the HTTP header.
DEFAULT_KEY = "idempotency_key"
DEFAULT_HEADER = "Idempotency-Key"
#: Every word a declaration may end with: a guarantee, or a recovery policy that promises one.
_POLICY_WORDS = frozenset((*POLICIES, *RECOVERY_GUARANTEES))
#: The largest JSON file an app option may name (an input, a script, a stub).
MAX_JSON_BYTES = 4 * 1024 * 1024


class EffectDoc(TypedDict):
    """An ``EffectSpec`` in ``point.json``: its fields, by name."""

    module: str
    qualname: str
    policy: Policy
    declared: str
    key: str


class HttpEffectDoc(TypedDict):
    """An ``HttpEffectSpec`` in ``point.json``: its fields, by name."""

    method: str
    url: str
    policy: Policy
    declared: str
    header: str


class JsonFileDoc(TypedDict):
    """A ``JsonFile`` in ``point.json``: the value travels with the path, read once."""

    path: str
    value: Json


class AppSpecDoc(TypedDict):
    """An ``AppSpec`` in ``point.json`` (``to_json``), what every child reads (``from_json``):
    the parent's checked spec, field by field, so no child parses a flag again."""

    app: str
    function: str
    workdir: str
    effects: list[EffectDoc]
    http: list[HttpEffectDoc]
    http_stub: JsonFileDoc | None
    input: JsonFileDoc | None
    model_script: JsonFileDoc | None
    deps: JsonFileDoc | None
    answers: JsonFileDoc | None
    thread: str
    postgres: bool


@dataclass(frozen=True, kw_only=True)
class EffectSpec:
    """A callable of the app that acts on the outside world: ``module`` ("" for the app's own),
    ``qualname`` (``charge``, ``Mailer.send``, ``MAILER.send``), the guarantee ``policy`` the
    user declared (``declared``: the word they wrote), and the parameter that carries its key."""

    module: str
    qualname: str
    policy: Policy
    declared: str
    key: str = DEFAULT_KEY

    @property
    def name(self) -> str:
        """How reports, the ledger and labels name it: ``charge``, ``payments:MAILER.send``."""
        return f"{self.module}:{self.qualname}" if self.module else self.qualname

    def text(self) -> str:
        """The canonical ``--effect`` value (what replay lines repeat)."""
        option = "" if self.key == DEFAULT_KEY else f",key={self.key}"
        return f"{self.name}={self.declared}{option}"

    def to_json(self) -> EffectDoc:
        return {
            "module": self.module,
            "qualname": self.qualname,
            "policy": self.policy,
            "declared": self.declared,
            "key": self.key,
        }


@dataclass(frozen=True, kw_only=True)
class HttpEffectSpec:
    """HTTP calls that act on the outside world: ``method`` (or ``*``) and a URL pattern (``*``
    matches any run of characters, the query string is ignored), the declared policy, and the
    request header that carries the idempotency key."""

    method: str
    url: str
    policy: Policy
    declared: str
    header: str = DEFAULT_HEADER

    @property
    def name(self) -> str:
        return f"{self.method} {self.url}"

    def text(self) -> str:
        option = "" if self.header == DEFAULT_HEADER else f",header={self.header}"
        return f"{self.name}={self.declared}{option}"

    def to_json(self) -> HttpEffectDoc:
        return {
            "method": self.method,
            "url": self.url,
            "policy": self.policy,
            "declared": self.declared,
            "header": self.header,
        }


@dataclass(frozen=True, kw_only=True)
class JsonFile:
    """An option's JSON file: its path (absolute: children run elsewhere; what replay lines
    repeat) and its value, read once in the parent."""

    path: str
    value: Json


@dataclass(frozen=True, kw_only=True)
class AppSpec:
    """Everything about the user's app a target needs, checked (see the module docstring)."""

    app: str  # an absolute FILE.py, or a dotted MODULE
    function: str  # the entry point: main(), a factory, a workflow
    workdir: str  # where the command ran: a MODULE is found there, as ``python -m`` does
    effects: tuple[EffectSpec, ...] = ()
    http: tuple[HttpEffectSpec, ...] = ()
    http_stub: JsonFile | None = None
    input: JsonFile | None = None
    model_script: JsonFile | None = None
    deps: JsonFile | None = None
    answers: JsonFile | None = None  # LangGraph: resume values for interrupt(), in order
    thread: str = ""
    postgres: bool = False

    @property
    def entry(self) -> str:
        """``FILE.py:FUNCTION`` or ``MODULE:FUNCTION``, as the user named it (absolute)."""
        return f"{self.app}:{self.function}"

    def declared(self) -> tuple[EffectSpec | HttpEffectSpec, ...]:
        return (*self.effects, *self.http)

    def tools(self) -> tuple[TargetTool, ...]:
        """The declared effects as the judge holds them: each function's calls on the ``app``
        service, each HTTP pattern's on the ``http`` one, by name."""
        return tuple(
            TargetTool(
                d.name,
                SERVICE if isinstance(d, EffectSpec) else HTTP_SERVICE,
                d.policy,
                declared=d.declared,
            )
            for d in self.declared()
        )

    def to_json(self) -> AppSpecDoc:
        return {
            "app": self.app,
            "function": self.function,
            "workdir": self.workdir,
            "effects": [e.to_json() for e in self.effects],
            "http": [h.to_json() for h in self.http],
            "http_stub": _file_doc(self.http_stub),
            "input": _file_doc(self.input),
            "model_script": _file_doc(self.model_script),
            "deps": _file_doc(self.deps),
            "answers": _file_doc(self.answers),
            "thread": self.thread,
            "postgres": self.postgres,
        }

    def turns(self) -> list[dict[str, Json]]:
        """The model script's turns ([] without one): a list of objects, checked by the kit
        (``sim.targets.kit.options.check_script``)."""
        script = [] if self.model_script is None else self.model_script.value
        assert isinstance(script, list), "checked by the kit"
        return [dict(turn) for turn in script if isinstance(turn, dict)]

    @classmethod
    def from_json(cls, doc: AppSpecDoc) -> AppSpec:
        def file(given: JsonFileDoc | None) -> JsonFile | None:
            return None if given is None else JsonFile(path=given["path"], value=given["value"])

        return cls(
            app=doc["app"],
            function=doc["function"],
            workdir=doc["workdir"],
            effects=tuple(EffectSpec(**e) for e in doc["effects"]),
            http=tuple(HttpEffectSpec(**h) for h in doc["http"]),
            http_stub=file(doc.get("http_stub")),
            input=file(doc.get("input")),
            model_script=file(doc.get("model_script")),
            deps=file(doc.get("deps")),
            answers=file(doc.get("answers")),
            thread=doc["thread"],
            postgres=doc["postgres"],
        )

    def flags(self) -> list[str]:
        """The app flags this spec was given beyond ``--app``, by name: what a target whose
        ``AppShape`` does not take one refuses, naming it."""
        given = {
            "--effect": bool(self.effects),
            "--effect-http": bool(self.http),
            "--http-stub": self.http_stub is not None,
            "--input": self.input is not None,
            "--model-script": self.model_script is not None,
            "--deps": self.deps is not None,
            "--answers": self.answers is not None,
            "--thread": bool(self.thread),
            "--postgres": self.postgres,
        }
        return [flag for flag, present in given.items() if present]

    def words(self) -> list[str]:
        """The command-line words that give this spec (``--app ... --effect ...``): the one
        place replay lines, bundles and reports spell the options of an app."""
        words = ["--app", self.entry]
        words += [w for e in self.effects for w in ("--effect", e.text())]
        words += [w for h in self.http for w in ("--effect-http", h.text())]
        for flag, given in (
            ("--http-stub", self.http_stub),
            ("--input", self.input),
            ("--model-script", self.model_script),
            ("--deps", self.deps),
            ("--answers", self.answers),
        ):
            if given is not None:
                words += [flag, given.path]
        if self.thread:
            words += ["--thread", self.thread]
        if self.postgres:
            words.append("--postgres")
        return words


def _file_doc(file: JsonFile | None) -> JsonFileDoc | None:
    return None if file is None else {"path": file.path, "value": file.value}


@dataclass(frozen=True, kw_only=True)
class AppArgs:
    """The command line's words about an app, before they are checked (``parse_app``)."""

    app: str = ""
    effects: Sequence[str] = ()
    http: Sequence[str] = ()
    http_stub: str = ""
    input: str = ""
    model_script: str = ""
    deps: str = ""
    answers: str = ""
    thread: str = ""
    postgres: bool = False
    workdir: str = field(default_factory=lambda: str(Path.cwd()))

    def given(self) -> list[str]:
        """The flags given, by name (``--effect``, ``--input``, ...): what a target that takes
        no app refuses, naming them."""
        flags = {
            "--app": self.app,
            "--effect": bool(self.effects),
            "--effect-http": bool(self.http),
            "--http-stub": self.http_stub,
            "--input": self.input,
            "--model-script": self.model_script,
            "--deps": self.deps,
            "--answers": self.answers,
            "--thread": self.thread,
            "--postgres": self.postgres,
        }
        return [flag for flag, value in flags.items() if value]


def parse_app(target: str, args: AppArgs) -> AppSpec:
    """``args`` checked and read into an ``AppSpec`` (files made absolute and loaded); one
    ``TargetError`` line naming ``target``, the flag and the problem otherwise."""
    match = _APP.fullmatch(args.app.strip())
    if match is None:
        raise TargetError(
            f"{target}: --app is FILE.py:FUNCTION or MODULE:FUNCTION, not {args.app!r}"
        )
    where = match["where"]
    if where.endswith(".py"):
        path = (Path(args.workdir) / where).resolve()
        if not path.is_file():
            raise TargetError(f"{target}: --app {args.app!r}: no file {where}")
        where = str(path)
    elif not _DOTTED.fullmatch(where):
        raise TargetError(f"{target}: --app {args.app!r}: {where!r} is not a module name")
    effects = tuple(e for text in args.effects for e in parse_effects(target, text))
    http = tuple(parse_http(target, text) for text in args.http)
    names = [e.name for e in effects] + [h.name for h in http]
    for name in names:
        if names.count(name) > 1:
            raise TargetError(f"{target}: the effect {name!r} is declared twice")
    if len(names) > MAX_EFFECTS:
        raise TargetError(f"{target}: at most {MAX_EFFECTS} declared effects, not {len(names)}")
    if args.thread and not _NAME.fullmatch(args.thread.replace("-", "_")):
        raise TargetError(f"{target}: --thread {args.thread!r}: letters, digits, '-' and '_'")
    stub = read_json(target, "--http-stub", args.http_stub, args.workdir)
    if stub is not None:
        check_stub(target, stub)
    return AppSpec(
        app=where,
        function=match["function"],
        workdir=args.workdir,
        effects=effects,
        http=http,
        http_stub=stub,
        input=read_json(target, "--input", args.input, args.workdir),
        model_script=read_json(target, "--model-script", args.model_script, args.workdir),
        deps=read_json(target, "--deps", args.deps, args.workdir),
        answers=read_json(target, "--answers", args.answers, args.workdir),
        thread=args.thread,
        postgres=args.postgres,
    )


def _declaration(
    target: str, flag: str, text: str, options: tuple[str, ...]
) -> tuple[str, Policy, str, dict[str, str]]:
    """``WHAT[=POLICY][,OPTION=VALUE...]`` as (what, guarantee, declared word, options). An
    option is a trailing ``,name=value`` part; a comma or an ``=`` anywhere else belongs to
    ``WHAT`` (a URL may hold both: ``/v1/a,b``, ``?q=refund``)."""
    parts = [part.strip() for part in text.split(",")]
    given: dict[str, str] = {}
    while len(parts) > 1 and re.fullmatch(r"[a-z_]+=[^/]*", parts[-1]):
        option, _, value = parts.pop().partition("=")
        if option not in options or not value:
            allowed = ", ".join(f"{o}=..." for o in options)
            raise TargetError(
                f"{target}: {flag} {text!r}: {option}={value} is not an option ({allowed})"
            )
        given[option] = value
    head = ",".join(parts)
    what, equals, declared = head.rpartition("=")
    in_query = "?" in what and flag == "--effect-http"
    if not equals or (in_query and declared not in _POLICY_WORDS):
        what, declared = head, ""
    declared = declared or "exactly_once"
    guarantee = RECOVERY_GUARANTEES.get(declared, declared)
    for policy in POLICIES:
        if policy == guarantee:
            return what.strip(), policy, declared, given
    words = ", ".join((*POLICIES, *RECOVERY_GUARANTEES))
    raise TargetError(f"{target}: {flag} {text!r}: the policy is one of {words}")


def parse_effects(target: str, text: str) -> tuple[EffectSpec, ...]:
    """One ``--effect`` value: one declaration, or several separated by commas (the earlier
    form ``charge,notify=at_least_once``); a ``key=`` part belongs to the one before it."""
    groups: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        option = part.partition("=")[0]
        if option == "key" and groups and part.partition("=")[2] not in _POLICY_WORDS:
            groups[-1] += f",{part}"
        else:
            groups.append(part)
    if not groups:
        raise TargetError(f"{target}: --effect {text!r}: name an effect")
    return tuple(_parse_effect(target, group) for group in groups)


def _parse_effect(target: str, text: str) -> EffectSpec:
    what, policy, declared, options = _declaration(target, "--effect", text, ("key",))
    module, _, qualname = what.rpartition(":")
    if module and not _DOTTED.fullmatch(module):
        raise TargetError(f"{target}: --effect {text!r}: {module!r} is not a module name")
    if not _DOTTED.fullmatch(qualname):
        raise TargetError(
            f"{target}: --effect {text!r}: NAME, or module.path:qualname "
            "(payments:issue_refund, payments:Mailer.send, payments:MAILER.send)"
        )
    key = options.get("key", DEFAULT_KEY)
    if not _NAME.fullmatch(key):
        raise TargetError(f"{target}: --effect {text!r}: key={key} is not a parameter name")
    return EffectSpec(module=module, qualname=qualname, policy=policy, declared=declared, key=key)


def parse_http(target: str, text: str) -> HttpEffectSpec:
    """One ``--effect-http`` value: ``METHOD URL[=POLICY][,header=NAME]``."""
    what, policy, declared, options = _declaration(target, "--effect-http", text, ("header",))
    method, _, url = what.partition(" ")
    method, url = method.strip().upper(), url.strip()
    if method not in _METHODS or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise TargetError(
            f"{target}: --effect-http {text!r}: METHOD URL, e.g. "
            "'POST https://payments.example.com/v1/refunds' (* matches any characters)"
        )
    header = options.get("header", DEFAULT_HEADER)
    if not re.fullmatch(r"[A-Za-z0-9-]+", header):
        raise TargetError(f"{target}: --effect-http {text!r}: header={header} is not a header")
    return HttpEffectSpec(method=method, url=url, policy=policy, declared=declared, header=header)


def read_json(target: str, flag: str, path: str, workdir: str) -> JsonFile | None:
    """``path`` (relative to ``workdir``) read as JSON and made absolute; "" is None."""
    if not path:
        return None
    file = (Path(workdir) / path).resolve()
    try:
        if file.stat().st_size > MAX_JSON_BYTES:
            raise TargetError(f"{target}: {flag} {path}: larger than {MAX_JSON_BYTES} bytes")
        value: Json = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TargetError(f"{target}: {flag} {path}: {type(exc).__name__}: {exc}") from exc
    return JsonFile(path=str(file), value=value)


def check_stub(target: str, stub: JsonFile) -> None:
    """A ``--http-stub`` file is ``{"routes": [{"method": ..., "url": ..., "status": int,
    "json": ..., "headers": {...}}]}`` (``status``, ``json`` and ``headers`` optional): refused
    here, naming the route, before any child runs."""
    doc = stub.value
    if not isinstance(doc, dict) or set(doc) != {"routes"} or not isinstance(doc["routes"], list):
        raise TargetError(f'{target}: --http-stub {stub.path}: expected {{"routes": [...]}}')
    for n, route in enumerate(doc["routes"], 1):
        if not _route_ok(route):
            raise TargetError(
                f"{target}: --http-stub {stub.path}: route {n} is not "
                '{"method": "POST", "url": "https://...", "status": 200, "json": {...}}'
            )


def _route_ok(route: Json) -> bool:
    if not isinstance(route, dict) or not set(route) <= {
        "method",
        "url",
        "status",
        "json",
        "headers",
    }:
        return False
    method, url = route.get("method"), route.get("url")
    if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        return False
    status, headers = route.get("status", 200), route.get("headers", {})
    return (
        isinstance(method, str)
        and method.upper() in _METHODS
        and isinstance(url, str)
        and isinstance(status, int)
        and 100 <= status <= 599
        and isinstance(headers, dict)
        and all(isinstance(v, str) for v in headers.values())
    )
