"""Loading a user's program into a target's child, and landing its effect functions on the
ledger: shared by the ``python`` target and the ``--app`` mode of the framework targets (the
effect functions are the program's clients of outside services, whatever calls them)."""

from __future__ import annotations

import contextvars
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from sim.targets.protocol import ChildContext
from sim.targets.python_app.options import SERVICE, parse_effects

#: The app's working directory inside the point directory: its durable files live here.
APP_DIR = "app"
#: The module name a ``FILE.py`` program is loaded under.
MODULE_NAME = "durable_sim_app"
#: How much of an effect's arguments a ledger row keeps.
DETAIL_CHARS = 200


#: Trace notes of a framework app: a tool call of the framework began (``tool``), and a declared
#: effect was landed while one ran (``effect``, ``tool``: its caller).
TOOL_NOTE = "tool_call"
CALLER_NOTE = "effect_caller"
#: The framework's tool call running now, in this task or thread: an effect's caller.
_TOOL: contextvars.ContextVar[str | None] = contextvars.ContextVar("app_tool", default=None)


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
    def run_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
        with running_tool(ctx, str(self.name)):
            return original_sync(self, *args, **kwargs)

    @functools.wraps(original_async)
    async def run_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        with running_tool(ctx, str(self.name)):
            return await original_async(self, *args, **kwargs)

    setattr(cls, sync, run_sync)
    setattr(cls, asynchronous, run_async)


def effect_results(
    rows: list[dict[str, Any]], tool_results: dict[str, list[str]]
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


def undeclared_tools(rows: list[dict[str, Any]]) -> dict[str, int]:
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


class AppError(Exception):
    """The program cannot be run as declared (it does not import, names no such function)."""


def enter_app_dir(ctx: ChildContext) -> str:
    """Make the point's ``app`` directory the working directory -- before the program is
    imported, so even its module-level files are the point's, never the user's -- and return the
    directory the command ran in (where a ``MODULE:FUNCTION`` is found, as ``python -m`` would)."""
    origin = os.getcwd()
    work = ctx.point_dir / APP_DIR
    work.mkdir(exist_ok=True)
    os.chdir(work)
    return origin


def load_app(app: str, *, work: str) -> tuple[ModuleType, Callable[[], Any]]:
    """The app's module and function; ``work``: the directory the command ran in."""
    where, name = app.rsplit(":", 1)
    try:
        if where.endswith(".py"):
            sys.path.insert(0, str(Path(where).parent))
            spec = importlib.util.spec_from_file_location(MODULE_NAME, where)
            if spec is None or spec.loader is None:
                raise AppError(f"{where} cannot be loaded as a module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[MODULE_NAME] = module
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, work)  # where the user ran durable-sim, as `python -m`
            module = importlib.import_module(where)
    except AppError:
        raise
    except Exception as exc:
        raise AppError(f"--app {app}: importing it raised {type(exc).__name__}: {exc}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise AppError(f"--app {app}: the module has no function {name!r}")
    return module, function


def wrap_effects(ctx: ChildContext, module: ModuleType) -> None:
    """Each declared effect function of the program's module, replaced by one that lands the
    call on the ledger (the external service) and then runs the function. A coroutine function
    stays one (a framework that awaits its tools, or runs a plain one on a thread, tells them
    apart by that), and lands its call when awaited, where the effect would happen."""
    counts: dict[str, int] = {}
    lock = threading.Lock()  # a framework may call tools on threads: numbers stay per call

    def land(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        with lock:
            counts[name] = n = counts.get(name, 0) + 1
        key = kwargs.get("idempotency_key")
        caller = _TOOL.get()
        if caller is not None:
            ctx.boundaries.note(what=CALLER_NOTE, effect=name, tool=caller)
        ctx.ledger.effect(
            ctx.boundaries,
            service=SERVICE,
            op=name,
            tool=name,
            call_id=f"{name}-{n}",
            key=None if key is None else str(key),
            process=ctx.process,
            detail=(f"by tool {caller}: " if caller else "") + _describe(args, kwargs),
        )

    for tool in parse_effects(ctx.options.effects):
        original = getattr(module, tool.name, None)
        if not callable(original):
            raise AppError(f"--effect {tool.name}: the program has no function {tool.name!r}")
        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(original):

            async def wrapper(
                *args: Any, _name: str = tool.name, _fn: Any = original, **kw: Any
            ) -> Any:
                land(_name, args, kw)
                return await _fn(*args, **kw)
        else:

            def wrapper(*args: Any, _name: str = tool.name, _fn: Any = original, **kw: Any) -> Any:
                land(_name, args, kw)
                return _fn(*args, **kw)

        setattr(module, tool.name, functools.wraps(original)(wrapper))


def _describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in sorted(kwargs.items())]
    return ", ".join(parts)[:DETAIL_CHARS]
