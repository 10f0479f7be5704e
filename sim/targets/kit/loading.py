"""Loading a user's app into a target's child: its directory, its import, its declared effects
landed on the ledger wherever they are made (``sim.targets.kit.effects``, ``sim.targets.kit.http``),
and the trace notes that tie an effect to the framework tool that made it. Shared by every
target's ``--app`` mode: an adapter calls ``load_app(ctx)`` and gets the entry point."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from sim.targets.kit.declarations import AppError
from sim.targets.kit.effects import wrap_effects
from sim.targets.kit.http import install_http
from sim.targets.kit.landing import Landing
from sim.targets.kit.spec import AppSpec
from sim.targets.protocol import ChildContext

#: The app's working directory inside the point directory: its durable files live here.
APP_DIR = "app"
#: The module name a ``FILE.py`` program is loaded under.
MODULE_NAME = "durable_sim_app"


def enter_app_dir(ctx: ChildContext) -> None:
    """Make the point's ``app`` directory the working directory -- before the program is
    imported, so even its module-level files are the point's, never the user's."""
    work = ctx.point_dir / APP_DIR
    work.mkdir(exist_ok=True)
    os.chdir(work)


def load_app(ctx: ChildContext) -> tuple[ModuleType, Callable[..., object]]:
    """The app's module and entry point, in the point's ``app`` directory, with every declared
    effect landed on the ledger: HTTP calls and effects of other modules are wrapped *before*
    the app is imported (so ``from payments import issue_refund`` gets the wrapper), the app's
    own functions right after (``sim.targets.kit.effects``)."""
    spec = ctx.options.app
    assert spec is not None, "an app child runs only with --app"
    enter_app_dir(ctx)
    app_path(spec)
    landing = Landing(ctx)
    install_http(landing, spec)
    wrap_effects(landing, spec, None)
    module, function = import_app(spec)
    wrap_effects(landing, spec, module)
    return module, function


def import_app(spec: AppSpec) -> tuple[ModuleType, Callable[..., object]]:
    """Import the app (a ``FILE.py`` under ``MODULE_NAME``, its directory first on the path; a
    ``MODULE`` from the directory the command ran in, as ``python -m`` finds it) and return its
    entry point; a one-line ``AppError`` if either fails."""
    where = spec.app
    app_path(spec)
    try:
        if where.endswith(".py"):
            found = importlib.util.spec_from_file_location(MODULE_NAME, where)
            if found is None or found.loader is None:
                raise AppError(f"{where} cannot be loaded as a module")
            module = importlib.util.module_from_spec(found)
            sys.modules[MODULE_NAME] = module
            found.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except AppError:
        raise
    except Exception as exc:
        raise AppError(
            f"--app {spec.entry}: importing it raised {type(exc).__name__}: {exc}"
        ) from exc
    function = getattr(module, spec.function, None)
    if not callable(function):
        raise AppError(f"--app {spec.entry}: the module has no function {spec.function!r}")
    return module, function


def app_path(spec: AppSpec) -> None:
    """Put the app's directory first on ``sys.path`` (before its effects' modules are imported:
    they are the app's own modules, found where the app finds them)."""
    where = str(Path(spec.app).parent) if spec.app.endswith(".py") else spec.workdir
    if where not in sys.path:
        sys.path.insert(0, where)


def required_parameters(factory: Callable[..., object]) -> list[str]:
    """The factory's parameters that have no default (a callable without a signature: none):
    an app mode that calls its factory with nothing refuses one that needs more, naming them."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def call_factory(entry: str, factory: Callable[..., object], *, why_no_argument: str) -> object:
    """What an app mode's factory returns, called with nothing (``why_no_argument``: what the
    harness gives the app instead); a factory that needs arguments, or raises, is one
    ``AppError`` line naming ``entry``."""
    required = required_parameters(factory)
    if required:
        raise AppError(
            f"--app {entry}: the factory takes {', '.join(required)}; it is called with no "
            f"argument ({why_no_argument})"
        )
    try:
        return factory()
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise AppError(f"--app {entry}: calling it raised {why}") from exc
