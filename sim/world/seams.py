"""Seams: the parts of the world you swap to crash-test your own runtime or store.

``seams(open_runtime=..., file_store=...)`` swaps them for the runs inside the ``with`` block; the
command line swaps them with ``--open-runtime SPEC`` and ``--file-store SPEC``. A failure found
with swapped seams must be reproducible with the *same* seams, or its repro line lies (it would
replay the reference runtime and pass), so ``repro_arguments`` names every swapped seam as a SPEC
the command line can load: ``path/to/file.py:name`` (a file, relative to the current directory
when it is below it) or ``package.module:name``. A seam that cannot be named that way (a lambda,
a function defined inside another) has no command-line repro; the repro line says so and, under
pytest, names the test to re-run instead.

User code at a seam is called through ``file_store`` and ``open_runtime`` below, which tell a
seam that cannot be used from the code under test: one that raises while it *builds* the store
or the runtime's context manager is ``SeamFailed`` (the harness could not run it: exit 5), one
that builds the wrong kind of object is ``SeamError`` (bad input: exit 2). What the runtime does
once opened -- its recovery included -- is the behaviour under test, and is judged as always.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable.runtime import Runtime
from durable.store.base import Store
from durable.store.file import FileStore
from sim.errors import SeamError, SeamFailed

#: What a store built by the ``file_store`` seam must have: the methods of the store contract.
STORE_METHODS = tuple(
    name for name, value in vars(Store).items() if callable(value) and not name.startswith("_")
)


def reference_file_store(root: str, fs: Any, fsync: bool) -> FileStore:
    """The reference store of the ``file`` store kind over the process's simulated fs port."""
    return FileStore(root, fs=fs, fsync=fsync)


@dataclass(frozen=True)
class Seams:
    """What you can swap to crash-test your own code under the simulator.

    ``open_runtime`` has ``durable.Runtime.open``'s keyword signature and returns an async
    context manager yielding a runtime with the same API (``conversation``; a conversation with
    ``submit``, ``submission``, ``abort``, ``pending_reconciliations``, ``resolve`` and ``state``).
    ``file_store(root, fs, fsync)`` builds the store of the ``file`` store kind over the process's
    simulated file system port (every write of yours becomes a crash point). Both must keep the
    log in ``durable.events`` records: the oracles read the log.
    """

    open_runtime: Callable[..., Any] = Runtime.open
    file_store: Callable[[str, Any, bool], Any] = reference_file_store


REFERENCE = Seams()
NAMES = tuple(f.name for f in dataclasses.fields(Seams))
_STACK = [REFERENCE]


def current() -> Seams:
    """The seams in force for runs started now."""
    return _STACK[-1]


@contextmanager
def seams(**changes: Any) -> Iterator[Seams]:
    """Run the simulator with some seams swapped (``open_runtime=``, ``file_store=``)."""
    unknown = sorted(set(changes) - set(NAMES))
    if unknown:
        raise TypeError(f"unknown seam {unknown[0]!r} (seams: {', '.join(NAMES)})")
    chosen = dataclasses.replace(_STACK[-1], **changes)
    _STACK.append(chosen)
    try:
        yield chosen
    finally:
        _STACK.pop()


def file_store(root: str, fs: Any, fsync: bool) -> Any:
    """The store of the ``file`` store kind, built by the seam in force (the reference
    ``FileStore`` unless swapped); a swapped seam's store is checked to be one."""
    seam = current().file_store
    if seam is reference_file_store:
        return seam(root, fs, fsync)
    store = _called("file_store", seam, root, fs, fsync)
    missing = [name for name in STORE_METHODS if not callable(getattr(store, name, None))]
    if missing:
        raise SeamError(
            f"the file_store seam {_named(seam)} returned a {type(store).__name__!r} object, not "
            f"a store (durable.store.base.Store): it has no {', '.join(missing)}"
        )
    return store


def open_runtime(**keywords: Any) -> Any:
    """The async context manager that opens a runtime (``durable.Runtime.open``'s keywords),
    from the seam in force; a swapped seam's is checked to be one."""
    seam = current().open_runtime
    if seam == REFERENCE.open_runtime:
        return seam(**keywords)
    opener = _called("open_runtime", seam, **keywords)
    if not (hasattr(opener, "__aenter__") and hasattr(opener, "__aexit__")):
        raise SeamError(
            f"the open_runtime seam {_named(seam)} returned a {type(opener).__name__!r} object, "
            "not an async context manager (as durable.Runtime.open does)"
        )
    return opener


def _called(name: str, seam: Callable[..., Any], *args: Any, **keywords: Any) -> Any:
    """``seam(...)``; an exception it raises is ``SeamFailed`` naming the seam and the exception
    in one line. Only ``Exception``: a simulated crash or a cancellation passes through."""
    try:
        return seam(*args, **keywords)
    except Exception as exc:
        first = str(exc).strip().splitlines()[:1]
        raise SeamFailed(
            f"the {name} seam {_named(seam)} raised {type(exc).__name__}"
            + (f": {first[0]}" if first else "")
        ) from exc


def _named(seam: Any) -> str:
    """How a message names a seam: its SPEC, or its qualified name if it has none."""
    return spec_of(seam) or getattr(seam, "__qualname__", None) or repr(seam)


def load(spec: str) -> Callable[..., Any]:
    """The object a SPEC names: ``path/to/file.py:name`` or ``package.module:name`` (the name
    may be dotted: ``module:Class.method``). The current directory is importable, as with
    ``python -m``."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise SeamError(f"seam {spec!r} is not MODULE:NAME or FILE.py:NAME")
    if where.endswith(".py"):
        module = _load_file(Path(where), spec)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except Exception as exc:  # ImportError, or the module itself failing to import
            raise SeamError(f"seam {spec!r}: cannot import {where!r}: {exc}") from exc
    target: Any = module
    for part in name.split("."):
        if not hasattr(target, part):
            raise SeamError(f"seam {spec!r}: {where} has no attribute {name!r}")
        target = getattr(target, part)
    if not callable(target):
        raise SeamError(f"seam {spec!r} is not callable")
    found: Callable[..., Any] = target
    return found


def _load_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise SeamError(f"seam {spec!r}: no file {str(path)!r}")
    resolved = path.resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == resolved:
            return module  # already loaded (e.g. by pytest): keep its objects identical
    name = "_durable_sim_seam_" + "_".join(resolved.with_suffix("").parts[1:])
    loader_spec = importlib.util.spec_from_file_location(name, resolved)
    if loader_spec is None or loader_spec.loader is None:
        raise SeamError(f"seam {spec!r}: cannot load {str(path)!r}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    sys.path.insert(0, str(resolved.parent))  # its sibling imports, as when run as a script
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise SeamError(f"seam {spec!r}: loading {str(path)!r} failed: {exc}") from exc
    finally:
        sys.path.remove(str(resolved.parent))
    return module


def spec_of(obj: Any) -> str | None:
    """A SPEC that ``load`` turns back into ``obj``, or None if there is none (lambdas, local
    functions, objects made at run time)."""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module_name or not qualname or "<" in qualname:
        return None
    module = sys.modules.get(module_name)
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    if target is None or not (target is obj or target == obj):
        return None  # not reachable under its own name (a bound classmethod compares equal)
    if getattr(module, "__package__", None):
        return f"{module_name}:{qualname}"  # importable by name wherever its package is
    # A top-level module (a script, a test file pytest imported from its folder): its name
    # alone would not import from another directory, its file does.
    source = getattr(module, "__file__", None)
    if not source:
        return None
    path = Path(source).resolve()
    try:
        return f"{path.relative_to(Path.cwd())}:{qualname}"
    except ValueError:
        return f"{path}:{qualname}"


def repro_arguments(chosen: Seams | None = None) -> tuple[list[str], str | None]:
    """The command-line options that swap the same seams as ``chosen`` (default: the current
    ones), and, when one of them cannot be named, the reason there is no command-line repro."""
    chosen = chosen or current()
    arguments: list[str] = []
    for name in NAMES:
        value = getattr(chosen, name)
        if value == getattr(REFERENCE, name):
            continue  # the reference seam (== also matches a re-bound Runtime.open)
        spec = spec_of(value)
        if spec is None:
            return [], (
                f"the {name} seam {getattr(value, '__qualname__', repr(value))} cannot be named "
                f"as FILE.py:NAME or MODULE:NAME (define it at module level)"
            )
        arguments += [f"--{name.replace('_', '-')}", spec]
    return arguments, None
