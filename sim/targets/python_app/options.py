"""The ``python`` target's options: the program (``--app``) and its effect functions
(``--effect NAME=POLICY``), checked in the parent before any child starts and read again in each
child (``sim.targets.python_app``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sim.targets.protocol import POLICIES, RECOVERY_GUARANTEES, TargetError, TargetTool

#: ``FILE.py:FUNCTION`` or ``MODULE:FUNCTION`` (a dotted module on the caller's path).
_APP = re.compile(r"^(?P<where>[^:]+):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Effect functions a program may declare at most (each is a column of the report's effects).
MAX_EFFECTS = 16
#: The ledger service every effect function of a program acts on.
SERVICE = "app"


def parse_effects(text: str) -> tuple[TargetTool, ...]:
    """``charge=exactly_once,notify=at_least_once`` as the tools the judge holds to their
    policies (a bare name is ``exactly_once``; a recovery policy of the reference runtime's,
    ``charge=idempotent``, is held to the guarantee it promises); a malformed entry is a
    one-line ``TargetError``."""
    tools: list[TargetTool] = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, _, policy = entry.partition("=")
        policy = policy or "exactly_once"
        if not _NAME.fullmatch(name):
            raise TargetError(f"python: --effect {entry!r}: NAME=POLICY with NAME a function name")
        guarantee = RECOVERY_GUARANTEES.get(policy, policy)
        if guarantee not in POLICIES:
            words = ", ".join((*POLICIES, *RECOVERY_GUARANTEES))
            raise TargetError(f"python: --effect {entry!r}: the policy is one of {words}")
        if any(t.name == name for t in tools):
            raise TargetError(f"python: --effect {name!r} is declared twice")
        tools.append(TargetTool(name, SERVICE, guarantee, declared=policy))
    if len(tools) > MAX_EFFECTS:
        raise TargetError(f"python: at most {MAX_EFFECTS} --effect functions, not {len(tools)}")
    return tuple(tools)


def checked_app(text: str) -> str:
    """The ``--app`` value with a file made absolute (children run in the point's directory);
    one line naming the problem otherwise."""
    match = _APP.fullmatch(text.strip())
    if match is None:
        raise TargetError(f"python: --app is FILE.py:FUNCTION or MODULE:FUNCTION, not {text!r}")
    where, function = match["where"], match["function"]
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise TargetError(f"python: --app {text!r}: no file {where}")
        return f"{path}:{function}"
    if not all(_NAME.fullmatch(part) for part in where.split(".")):
        raise TargetError(f"python: --app {text!r}: {where!r} is not a module name")
    return f"{where}:{function}"


def canonical_effects(text: str) -> str:
    """``--effect`` values as the options keep them (``NAME=POLICY,...``, a bare name given its
    policy): what reports name and replay lines repeat."""
    return ",".join(f"{t.name}={t.declared}" for t in parse_effects(text))


def json_file(target: str, flag: str, path: str, kinds: tuple[type, ...]) -> str:
    """``path`` made absolute (children run elsewhere), once it holds JSON of one of ``kinds``;
    one line naming the target, the flag and the problem otherwise."""
    if not path:
        raise TargetError(f"{target}: --app needs {flag} FILE.json")
    file = Path(path).resolve()
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TargetError(f"{target}: {flag} {path}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TargetError(f"{target}: {flag} {path}: expected a JSON {names}")
    return str(file)
