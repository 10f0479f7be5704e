"""Writing a repro bundle's ``repro.py``: the pieces every target's bundle shares.

A bundle (``durable-sim target bundle``, ``sim.targets.bundling``) reproduces one point without
durable-sim, as a small program an upstream maintainer can run: the target's agent or workflow
written with the framework's public API only, a kill switch, a ledger outside the process and
a driver. The framework's part is each target's template (``sim/targets/<name>/repro.tmpl``,
filled in by ``sim.targets.<name>.bundle``); the rest -- the kill switch, the ledger, the driver
and the check -- is one template for all (``repro_common.tmpl`` beside this module), inlined,
so the program is one file that imports the standard library and the framework, nothing else.

A template is Python with two sections, ``# %% imports`` and ``# %% body``: the imports of the
shared template and the target's are merged into one block at the top, the constants the point
needs (``constants``) follow, then the target's body, then the shared one. Templates are
package data (``pyproject.toml``), read with ``importlib.resources``: nothing reads the
checkout at run time.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Mapping
from importlib import resources
from typing import TypeAlias

from sim.targets.protocol import BundleCase, TargetError

#: The shared template's package and name (the kill switch, the ledger, the driver).
COMMON = ("sim.targets.kit", "repro_common.tmpl")
#: Seconds one child of a repro may run before the driver gives up on it.
CHILD_TIMEOUT_S = 120
#: The comment above the constants of the point, where the issue's excerpt starts.
KILL_COMMENT = "# The kill:"
#: The longest line of a written program (the project's own, ``pyproject.toml``).
LINE_LENGTH = 100
_SECTION = re.compile(r"^# %% (imports|body)$", re.MULTILINE)
_IMPORT = re.compile(r"^(?:from (?P<from>[\w.]+) import [\w, ]+|import (?P<plain>[\w.]+))$")

Value: TypeAlias = str | int | float | bool | tuple["Value", ...] | Mapping[str, "Value"] | None


def template(package: str, name: str) -> str:
    """A template shipped as package data."""
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def sections(text: str) -> dict[str, str]:
    """A template's ``imports`` and ``body`` (see the module docstring)."""
    parts = _SECTION.split(text)
    found = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
    if set(found) != {"imports", "body"}:
        raise ValueError("a repro template has the sections '# %% imports' and '# %% body'")
    return found


def merge_imports(*blocks: str) -> str:
    """The import lines of ``blocks`` as one block: the standard library's, then the
    framework's, each sorted as isort does (``import x`` before ``from x import y``; the names
    one module gives merged into one line)."""
    plain: tuple[set[str], set[str]] = (set(), set())
    named: tuple[dict[str, set[str]], dict[str, set[str]]] = ({}, {})
    for line in (line for block in blocks for line in block.splitlines() if line.strip()):
        match = _IMPORT.fullmatch(line)
        if match is None:
            raise ValueError(f"a template's import is one line: {line!r}")
        module = match["from"] or match["plain"]
        third = module.split(".")[0] not in sys.stdlib_module_names
        if match["from"]:
            given = line.split(" import ", 1)[1].split(",")
            named[third].setdefault(module, set()).update(n.strip() for n in given)
        else:
            plain[third].add(line)
    groups = []
    for third in (False, True):
        lines = sorted(plain[third], key=str.lower)
        for module, names in sorted(named[third].items(), key=lambda item: item[0].lower()):
            ordered = sorted(names, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
            line = f"from {module} import {', '.join(ordered)}"
            if len(line) > LINE_LENGTH:  # as the formatter splits it: one name a line
                line = f"from {module} import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"
            lines.append(line)
        if lines:
            groups.append("\n".join(lines))
    return "\n\n".join(groups)


def literal(value: Value) -> str:
    """``value`` as Python source (strings in double quotes, as the formatter writes them)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def program(
    *,
    docstring: str,
    own: str,
    case: BundleCase,
    constants: Mapping[str, Value],
    child_timeout_s: int = CHILD_TIMEOUT_S,
) -> str:
    """The whole ``repro.py``: ``docstring``, the merged imports, the kill point and the
    expected effects of ``case`` and the target's ``constants``, the target's template body
    (``own``, its text), then the shared one."""
    common, mine = sections(template(*COMMON)), sections(own)
    kill: dict[str, Value] = {
        "KILL_KIND": case.kind,
        "KILL_N": case.n,
        "KILL_WHEN": case.when,
        "EXPECTED": dict(case.expected.items()),
        "CHILD_TIMEOUT_S": child_timeout_s,
    }
    lines = [f"{name} = {literal(value)}" for name, value in {**kill, **constants}.items()]
    comment = (
        f"{KILL_COMMENT} the harness's {case.when} {case.label},\n"
        f"# counted here as the {_nth(case.n)} crossing of {case.kind}."
    )
    head = f'"""{_wrap(docstring)}\n"""\n\nfrom __future__ import annotations'
    imports = merge_imports(common["imports"], mine["imports"])
    parts = [
        head + "\n\n" + imports + "\n\n" + "\n".join([comment, *lines]),
        mine["body"],
        common["body"],
    ]
    return "\n\n\n".join(parts) + "\n"


def _wrap(text: str) -> str:
    """A docstring's paragraphs filled to the line length; indented lines (commands) as they
    are."""
    paragraphs = text.strip().split("\n\n")
    return "\n\n".join(
        p if p.startswith("    ") else textwrap.fill(" ".join(p.split()), width=96)
        for p in paragraphs
    )


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def check_kind(target: str, case: BundleCase, kinds: tuple[str, ...]) -> None:
    """``case`` kills at one of ``kinds`` (a kind, or a prefix ending in ``:`` or ``.``), or is
    refused in one line that names the kinds a bundle of ``target`` can kill at."""
    if any(case.kind == k or (k[-1] in ":." and case.kind.startswith(k)) for k in kinds):
        return
    shown = ", ".join(f"{k}*" if k[-1] in ":." else k for k in kinds)
    raise TargetError(
        f"{target}: a repro bundle kills at {shown}, not at {case.label} (its instant is inside "
        "the framework, beyond its public API)"
    )


def describe_kill(case: BundleCase, instants: dict[str, str]) -> str:
    """The kill in the framework's words: ``instants`` names each kind (or prefix) for people
    ("the checkpointer's put_writes"); the crossing's number is added when it is not the first."""
    name = next(
        (text for kind, text in instants.items() if case.kind == kind),
        next((t for k, t in instants.items() if case.kind.startswith(k)), case.kind),
    )
    nth = "" if case.n == 1 else f" (the {_nth(case.n)} one)"
    side = "right before" if case.when == "before" else "right after"
    return f"{side} {name}{nth}"


def option_refused(target: str, flag: str, value: str, bundled: tuple[str, ...]) -> TargetError:
    """The one line for an option a target's bundle does not cover yet."""
    return TargetError(
        f"{target}: a repro bundle covers {flag} {'|'.join(bundled)}, not {value} (yet)"
    )
