"""An installed wheel works without the checkout: it carries the bundled scenarios, runs them from
any directory, and measures reach on its own ``durable`` sources.

The wheel is built from a copy of the package sources (the checkout gets no ``build/``), installed
with ``--no-deps --no-index`` into a fresh venv whose only other path is this venv's
site-packages (appended by a ``.pth`` line, so the dependencies are found but this checkout's
editable install, itself a ``.pth`` hook, is not), and run from a directory outside the checkout
with ``PYTHONPATH`` unset. Slow (a build, an install and a coverage run): ``--run-slow``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from testkit import REPO

from sim.run.runner import run_scenario
from sim.world.scenario import bundled_names, load_scenario

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "README.md", "durable", "sim")
SCENARIO = "read_edit_answer"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    elsewhere: Path  # a directory outside the checkout, the commands' working directory

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=self.elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("packaging")
    src, dist, venv, elsewhere = (root / n for n in ("src", "dist", "venv", "elsewhere"))
    src.mkdir()
    elsewhere.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(REPO / name, src / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, src / name)
    # No build isolation, so no download: the test extra installs the setuptools pyproject needs.
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", str(src), "-w", str(dist))
    (wheel,) = dist.glob("durable_sim-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "_outer_site_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return Installed(wheel, venv, elsewhere)


def test_the_wheel_carries_the_bundled_scenarios_and_nothing_of_the_checkout(
    installed: Installed,
) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    scenarios = sorted(
        Path(n).stem for n in names if n.startswith("sim/scenarios/") and n.endswith(".json")
    )
    assert scenarios == bundled_names()
    assert not [n for n in names if n.split("/")[0] in ("scenarios", "tests")]


def test_the_installed_package_runs_a_bundled_scenario_outside_the_checkout(
    installed: Installed,
) -> None:
    where = installed.run(
        "python", "-c", "import durable, sim; print(sim.__file__, durable.__file__)"
    )
    assert where.returncode == 0, where.stderr
    for module in where.stdout.split():
        assert Path(module).is_relative_to(installed.venv), module  # not the checkout's
    done = installed.run("durable-sim", "run", SCENARIO, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["settled"] is True
    assert (
        result["fingerprint"]
        == run_scenario(load_scenario(SCENARIO), seed=0, store="file").trace.fingerprint
    )
    listed = installed.run("durable-sim", "list")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == bundled_names()


def test_the_installed_package_measures_reach_on_its_own_sources(installed: Installed) -> None:
    """A relative corpus path is the caller's; the branches are keyed ``durable/...`` as in a
    checkout, and the fault-free run reaches some of them (so the installed sources were found)."""
    run = {"schedule": "none", "fault_free": True, "labels": []}
    corpus = {
        "schema_version": 1,
        "seed": 0,
        "cases": [{"scenario": SCENARIO, "store": "file", "runs": [run]}],
    }
    (installed.elsewhere / "tiny.json").write_text(json.dumps(corpus))
    done = installed.run(
        "durable-sim", "coverage", "--quiet", "--from-corpus", "tiny.json", "--json", "out.json"
    )
    assert done.returncode == 1, done.stderr  # most recovery branches need a crash
    report = json.loads((installed.elsewhere / "out.json").read_text())
    assert report["recovery"]["reached"] > 0
    assert report["files"] and all(f["file"].startswith("durable/") for f in report["files"])
