"""One error root for bad input: every exception class ``sim`` defines is a ``UserError`` (the
command line prints it as one line, with the exit status its class names) or an internal signal
on the short list below, each with the reason it is not bad input; every class ``durable``
defines is a ``DurableError`` (the runtime's own root: ``durable`` never imports ``sim``).

The classes are found by reading the source, so a class a module defines but nothing imports is
checked too; a base is followed by name through the project's own classes and Python's builtins.
"""

from __future__ import annotations

import ast
import builtins

from testkit import REPO

#: ``sim``'s exceptions that are not bad input, and why: each is caught and handled where it is
#: raised, or is a harness failure (exit 5), never a user's mistake.
INTERNAL = {
    "OfflineError": "raised inside the user's app, as the ConnectionRefusedError it is",
    "RejoinBroken": "the pruned sweep's signal to sweep the scenario again exactly",
    "SweepFailed": "pytest's outcome of a scenario item (the plugin's failure report)",
    "ZygoteRefused": "the sweep's signal to run fresh interpreters instead, said in its report",
    "UnitFailed": "a campaign unit's process failed: a harness error, exit 5",
    "WorkerError": "a sweep worker process failed: a harness error, exit 5",
    "UnitFileError": "a unit file that does not verify: reported by name, its unit run again",
    "UnmappedFault": "an assertion of the damage-table oracle: a bug of the harness",
    "MutantError": "an inconsistent mutant record, raised when the registry is imported",
    "LabelNotFound": "a mutant's labelled crash missing from a run: a bug of its record",
    "UnknownInvariant": "a violation naming a code the registry lacks: a bug of an oracle",
    "_OracleFailed": "the fuzzer's signal to Hypothesis that an example failed",
    "_UnusableNumber": "scenario parsing's own signal, turned into a ScenarioError",
    "_NotCopied": "a file no snapshot holds: the snapshots stop, the points run the real way",
}


def _classes() -> dict[str, list[tuple[str, list[str]]]]:
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for package in ("durable", "sim"):
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                    found.setdefault(node.name, []).append((module, bases))
    return found


def _derives(name: str, root: str, classes: dict[str, list[tuple[str, list[str]]]]) -> bool:
    """Whether the project class ``name`` has ``root`` among its bases, at any depth."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current == root:
            return True
        if current in seen:
            continue
        seen.add(current)
        todo += [b for _, bases in classes.get(current, []) for b in bases]
    return False


def _is_exception(name: str, classes: dict[str, list[tuple[str, list[str]]]]) -> bool:
    """An ``Exception`` subclass (a ``BaseException`` only -- a simulated crash -- is not bad
    input nor an error: it is how a process dies)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        builtin = getattr(builtins, current, None)
        if isinstance(builtin, type) and issubclass(builtin, Exception):
            return True
        todo += [b for _, bases in classes.get(current, []) for b in bases]
    return False


def test_every_exception_of_sim_is_a_user_error_or_a_listed_signal() -> None:
    classes = _classes()
    stray = [
        f"{module}.{name}"
        for name, defs in sorted(classes.items())
        for module, _ in defs
        if module.startswith("sim.")
        and _is_exception(name, classes)
        and not _derives(name, "UserError", classes)
        and name not in INTERNAL
    ]
    assert not stray, f"make these UserErrors, or list them in INTERNAL with the reason: {stray}"


def test_every_exception_of_durable_is_a_durable_error() -> None:
    classes = _classes()
    stray = [
        f"{module}.{name}"
        for name, defs in sorted(classes.items())
        for module, _ in defs
        if module.startswith("durable.")
        and _is_exception(name, classes)
        and name != "DurableError"
        and not _derives(name, "DurableError", classes)
    ]
    assert not stray, f"durable's errors share one root, DurableError: {stray}"


def test_the_internal_list_names_only_classes_that_exist_and_are_not_user_errors() -> None:
    classes = _classes()
    assert all(name in classes for name in INTERNAL), sorted(set(INTERNAL) - set(classes))
    assert not [n for n in INTERNAL if _derives(n, "UserError", classes)]


def test_the_command_line_translates_no_error_class() -> None:
    """With every bad input a ``UserError``, ``main`` prints each one: no command catches a
    class only to raise it again as a ``UsageError``."""
    offenders = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "sim" / "outputs" / "cli").glob("*.py"))
        if "raise UsageError(str(exc))" in path.read_text(encoding="utf-8")
    ]
    assert not offenders, offenders


def test_the_check_can_fail() -> None:
    """A class planted outside the root is found (the scan is not vacuous)."""
    classes = _classes()
    classes["PlantedError"] = [("sim.planted", ["ValueError"])]
    assert _is_exception("PlantedError", classes)
    assert not _derives("PlantedError", "UserError", classes)
    assert _derives("TargetError", "UserError", classes)
    assert not _is_exception("SimulatedCrash", classes)  # a BaseException: how a process dies
