"""Checking a target's options once, in the parent, before any child starts: the app's flags
against what the target's ``AppShape`` takes, the target's own checks (``Target.validate``),
then each mode against the target's choices, defaults filled in. One line, exit 2, for anything
it refuses (``TargetError``); the command line, the tests and the pytest API all come here.
"""

from __future__ import annotations

from dataclasses import replace

from sim.targets.environments import ensure
from sim.targets.kit.spec import AppArgs, AppSpec, parse_app
from sim.targets.protocol import Target, TargetError, TargetOptions
from sim.targets.shapes import Json

#: The app flags every target that takes an app takes: its effects, wherever they are made.
COMMON_FLAGS = frozenset({"--effect", "--effect-http", "--http-stub"})


def app_spec(target: Target, args: AppArgs) -> AppSpec | None:
    """The command line's app words as an ``AppSpec`` (None without ``--app``); app flags
    without ``--app`` are refused, naming them."""
    if not args.app:
        given = args.given()
        if given:
            raise TargetError(f"{target.name}: {', '.join(given)} need --app")
        return None
    return parse_app(target.name, args)


def check_options(target: Target, options: TargetOptions) -> TargetOptions:
    """Refuse, in one line, what the target cannot run; return the options with the target's
    defaults (its first of each) where they were left empty."""
    missing = target.missing()
    if missing is not None:
        raise TargetError(missing)
    options = target.validate(options)
    if options.app is not None:
        check_app(target, options.app, variant=options.variant)
    options = replace(
        options,
        durability=options.durability or target.durabilities[0],
        variant=options.variant or target.variants[0],
        saver=options.saver or target.savers[0],
        resume=options.resume or target.resumes[0],
    )
    for flag, value, choices in (
        ("durability", options.durability, target.durabilities),
        ("variant", options.variant, target.variants),
        ("saver", options.saver, target.savers),
        ("resume", options.resume, target.resumes),
    ):
        if value not in choices:
            raise TargetError(f"{target.name}: --{flag} must be {'|'.join(choices)}, not {value!r}")
    if target.environment is not None:  # made now, before any child, or refused in one line
        ensure(target.environment)
    return options


def check_app(target: Target, app: AppSpec, *, variant: str) -> None:
    """The app's flags against the target's ``AppShape``: what it takes, what it requires, the
    kinds of JSON each file holds."""
    shape = target.app_shape
    if shape is None:
        raise TargetError(f"{target.name}: takes no --app (its agent is bundled)")
    if variant not in ("", target.variants[0]):
        raise TargetError(f"{target.name}: --variant is the bundled agent's; fix your app instead")
    if not app.declared():
        raise TargetError(
            f"{target.name}: --app needs its effects: --effect NAME=POLICY (a function, "
            "module:qualname) or --effect-http 'METHOD URL'"
        )
    takes = COMMON_FLAGS | shape.takes
    for flag in app.flags():
        if flag not in takes:
            raise TargetError(
                f"{target.name}: {flag} is not for its --app ({shape.names}; it takes "
                f"{', '.join(sorted(takes))})"
            )
    given = set(app.flags())
    for flag in sorted(shape.requires - given):
        raise TargetError(f"{target.name}: --app needs {flag}")
    if app.http_stub is not None and not app.http:
        raise TargetError(f"{target.name}: --http-stub answers --effect-http calls; declare one")
    if app.input is not None and not isinstance(app.input.value, shape.input_kinds):
        kinds = " or ".join(_JSON_NAMES[k] for k in shape.input_kinds)
        raise TargetError(f"{target.name}: --input {app.input.path}: expected a JSON {kinds}")
    if app.model_script is not None:
        check_script(target.name, app.model_script.path, app.model_script.value)
    if app.answers is not None and not isinstance(app.answers.value, list):
        raise TargetError(
            f"{target.name}: --answers {app.answers.path}: expected a JSON list of resume values"
        )


_JSON_NAMES: dict[type, str] = {str: "string", dict: "object", list: "list"}


def check_script(target: str, path: str, script: Json) -> None:
    """A model script is a list of turns ``{"content": str, "tool_calls": [{"name": str, "args":
    {...}}]}`` (both keys optional): refused here, naming the turn, before any child runs."""
    if not isinstance(script, list):
        raise TargetError(f"{target}: --model-script {path}: expected a JSON list of turns")
    for n, turn in enumerate(script, 1):
        if not _turn_ok(turn):
            raise TargetError(
                f"{target}: --model-script {path}: turn {n} is not "
                '{"content": "...", "tool_calls": [{"name": "...", "args": {...}}]}'
            )


def _turn_ok(turn: Json) -> bool:
    if not isinstance(turn, dict) or not set(turn) <= {"content", "tool_calls"}:
        return False
    calls = turn.get("tool_calls", [])
    return (
        isinstance(calls, list)
        and isinstance(turn.get("content", ""), str)
        and all(
            isinstance(c, dict)
            and isinstance(c.get("name"), str)
            and isinstance(c.get("args", {}), dict)
            for c in calls
        )
    )
