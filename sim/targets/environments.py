"""Environments of their own: an interpreter for the targets whose framework cannot be installed
beside the others (its pins and another target's cannot both hold in one environment).

Such a target declares an ``Environment`` (``Target.environment``): the distributions its
children need, pinned. The harness makes a venv for it on first use, in the user's cache
directory (``XDG_CACHE_HOME``, else ``~/.cache``: ``durable-sim/envs/NAME-KEY``), filled with
the pins and the project's own dependencies, with the project itself on its path (a ``.pth``
to links of the ``sim`` and ``durable`` packages this harness runs from, so a checkout and an
installed wheel work alike). Its children, its zygote and the reader of its durable state run
under that venv's interpreter (``interpreter``, ``read_state_in``); the parent never imports
the framework.

The key is a hash of what went in (the requirements, the Python version, where the project's
packages are, how it is filled: ``FILLING``), so a second run reuses the venv and a change of any
of them makes a new one. pip compiles the bytecode of what it installs: an interpreter that may
not write it (``PYTHONDONTWRITEBYTECODE``, as some shells and CI runners set) would otherwise
compile the framework from source in every process that imports it. A
venv is built in a temporary directory beside its final name and renamed into place only once
pip has filled it: a Ctrl-C, a timeout or a failed install leaves nothing that is later trusted.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from sim.targets.kit.declarations import TargetError

#: Seconds ``pip install`` may take to fill a venv (measured: google-adk 2.13.0 from pip's cache
#: on the 2-core machine, 14-26 s without its bytecode, 31 s with it at load 5; a cold cache
#: downloads about 120 distributions).
INSTALL_TIMEOUT_S = 900.0
#: How ``_fill`` makes a venv, in its key: changed when the making changes, so a venv made the
#: old way is not reused (2: the bytecode compiled at install, not by every process that
#: imports it).
FILLING = 2
#: The distribution whose dependencies a venv gets besides the pins: the harness's own.
PROJECT = "durable-sim"
#: The packages of the project a child imports, linked into the venv.
PACKAGES = ("sim", "durable")
#: Seconds a state reader in an environment may take (it imports the framework).
READ_TIMEOUT_S = 120.0


@dataclass(frozen=True, kw_only=True)
class Environment:
    """A target's own interpreter: ``name`` (the venv's prefix) and the requirements pip
    installs into it (``google-adk==2.13.0``), beside the project's own dependencies."""

    name: str
    pins: tuple[str, ...]

    def requirements(self) -> tuple[str, ...]:
        return (*self.pins, *project_requirements())

    def key(self) -> str:
        """A hash of everything the venv is made from: a change of any makes another one."""
        made_from = {
            "requirements": sorted(self.requirements()),
            "python": [platform.python_implementation(), platform.python_version()],
            "packages": [str(package_dir(name)) for name in PACKAGES],
            "filling": FILLING,
        }
        return hashlib.sha256(json.dumps(made_from).encode()).hexdigest()[:12]

    def path(self) -> Path:
        return envs_root() / f"{self.name}-{self.key()}"

    def python(self) -> Path:
        return self.path() / "bin" / "python"

    def ready(self) -> bool:
        """Made: the final directory exists only once it was filled (see the module)."""
        return self.python().exists()

    def describe(self) -> str:
        """``target list``'s line: where the venv is, or what its first use installs."""
        if self.ready():
            return f"its own environment, made: {self.path()}"
        return f"its own environment, made on first use: pip install {' '.join(self.pins)}"


def envs_root() -> Path:
    """Where environments are kept: a cache kept on purpose across runs, not a temporary
    directory a run leaves behind."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "durable-sim" / "envs"


def project_requirements() -> tuple[str, ...]:
    """The harness's own dependencies (not its extras'): what a child imports besides the
    framework."""
    try:
        requires = metadata.requires(PROJECT) or []
    except metadata.PackageNotFoundError:
        raise TargetError(
            f"{PROJECT} is not installed as a distribution (pip install -e .), so the "
            "dependencies of a target's own environment are unknown"
        ) from None
    return tuple(sorted(r for r in requires if "extra ==" not in r))


def package_dir(name: str) -> Path:
    """The directory of one of the project's packages, found without importing it."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is the project's"
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _say_on_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def ensure(environment: Environment, *, say: Callable[[str], None] = _say_on_stderr) -> Path:
    """The interpreter of ``environment``, made first if it is not yet (one progress line
    before, one after); a ``TargetError`` line when pip cannot make it."""
    if environment.ready():
        return environment.python()
    final = environment.path()
    final.parent.mkdir(parents=True, exist_ok=True)
    with _one_maker(final.parent):
        if environment.ready():  # another run made it while this one waited
            return environment.python()
        say(
            f"{environment.name}: making its own environment (pip install "
            f"{' '.join(environment.pins)}) in {final}; once, then reused"
        )
        started = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}-"))
        try:
            _fill(environment, scratch)
            try:
                os.rename(scratch, final)
            except OSError:  # another run made it first: theirs is as good, ours goes
                if not environment.ready():
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    say(f"{environment.name}: environment made in {time.perf_counter() - started:.1f} s")
    return environment.python()


@contextmanager
def _one_maker(root: Path) -> Iterator[None]:
    """One run at a time makes a venv under ``root``: an exclusive ``flock`` on the directory
    itself (no lock file to leave behind; the kernel drops it with the process, however it
    ends). Two test workers or two sweeps that need the same venv at once would otherwise both
    run pip for it (a minute of CPU each for crewai), and one throw its venv away. The wait is
    bounded by the holder's pip (``INSTALL_TIMEOUT_S``)."""
    descriptor = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _fill(environment: Environment, where: Path) -> None:
    """A venv at ``where`` (no pip of its own: this interpreter's pip fills it from outside, as
    ``pip --python``), the requirements installed, the project's packages linked in."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False, symlinks=True).create(where)
    python = where / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    command = [*pip, "--disable-pip-version-check", *environment.requirements()]
    what = f"{environment.name}: its environment could not be made"
    try:
        subprocess.run(
            command, check=True, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise TargetError(f"{what}: pip did not finish in {INSTALL_TIMEOUT_S:g} s") from None
    except subprocess.CalledProcessError as exc:
        lines = [ln for ln in (exc.stderr or "").splitlines() if ln.startswith("ERROR")]
        why = lines[0] if lines else f"pip exited with status {exc.returncode}"
        raise TargetError(f"{what}: {why}") from None
    project = where / "project"
    project.mkdir()
    for name in PACKAGES:
        (project / name).symlink_to(package_dir(name), target_is_directory=True)
    # Relative to its site directory (``site.addpackage``), so it survives the rename.
    (_site_packages(where) / "durable_sim_project.pth").write_text(
        os.path.relpath(project, _site_packages(where)) + "\n", encoding="utf-8"
    )


def _site_packages(root: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return root / "lib" / version / "site-packages"


def interpreter(environment: Environment | None) -> str:
    """The Python a target's children, zygote and state reader run under: this one, or that
    of its own ``environment`` (made if need be)."""
    if environment is None:
        return sys.executable
    return str(ensure(environment))


def versions(environment: Environment | None, distributions: tuple[str, ...]) -> dict[str, str]:
    """The versions of ``distributions`` where a target's children run: here, or in its own
    ``environment``'s site directory (read without importing anything there)."""
    paths = sys.path if environment is None else [str(_site_packages(environment.path()))]
    out: dict[str, str] = {}
    for name in distributions:
        found = next(iter(metadata.distributions(name=name, path=paths)), None)
        out[name] = "not installed" if found is None else found.version
    return out
