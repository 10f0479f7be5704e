"""Repro bundles (``durable-sim target bundle``; sim/targets/bundling.py, each target's
``bundle`` module and ``repro.tmpl``): a point of a target written as a folder that reproduces
it without durable-sim.

For each target, its demo's as-is point (``Target.demo``) is bundled through the command line,
and the bundle's ``repro.py`` is run in a fresh venv that holds only the framework, installed
from the bundle's ``requirements.txt`` (no ``--system-site-packages``: durable-sim is not
there): it must reproduce (exit 1, a line "TOOL applied N times (expected M)" with N > M). The
python target's bundle needs nothing installed and is the fast tier's; every other target's
venv is the slow tier's. The fast tier also holds what needs no framework: each target's
program as it is written (compiles, lint-clean), the points a bundle cannot kill at, and the
command line's bad input.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from targetkit import runnable
from tiers import tiered

from sim.outputs.cli.main import main
from sim.targets.bundling import ISSUE, PROGRAM, REQUIREMENTS
from sim.targets.kit.base import TargetBase
from sim.targets.kit.options import check_options
from sim.targets.protocol import BundleCase, Target, TargetError, TargetOptions
from sim.targets.registry import get_target, target_names
from sim.targets.sweep import reference_run, warm

NAMES = target_names()
#: Seconds for one ``pip install`` of a framework (from pip's cache here), and one repro run.
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 300
#: How many times ``target bundle --runs`` runs each bundle here. The count and its line in
#: ``ISSUE.md`` are the same code for every target, checked three times on the python target (the
#: fast tier); a framework's bundle runs once there and once more in the fresh venv, so it is
#: still seen to reproduce twice (each run of a framework's bundle costs 3-5 s).
RUNS = {"python": 3}
#: The line ``repro.py`` prints for a tool's count, and what the check makes of it.
COUNT = re.compile(r"^(?P<tool>\S+) applied (?P<n>\d+) times? \(expected (?P<m>\d+)\)$", re.M)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory removed after the test (a venv in it too), whatever the test did."""
    path = Path(tempfile.mkdtemp(prefix="bundle-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _demo_point(target: Target) -> tuple[TargetOptions, str]:
    """The demo's as-is options and its first point as a schedule (``INDEX:WHEN``)."""
    demo = target.demo()
    options = check_options(target, demo.as_is)
    with target.service(options), warm(target, options) as (zygote, _):
        reference = reference_run(target, options, timeout_s=120.0, zygote=zygote)
    index, when = demo.choose(reference.labels)[0]
    return options, f"{index}:{when}"


def _fresh_venv(where: Path, requirements: Path) -> tuple[Path, float]:
    """A venv with only what ``requirements`` pins (from the registry, through pip's cache), and
    the seconds it took to make and fill.

    This suite's pip fills it from outside (``pip --python``), so the venv holds no pip of its
    own, and nothing is byte-compiled ahead (the repro compiles what it imports). The same pins
    are resolved and installed as a user's ``pip install -r requirements.txt`` would; measured
    for openai-agents 0.24.0, it took 4.1 s instead of 16.3 s (ensurepip 3.7 s, byte-compiling
    every installed file 5 s)."""
    started = time.perf_counter()
    pins = [line for line in requirements.read_text().splitlines() if not line.startswith("#")]
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(where)
    python = where / "bin" / "python"
    if pins:
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        subprocess.run(
            [*pip, "--no-compile", "--disable-pip-version-check", *pins],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    return python, time.perf_counter() - started


# Each target's repro template is its own code, so each one's bundle is reproduced (the only
# check that it does): the python target's in the fast tier, the others' with --run-slow.
@pytest.mark.parametrize("name", tiered(NAMES, fast=["python"]))
def test_its_demo_bundle_reproduces_in_a_fresh_venv(
    name: str, scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _bundled(name)  # first: a target without a bundle is skipped before its venv is made
    target = runnable(name)
    options, schedule = _demo_point(target)
    out = scratch / "bundle"
    words = [] if options.app is None else options.app.words()
    modes = ["--durability", options.durability, "--variant", options.variant]
    runs = RUNS.get(name, 1)
    status = main(["target", "bundle", name, *words, *modes, "--schedule", schedule,
                   "--out", str(out), "--runs", str(runs)])  # fmt: skip
    said = capsys.readouterr().out
    assert status == 0, said
    assert f"reproduced  {runs} of {runs} runs" in said, said
    issue = (out / ISSUE).read_text(encoding="utf-8")
    assert f"Reproduced {runs} of {runs} runs" in issue, issue
    assert target.demo().invariant in issue, issue
    python, install_s = _fresh_venv(scratch / "venv", out / REQUIREMENTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    alone = subprocess.run(
        [str(python), "-c", "import sim"], cwd=out, env=env, capture_output=True, timeout=60
    )
    assert alone.returncode != 0, "durable-sim is importable beside the bundle"
    run = subprocess.run(
        [str(python), PROGRAM], cwd=out, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        env=env,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    counts = [m for m in COUNT.finditer(run.stdout) if int(m["n"]) > int(m["m"])]
    assert counts, run.stdout
    assert counts[0][0] in issue.splitlines()[0], (counts[0][0], issue.splitlines()[0])
    print(f"{name}: venv made and filled in {install_s:.1f} s; {counts[0][0]}")


def _bundled(name: str) -> Target:
    """The target, skipped with its one line when it has no repro bundle yet (``adk``,
    ``crewai``)."""
    target = get_target(name)
    try:
        target.bundle(_options(target))
    except TargetError as exc:
        if str(exc).endswith(": no repro bundle yet"):
            pytest.skip(str(exc))
        raise
    return target


def _options(target: Target) -> TargetOptions:
    """The demo's as-is options at the target's defaults, unchecked (no library needed)."""
    given = target.demo().as_is
    return TargetOptions(
        durability=given.durability or target.durabilities[0],
        variant=given.variant or target.variants[0],
        saver=given.saver or target.savers[0],
        resume=given.resume or target.resumes[0],
        app=given.app,
    )


def _case(name: str) -> BundleCase:
    """A kill right after the first charge, as the fault-free trace would name it."""
    if name == "python":
        return BundleCase(
            label="effect:app.charge#charge-1",
            when="after",
            kind="effect:app.charge",
            n=1,
            expected={"charge": (2, "exactly_once")},
        )
    return BundleCase(
        label="effect:payments.charge#call_p1_1",
        when="after",
        kind="effect:payments.charge",
        n=1,
        expected={"charge_card": (1, "exactly_once"), "send_receipt": (1, "exactly_once")},
    )


@pytest.mark.parametrize("name", NAMES)
def test_its_program_compiles_and_is_lint_clean(name: str, scratch: Path) -> None:
    """The program as an upstream maintainer reads it: one file, standard library and the
    framework only, clean under the project's own ruff rules (made without the framework)."""
    target = _bundled(name)
    bundle = target.bundle(_options(target))(_case(name))
    compile(bundle.program, PROGRAM, "exec")
    imports = [line.split()[1] for line in bundle.program.splitlines() if line.startswith(
        ("import ", "from "))]  # fmt: skip
    assert not [m for m in imports if m.split(".")[0] in ("sim", "durable")], imports
    path = scratch / PROGRAM
    path.write_text(bundle.program, encoding="utf-8")
    ruff = str(Path(sys.executable).parent / "ruff")
    rules = ["--isolated", "--line-length", "100", "--target-version", "py311"]
    lint = subprocess.run(
        [ruff, "check", *rules, "--select", "E,F,W,I,B,UP,SIM,RUF", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout
    form = subprocess.run(
        [ruff, "format", *rules, "--check", str(path)], capture_output=True, text=True, timeout=60
    )
    assert form.returncode == 0, form.stdout
    assert len(bundle.program.splitlines()) < 350, "a small program"


@pytest.mark.parametrize("name", NAMES)
def test_a_point_inside_the_framework_is_refused_in_one_line(name: str) -> None:
    target = _bundled(name)
    inside = BundleCase(label="runtime.internal#1", when="before", kind="runtime.internal", n=1,
                        expected={})  # fmt: skip
    with pytest.raises(TargetError) as refused:
        target.bundle(_options(target))(inside)
    assert len(str(refused.value).splitlines()) == 1
    assert "not at runtime.internal#1" in str(refused.value)


def test_a_target_without_a_bundle_module_says_so_in_one_line() -> None:
    class Unbundled(TargetBase):
        name = "unbundled"

    with pytest.raises(TargetError, match=r"^unbundled: no repro bundle yet$"):
        Unbundled().bundle(TargetOptions())


#: The python target's demo app, as the command line names it.
DEMO = ["python", "--app", "sim.targets.python_app.demo_job:main", "--effect", "charge"]
#: Bad input of ``target bundle``: the words after it, and what the one line says.
BAD = [
    (["no-such-target", "--schedule", "1:after", "--out", "OUT"], "unknown target"),
    ([*DEMO, "--schedule", "7:sideways", "--out", "OUT"], "INDEX:before|after"),
    ([*DEMO, "--schedule", "1:after"], "--out"),
]


@pytest.mark.parametrize(("words", "says"), BAD)
def test_bad_input_is_one_line_and_exit_2(
    words: list[str], says: str, scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = scratch / "out"
    status = main(["target", "bundle", *[str(out) if w == "OUT" else w for w in words]])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert len(err.splitlines()) == 1 and says in err, err
    assert not out.exists()
