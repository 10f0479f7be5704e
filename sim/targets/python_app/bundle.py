"""The ``python`` target's repro bundle: the user's own program, copied beside ``repro.py``, run
in a fresh process killed at one of its declared effects or durable writes, then run again as a
restart does (``repro.tmpl`` beside this module).

What is copied (``app/`` in the bundle): the app's module, and the module of each declared
effect when it is a file next to the app (a ``FILE.py`` app's directory, or for a ``MODULE``
app the directory the command ran in); an effect of a module found elsewhere (an installed
client library) is imported from the environment the bundle runs in, and ``ISSUE.md`` says so.
A ``MODULE`` app is copied as one file under its last name, so its relative imports are not
carried over. Nothing of the user's is imported here: the files are found by path and read.

Kill points: each declared effect (wrapped as ``sim.targets.kit.effects`` wraps it, in a few
lines), each ``sqlite3`` commit, ``os.fsync``, ``os.replace`` and ``os.rename``. The rest of the
harness's boundaries (a file's ``close``, ``os.write``, PostgreSQL commits, HTTP effects) have
no bundle yet.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sim.targets.kit.bundle import Value, check_kind, describe_kill, program, template
from sim.targets.kit.spec import AppSpec
from sim.targets.protocol import (
    Bundle,
    BundleCase,
    BundleMaker,
    Target,
    TargetError,
    TargetOptions,
)

KINDS = ("effect:app.", "sqlite.commit", "os.fsync", "os.replace", "os.rename")
INSTANTS = {
    "effect:app.": "a call of the declared effect",
    "sqlite.commit": "a `sqlite3` commit",
    "os.fsync": "an `os.fsync`",
    "os.replace": "an `os.replace`",
    "os.rename": "an `os.rename`",
}


def bundler(target: Target, options: TargetOptions) -> BundleMaker:
    """The app's files, found and read once; HTTP effects and ``--postgres`` are refused."""
    app = options.app
    if app is None:
        raise TargetError(f"{target.name}: --app FILE.py:FUNCTION is required")
    for flag, given in (("--effect-http", app.http), ("--postgres", app.postgres)):
        if given:
            raise TargetError(f"{target.name}: a repro bundle covers no {flag} app (yet)")
    module, files, outside = app_files(target.name, app)

    def make(case: BundleCase) -> Bundle:
        check_kind(target.name, case, KINDS)
        kill = describe_kill(case, INSTANTS)
        effect = case.kind.removeprefix("effect:app.")
        if case.kind.startswith("effect:app."):
            kill = kill.replace("the declared effect", f"`{effect}`")
        entry = f"{module}.{app.function}()"
        docstring = (
            f"{entry} (copied from {app.entry} into app/) is killed with SIGKILL {kill}, then "
            "run again in a fresh process, as a restart does. Does a declared effect happen "
            "more often than in one run?\n\n"
            "    python repro.py    # exit 1: reproduced, 0: not"
        )
        effects = tuple((e.name, e.module, e.qualname, e.key) for e in app.effects)
        constants: dict[str, Value] = {
            "APP_MODULE": module,
            "FUNCTION": app.function,
            "EFFECTS": effects,
        }
        notes = tuple(
            f"`{name}` (a declared effect's module) is not a file next to the app: repro.py "
            "imports it from the environment it runs in."
            for name in outside
        )
        declared = ", ".join(f"`{e.name}` ({e.declared})" for e in app.effects)
        return Bundle(
            program=program(
                docstring=docstring,
                own=template(__package__ or "", "repro.tmpl"),
                case=case,
                constants=constants,
            ),
            files=files,
            framework="Python",
            setup=(
                f"The program `{app.entry}` run as `{entry}`, its declared effects {declared} "
                "landing on a ledger outside the process (a repeated idempotency key is "
                "deduplicated there, as a payment provider does)"
            ),
            kill=kill,
            resume="runs the program again, which resumes from its own durable files",
            expected=(
                "Each declared effect happens as its declaration promises across the crash "
                f"({declared}): as many times as in one run that is not killed."
            ),
            notes=notes,
            run_s=120.0,
        )

    return make


def app_files(target: str, app: AppSpec) -> tuple[str, dict[str, str], list[str]]:
    """The name the app is imported under in the bundle, its files by their path in the bundle
    (``app/...``), and the effect modules that are not files next to the app."""
    if app.app.endswith(".py"):
        source, root = Path(app.app), Path(app.app).parent
    else:
        root = Path(app.workdir)
        found = module_file(app.app, [root, *map(Path, sys.path)])
        if found is None:
            raise TargetError(f"{target}: --app {app.entry}: no file of module {app.app} found")
        source = found
    module = source.stem if source.name != "__init__.py" else source.parent.name
    if module == "repro":
        raise TargetError(f"{target}: a repro bundle cannot copy an app module named repro")
    files = {f"app/{module}.py": source.read_text(encoding="utf-8")}
    outside: list[str] = []
    for effect in app.effects:
        if not effect.module or f"app/{effect.module.replace('.', '/')}.py" in files:
            continue
        found = module_file(effect.module, [root])
        if found is None:
            outside.append(effect.module)
            continue
        parts = effect.module.split(".")
        for depth in range(1, len(parts)):  # the packages on the way, as they are
            init = root.joinpath(*parts[:depth], "__init__.py")
            if init.is_file():
                files[f"app/{'/'.join(parts[:depth])}/__init__.py"] = init.read_text("utf-8")
        files[f"app/{'/'.join(parts)}.py"] = found.read_text(encoding="utf-8")
    return module, files, outside


def module_file(dotted: str, roots: list[Path]) -> Path | None:
    """The file a dotted module is in under the first of ``roots`` that has it (``a/b.py`` or
    ``a/b/__init__.py``), found without importing anything."""
    parts = dotted.split(".")
    for root in roots:
        module, package = root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts)
        for candidate in (module, package / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None
