"""Declared effects wherever the app makes them: a function of any module, a method of a class,
a method of an object -- wrapped in the child so that every call lands on the ledger
(``Landing``) and then runs the app's own code. The wrapper is the kit's, so the landing's note of
where the app called the effect (``sim.targets.kit.landing.app_site``) looks past its frames to
the caller's line.

``--effect`` names ``module.path:qualname``:

- ``payments:issue_refund``, a function of a module: replaced in the module, and in every module
  already loaded that holds it by another name (``from payments import issue_refund`` ran
  before), so every caller finds the wrapper;
- ``payments:Mailer.send``, a method of a class (plain, ``staticmethod`` or ``classmethod``,
  defined there or inherited): replaced on that class, so every instance, made before or after,
  calls the wrapper;
- ``payments:MAILER.send``, a method of an object: replaced on that object only.

Effects of other modules are wrapped before the app is imported (``sim.targets.kit.loading``), so
an app that imports the function by name at its top gets the wrapper; a bare ``NAME`` (or a
qualname without a module) is the app's own module's, wrapped right after its import. A name that
does not resolve is one ``AppError`` line naming the module and the missing attribute.

The idempotency key is the argument of the parameter the user named (``key=invoice_id``; by
default ``idempotency_key``), found by binding the call to the callable's signature, so it is
found passed by position or by keyword; a key parameter the callable does not have is refused.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from types import ModuleType

from sim.targets.kit.declarations import AppError
from sim.targets.kit.landing import DETAIL_CHARS, LIBRARY_DIRS, Landing
from sim.targets.kit.spec import DEFAULT_KEY, SERVICE, AppSpec, EffectSpec


def wrap_effects(landing: Landing, spec: AppSpec, app_module: ModuleType | None) -> None:
    """``app_module`` None: wrap the effects of named modules (before the app is imported);
    else the effects of the app's own module."""
    for effect in spec.effects:
        if bool(effect.module) == (app_module is None):
            module = app_module if app_module is not None else _import(effect)
            _wrap(landing, effect, module)


def _import(effect: EffectSpec) -> ModuleType:
    try:
        return importlib.import_module(effect.module)
    except Exception as exc:
        raise AppError(
            f"--effect {effect.name}: importing {effect.module} raised {type(exc).__name__}: {exc}"
        ) from exc


def _wrap(landing: Landing, effect: EffectSpec, module: ModuleType) -> None:
    """Resolve ``effect.qualname`` from ``module`` and replace it on its owner (see the module
    docstring for the three kinds of owner)."""
    *path, attribute = effect.qualname.split(".")
    owner: object = module
    walked = module.__name__
    for part in path:
        if not hasattr(owner, part):
            raise AppError(f"--effect {effect.name}: {walked} has no attribute {part!r}")
        owner, walked = getattr(owner, part), f"{walked}.{part}"
    if not hasattr(owner, attribute):
        raise AppError(f"--effect {effect.name}: {walked} has no attribute {attribute!r}")
    if isinstance(owner, ModuleType):
        original = getattr(owner, attribute)
        _check_callable(effect, original)
        wrapper = _wrapper(landing, effect, original, skip_self=False)
        setattr(owner, attribute, wrapper)
        _rebind(original, wrapper)
    elif isinstance(owner, type):
        _wrap_method(landing, effect, owner, attribute)
    else:
        bound = getattr(owner, attribute)
        _check_callable(effect, bound)
        try:
            setattr(owner, attribute, _wrapper(landing, effect, bound, skip_self=False))
        except (AttributeError, TypeError) as exc:
            raise AppError(f"--effect {effect.name}: cannot replace it on {walked}: {exc}") from exc


def _wrap_method(landing: Landing, effect: EffectSpec, cls: type, attribute: str) -> None:
    """A method of ``cls`` (its own or inherited), as the descriptor it is."""
    raw = inspect.getattr_static(cls, attribute)
    replacement: object
    if isinstance(raw, staticmethod):
        replacement = staticmethod(_wrapper(landing, effect, raw.__func__, skip_self=False))
    elif isinstance(raw, classmethod):
        replacement = classmethod(_wrapper(landing, effect, raw.__func__, skip_self=True))
    else:
        _check_callable(effect, raw)
        replacement = _wrapper(landing, effect, raw, skip_self=inspect.isfunction(raw))
    setattr(cls, attribute, replacement)


def _check_callable(effect: EffectSpec, value: object) -> None:
    if not callable(value):
        raise AppError(f"--effect {effect.name}: it is a {type(value).__name__}, not callable")


def _rebind(original: object, wrapper: object) -> None:
    """Every loaded module of the app's that holds ``original`` under some name now holds
    ``wrapper``: a caller that imported the function before it was wrapped finds the wrapper.
    Modules among the libraries (``LIBRARY_DIRS``) are never the app's: none is looked into."""
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if not isinstance(module, ModuleType) or not where or where.startswith(LIBRARY_DIRS):
            continue
        for name, value in list(vars(module).items()):
            if value is original:
                setattr(module, name, wrapper)


def _wrapper(
    landing: Landing, effect: EffectSpec, original: Callable[..., object], *, skip_self: bool
) -> Callable[..., object]:
    """A callable that lands each call on the ledger, then runs ``original``. A coroutine
    function stays one (a framework tells tools apart by that) and lands when awaited, where the
    effect would happen. ``skip_self``: the first argument is the instance or class, left out of
    the ledger's description (its repr holds an address)."""
    key_of = _key_reader(effect, original)

    def land(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        key = key_of(args, kwargs)
        shown = args[1:] if skip_self else args
        landing.land(
            service=SERVICE,
            name=effect.name,
            short=effect.qualname,
            key=key,
            detail=_describe(shown, kwargs),
        )

    wrapper: Callable[..., object]
    if inspect.iscoroutinefunction(original):

        async def wrapper(*args: object, **kwargs: object) -> object:
            land(args, kwargs)
            return await original(*args, **kwargs)
    else:

        def wrapper(*args: object, **kwargs: object) -> object:
            land(args, kwargs)
            return original(*args, **kwargs)

    try:
        return functools.wraps(original)(wrapper)
    except AttributeError:  # a callable object without a __name__: keep the plain wrapper
        return wrapper


def _key_reader(
    effect: EffectSpec, original: Callable[..., object]
) -> Callable[[tuple[object, ...], dict[str, object]], str | None]:
    """How to read the idempotency key from a call's arguments (see the module docstring)."""
    try:
        signature: inspect.Signature | None = inspect.signature(original)
    except (TypeError, ValueError):  # a builtin without a signature: keyword only
        signature = None
    takes_kwargs = signature is None or any(
        p.kind is p.VAR_KEYWORD for p in signature.parameters.values()
    )
    named = signature is not None and effect.key in signature.parameters
    if effect.key != DEFAULT_KEY and not named and not takes_kwargs:
        shown = "" if signature is None else str(signature)
        raise AppError(f"--effect {effect.name}: key={effect.key} is not a parameter of it{shown}")

    def read(args: tuple[object, ...], kwargs: dict[str, object]) -> str | None:
        value = kwargs.get(effect.key)
        if value is None and named and signature is not None:
            try:
                value = signature.bind_partial(*args, **kwargs).arguments.get(effect.key)
            except TypeError:  # the call does not fit the signature: the app raises it next
                value = None
        return None if value is None else str(value)

    return read


def _describe(args: tuple[object, ...], kwargs: dict[str, object]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in sorted(kwargs.items())]
    return ", ".join(parts)[:DETAIL_CHARS]
