"""Landing a declared effect of a user's app on the effect ledger, from inside a child; and, in
the parent, what a run's trace says about the app's effects and the framework tools that made
them.

An effect is a call the app makes to the outside world -- a function of a payment client, a
method of a mailer, an HTTP request -- that the user declared (``--effect``, ``--effect-http``).
``Landing.land`` records the call on the ledger (``sim.targets.ledger``: a SQLite file outside
the child, so the effect survives the kill that follows it) inside the boundary
``effect:{service}.{name}#{name}-{n}``, deduplicated by its idempotency key as a provider does.
The wrappers that call it are ``sim.targets.kit.effects`` (functions and methods) and
``sim.targets.kit.http`` (HTTP clients).

The first call of each effect in a process also notes where the app made it (``SITE_NOTE``: the
innermost frame of the app's own code, past the wrappers and the libraries the call went
through), so a report can point at the line of the user's code a failure is about
(``effect_sites``; the SARIF view, ``sim.outputs.report.sarif``).
"""

from __future__ import annotations

import contextvars
import functools
import os
import sys
import sysconfig
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol, TypedDict

from sim.targets.boundaries import TRACE_NAME, notes_of, read_trace
from sim.targets.protocol import ChildContext, TargetState
from sim.targets.shapes import TraceRow, as_int, as_object, as_texts

#: How much of an effect's arguments a ledger row keeps.
DETAIL_CHARS = 200
#: Where installed libraries and the standard library live: their modules are never the app's
#: (``sim.targets.kit.effects`` rebinds no function there; ``app_site`` looks past their frames).
LIBRARY_DIRS = tuple(
    sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")
)
#: The kit's own modules (the wrappers, the landing): never the app's, wherever sim is installed.
_KIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The ``sim`` package: its bundled demo apps (``sim.targets.python_app.demo_job``) are an app's
#: code even when an installed wheel puts them among the libraries.
_SIM_DIR = os.path.dirname(os.path.dirname(_KIT_DIR.rstrip(os.sep))) + os.sep


class Landing:
    """One child's landing of declared effects: numbers each effect's calls (per process, under
    a lock: a framework may call tools on threads), notes the framework tool that made each
    call, and applies it on the ledger."""

    def __init__(self, ctx: ChildContext) -> None:
        self.ctx = ctx
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def land(self, *, service: str, name: str, short: str, key: str | None, detail: str) -> bool:
        """Apply one call of the effect ``name`` (unless its key was applied before): True if
        the ledger applied it, False if it deduplicated it. The call's id is ``short`` (the
        effect's qualname, an HTTP call's method) and its number in this process: the label
        ``effect:app.payments:issue_refund#issue_refund-1`` names the effect once."""
        with self._lock:
            self._counts[name] = n = self._counts.get(name, 0) + 1
        if n == 1:  # once per effect and process: the trace is synced on every note
            site = app_site()
            if site is not None:
                self.ctx.boundaries.note(what=SITE_NOTE, effect=name, file=site[0], line=site[1])
        caller = _TOOL.get()
        if caller is not None:
            self.ctx.boundaries.note(what=CALLER_NOTE, effect=name, tool=caller)
        return self.ctx.ledger.effect(
            self.ctx.boundaries,
            service=service,
            op=name,
            tool=name,
            call_id=f"{short}-{n}",
            key=key,
            process=self.ctx.process,
            detail=((f"by tool {caller}: " if caller else "") + detail)[:DETAIL_CHARS],
        )


#: Trace notes of a framework app: a tool call of the framework began (``tool``), and a declared
#: effect was landed while one ran (``effect``, ``tool``: its caller).
TOOL_NOTE = "tool_call"
CALLER_NOTE = "effect_caller"
#: Trace note of a user's app: where its code first called a declared effect (``effect``, the
#: ``file`` and ``line`` of the call), once per effect and process (``Landing.land``).
SITE_NOTE = "effect_site"
#: The framework's tool call running now, in this task or thread: an effect's caller.
_TOOL: contextvars.ContextVar[str | None] = contextvars.ContextVar("app_tool", default=None)


class EffectSite(TypedDict):
    """Where the app first called a declared effect (``effect_sites``), as a report shows it."""

    file: str
    line: int


class _Named(Protocol):
    """A framework's tool object: all a tool-call wrapper reads of it is its name."""

    @property
    def name(self) -> object: ...


def app_site() -> tuple[str, int] | None:
    """The file and line of the app's call that led here: the innermost frame outside the kit
    (the wrapper that lands the call, an HTTP client's hook) and outside the libraries the call
    went through (``requests`` under a hooked adapter, ``json`` calling a hook, a framework
    running a tool), so the line is the user's own code; None if no frame is the app's."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        where = frame.f_code.co_filename
        if _apps(where):
            return os.path.abspath(where), frame.f_lineno
        frame = frame.f_back
    return None


def _apps(where: str) -> bool:
    """``where`` (a code object's file) is the app's: a real file, not the kit's, not a
    library's (``sim``'s own demo apps are apps wherever ``sim`` is installed)."""
    if where.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    where = os.path.abspath(where)
    if where.startswith(_KIT_DIR):
        return False
    return where.startswith(_SIM_DIR) or not where.startswith(LIBRARY_DIRS)


def effect_sites(rows: list[TraceRow], workdir: str) -> dict[str, EffectSite]:
    """From a run's trace: each declared effect's call site in the app (``SITE_NOTE``), the
    first noted, by effect name; its file relative to ``workdir`` (where the command ran, a CI
    job's checkout) when it lies under it, so a report names it as the repository does."""
    sites: dict[str, EffectSite] = {}
    for row in notes_of(rows, SITE_NOTE):
        name = str(row["effect"])
        if name not in sites:
            sites[name] = {
                "file": _relative(str(row["file"]), workdir),
                "line": as_int(row["line"]),
            }
    return dict(sorted(sites.items()))


def _relative(path: str, workdir: str) -> str:
    inside = os.path.relpath(path, workdir)
    if inside == os.pardir or inside.startswith(os.pardir + os.sep):
        return path
    return Path(inside).as_posix()


@contextmanager
def running_tool(ctx: ChildContext, name: str) -> Iterator[None]:
    """Around one call of the framework's tool ``name``: noted in the trace, and the caller of
    every declared effect landed inside it. A tool whose calls land no declared effect is what
    the report lists as undeclared (``undeclared_tools``): counted, not judged. Inside another
    tool call (a framework's async entry running its sync one) it is that call."""
    if _TOOL.get() is not None:
        yield
        return
    ctx.boundaries.note(what=TOOL_NOTE, tool=name)
    token = _TOOL.set(name)
    try:
        yield
    finally:
        _TOOL.reset(token)


def wrap_tool_calls(ctx: ChildContext, cls: type, sync: str, asynchronous: str) -> None:
    """``cls.sync`` and ``cls.asynchronous`` (a framework's entries that run one tool call, the
    tool named by the instance's ``name``) run inside ``running_tool``."""
    original_sync, original_async = getattr(cls, sync), getattr(cls, asynchronous)

    @functools.wraps(original_sync)
    def run_sync(self: _Named, *args: object, **kwargs: object) -> object:
        with running_tool(ctx, str(self.name)):
            return original_sync(self, *args, **kwargs)

    @functools.wraps(original_async)
    async def run_async(self: _Named, *args: object, **kwargs: object) -> object:
        with running_tool(ctx, str(self.name)):
            return await original_async(self, *args, **kwargs)

    setattr(cls, sync, run_sync)
    setattr(cls, asynchronous, run_async)


def effect_results(
    rows: list[TraceRow], tool_results: dict[str, list[str]]
) -> tuple[dict[str, list[str]], list[str]]:
    """For H1 on an app: each declared effect's results in the framework's history -- the
    results of the tools that called it (``CALLER_NOTE`` rows of the point's trace) -- and the
    effects that have such a caller (an effect called from outside any tool is not judged)."""
    callers: dict[str, list[str]] = {}
    for row in rows:
        if row.get("t") == "note" and row.get("what") == CALLER_NOTE:
            tools = callers.setdefault(str(row["effect"]), [])
            if str(row["tool"]) not in tools:
                tools.append(str(row["tool"]))
    results = {
        effect: [call for tool in tools for call in tool_results.get(tool, [])]
        for effect, tools in callers.items()
    }
    return results, sorted(callers)


def noted_state(point_dir: Path, what: str, *, never: str) -> tuple[TraceRow | None, TargetState]:
    """An app child's last note of the run's state (``what``), and the state every framework
    reader starts from: none noted is a run that never ended (``never``, its pending work);
    else one that exists, with each declared effect's results in the framework's history --
    the results of the tools that called it (``effect_results``: H1 judged for those)."""
    rows = read_trace(point_dir / TRACE_NAME)
    notes = notes_of(rows, what)
    if not notes:
        return None, TargetState(pending=[never])
    last = notes[-1]
    noted = as_object(last.get("results", {}))
    results, judged = effect_results(rows, {tool: as_texts(ids) for tool, ids in noted.items()})
    return last, TargetState(exists=True, results=results, hidden_judged=judged)


def undeclared_tools(rows: list[TraceRow]) -> dict[str, int]:
    """From a run's trace: each tool the framework called whose calls landed no declared
    effect, with its number of calls."""
    calls: dict[str, int] = {}
    landed: set[str] = set()
    for row in rows:
        if row.get("t") != "note":
            continue
        if row.get("what") == TOOL_NOTE:
            calls[str(row["tool"])] = calls.get(str(row["tool"]), 0) + 1
        elif row.get("what") == CALLER_NOTE:
            landed.add(str(row["tool"]))
    return {tool: n for tool, n in sorted(calls.items()) if tool not in landed}
