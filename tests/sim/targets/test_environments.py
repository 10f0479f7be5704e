"""A target's environment of its own (``sim.targets.environments``): a venv made once, on first
use, for a framework whose pins cannot be installed beside the other targets'; its children, its
zygote and its state reader run under that venv's interpreter.

The making is checked with pip replaced (made once and reused; a failed, timed-out or interrupted
install leaves nothing that is later trusted, and says so in one line), then for real: the
``python`` target's demo job, declared to run in an environment of its own, runs there -- forked
from a zygote under the venv's interpreter and started fresh -- and its state is read there.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.targets import environments
from sim.targets.environments import Environment, ensure, interpreter, versions
from sim.targets.host import run_point
from sim.targets.kit.options import check_options
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import Target, TargetError, TargetOptions
from sim.targets.python_app import PythonTarget
from sim.targets.sweep import crash_at, reference_run, warm

PINS = ("example-framework==1.0",)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    yield tmp_path / "durable-sim" / "envs"


class FakePip:
    """``subprocess.run`` in place of pip: records the calls, then does ``then`` (nothing: pip
    succeeded; an exception: it is raised, as the real call would)."""

    def __init__(self, then: BaseException | None = None) -> None:
        self.calls: list[list[str]] = []
        self.then = then

    def __call__(self, command: list[str], **kwargs: Any) -> None:
        del kwargs
        self.calls.append(command)
        if self.then is not None:
            raise self.then


def _install(monkeypatch: pytest.MonkeyPatch, pip: FakePip) -> list[str]:
    monkeypatch.setattr(subprocess, "run", pip)
    said: list[str] = []
    return said


def test_an_environment_is_made_once_then_reused(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    said = _install(monkeypatch, pip)
    environment = Environment(name="example", pins=PINS)
    assert "made on first use: pip install example-framework==1.0" in environment.describe()
    python = ensure(environment, say=said.append)
    assert python == environment.python() and python.exists()
    assert python.parent.parent.parent == cache
    assert len(pip.calls) == 1 and "example-framework==1.0" in pip.calls[0]
    assert "--no-compile" not in pip.calls[0], "pip compiles: no process compiles the framework"
    assert [c for c in pip.calls[0] if c.startswith("pydantic")], "the project's dependencies"
    assert len(said) == 2 and "making its own environment" in said[0], said
    assert said[1].startswith("example: environment made in "), said
    # The project's packages are linked in, by a path relative to the site directory.
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    link = (site / (site / "durable_sim_project.pth").read_text().strip()).resolve()
    assert (link / "sim" / "targets" / "environments.py").is_file()
    assert ensure(environment, say=said.append) == python
    assert len(pip.calls) == 1 and len(said) == 2, "the second use reuses it, silently"
    assert "made:" in environment.describe()
    assert [p.name for p in cache.iterdir()] == [environment.path().name], "no scratch left"
    other = Environment(name="example", pins=("example-framework==2.0",))
    assert other.path() != environment.path(), "other pins, another venv"
    monkeypatch.setattr(environments, "FILLING", environments.FILLING + 1)
    assert environment.path() != python.parent.parent, "filled another way, another venv"


@pytest.mark.parametrize(
    ("then", "says"),
    [
        (
            subprocess.CalledProcessError(
                1, "pip", stderr="ERROR: No matching distribution found for example-framework==1.0"
            ),
            "ERROR: No matching distribution found for example-framework==1.0",
        ),
        (subprocess.TimeoutExpired("pip", 900), "pip did not finish in 900 s"),
    ],
)
def test_pip_that_cannot_install_is_refused_in_one_line_and_leaves_nothing(
    then: BaseException, says: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(monkeypatch, FakePip(then))
    environment = Environment(name="example", pins=PINS)
    with pytest.raises(TargetError) as refused:
        ensure(environment, say=lambda text: None)
    message = str(refused.value)
    assert message == f"example: its environment could not be made: {says}"
    assert list(cache.iterdir()) == [] and not environment.ready()


def test_a_venv_another_run_made_while_this_one_waited_is_used_not_made_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers that need one venv at once: the second waits on the first's lock and then
    finds it made, so pip runs once."""
    pip = FakePip()
    _install(monkeypatch, pip)
    environment = Environment(name="example", pins=PINS)
    take = fcntl.flock
    waited: list[int] = []

    def flock(descriptor: int, operation: int) -> None:
        take(descriptor, operation)
        waited.append(operation)
        environment.python().parent.mkdir(parents=True)  # what the other run left, meanwhile
        environment.python().touch()

    monkeypatch.setattr(fcntl, "flock", flock)
    said: list[str] = []
    assert ensure(environment, say=said.append) == environment.python()
    assert waited == [fcntl.LOCK_EX] and pip.calls == [] and said == []


def test_an_interrupted_install_leaves_nothing_and_the_next_use_makes_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(monkeypatch, FakePip(KeyboardInterrupt()))
    environment = Environment(name="example", pins=PINS)
    with pytest.raises(KeyboardInterrupt):
        ensure(environment, say=lambda text: None)
    assert list(cache.iterdir()) == [] and not environment.ready()
    pip = FakePip()
    _install(monkeypatch, pip)
    ensure(environment, say=lambda text: None)
    assert environment.ready() and len(pip.calls) == 1


class OwnPython(PythonTarget):
    """The ``python`` target, declared to run in an environment of its own: no pins, only the
    project's dependencies (the child finds it by name, ``python``, as any child does)."""

    environment: Environment | None = Environment(name="test-python", pins=())


def own_python() -> Target:
    """An ``OwnPython`` as the harness takes a target (the registry hands them out typed so)."""
    # A subclass's class attributes are inferred as narrow as their values (``("own",)``), and
    # a protocol's mutable members must match exactly.
    return OwnPython()  # type: ignore[return-value]  # see above: the same object, typed wide


APP = """\
import sys


def charge(amount):
    return amount


def main():
    charge(42)
    return sys.prefix
"""


# On a fresh machine this makes a venv of the project's dependencies, bytecode compiled (55.9 s
# in a fresh-clone fast tier): the slow tier's, with the ADK and CrewAI targets' tests, which run
# the same path with their frameworks in it.
@pytest.mark.slow
def test_children_zygote_and_reader_run_in_the_environment(tmp_path: Path) -> None:
    target = own_python()
    app_file = tmp_path / "job.py"
    app_file.write_text(APP, encoding="utf-8")
    app = parse_app("python", AppArgs(app=f"{app_file}:main", effects=("charge",)))
    options = check_options(target, TargetOptions(app=app))  # makes the venv, or reuses it
    python = interpreter(target.environment)
    assert python != sys.executable and Path(python).exists()
    found = versions(target.environment, ("trio", "example-framework"))  # read in the venv
    assert found["trio"][0].isdigit() and found["example-framework"] == "not installed", found
    prefix = str(Path(python).parent.parent)
    with warm(target, options) as (zygote, why):
        assert zygote is not None, why
        reference = reference_run(target, options, timeout_s=120.0, zygote=zygote)
        forked = run_point(target, options, crash_at(reference, 0, "after"), zygote=zygote)
    fresh = run_point(target, options, crash_at(reference, 0, "after"), timeout_s=120.0)
    for run in (reference, forked, fresh):
        assert run.error is None, run.error
        assert run.state.answer == repr(prefix), (run.state.answer, prefix)
    assert [row.process for row in fresh.ledger] == ["p1", "p2"]
