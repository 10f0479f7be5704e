"""The warm zygote (``sim.targets.zygote``): it refuses to fork from a process its preload left
unsafe (and the sweep falls back, saying why), a forked child is bounded and killed like a fresh
one, nothing outlives it, and a forked sweep judges every point as fresh interpreters do."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from targetkit import app_options
from testkit import REPO, needs
from tiers import release

from sim.targets.host import run_point
from sim.targets.kit.preload import app_preload
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target, target_names
from sim.targets.sweep import sweep_target, warm
from sim.targets.zygote import Zygote, ZygoteRefused

MODULES = {
    "threaded.py": "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,), daemon=True, name='poller').start()\n",
    "opens.py": "HANDLE = open(__file__)\n",
    "sleeper.py": "import time\ndef main(args):\n    time.sleep(float(args[0]))\n    return 0\n",
    "exits.py": "import sys\ndef main(args):\n"
    "    print('said ' + args[0], file=sys.stderr)\n    return int(args[0])\n",
}


@pytest.fixture
def modules(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``sys.path`` finds the test's little modules and the project."""
    for name, source in MODULES.items():
        (tmp_path / name).write_text(source, encoding="utf-8")
    return dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}", PYTHONHASHSEED="0")


def zygote(preload: tuple[str, ...], env: dict[str, str], tmp_path: Path) -> Zygote:
    work = tmp_path / "zygote"
    work.mkdir(exist_ok=True)
    return Zygote(preload, workdir=work, env=env)


@pytest.mark.parametrize(
    ("preload", "why"),
    [
        (("threaded",), "1 thread(s) running (poller)"),
        (("opens",), "descriptor(s) open"),
        (("no_such_module_here",), "importing no_such_module_here raised"),
    ],
)
def test_a_zygote_refuses_to_fork_from_an_unsafe_preload(
    preload: tuple[str, ...], why: str, modules: dict[str, str], tmp_path: Path
) -> None:
    with pytest.raises(ZygoteRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        zygote(preload, modules, tmp_path)


def test_a_forked_child_returns_its_status_and_its_stderr(
    modules: dict[str, str], tmp_path: Path
) -> None:
    with zygote(("exits",), modules, tmp_path) as z:
        first = z.run(["exits", "3"], env=modules, timeout_s=30)
        second = z.run(["exits", "0"], env=modules, timeout_s=30)
    assert (first.returncode, first.stderr.strip()) == (3, b"said 3")
    assert (second.returncode, second.stderr.strip()) == (0, b"said 0")


@pytest.mark.timeout(60)
def test_a_hung_child_is_killed_at_its_time_limit(modules: dict[str, str], tmp_path: Path) -> None:
    with zygote(("sleeper",), modules, tmp_path) as z:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            z.run(["sleeper", "60"], env=modules, timeout_s=1.0)
        assert time.monotonic() - started < 30
        assert z.run(["sleeper", "0"], env=modules, timeout_s=30).returncode == 0  # still serving


@pytest.mark.timeout(60)
def test_a_child_that_ends_at_once_is_seen_to_end(
    modules: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zygote's two answers for a child that ended at once (its pid, its status) reach the
    pipe together; reading the first must not hide the second (a buffered ``readline`` took
    both, and the wait for the status then ran out its time)."""
    with zygote(("sleeper",), modules, tmp_path) as z:
        send = z._send

        def send_then_lag(message: dict[str, object]) -> None:
            send(message)
            time.sleep(2.0)  # a loaded parent: both answers are in the pipe before it reads

        monkeypatch.setattr(z, "_send", send_then_lag)
        assert z.run(["sleeper", "0"], env=modules, timeout_s=10).returncode == 0


@pytest.mark.timeout(60)
def test_closing_kills_the_child_in_flight_and_the_zygote(
    modules: dict[str, str], tmp_path: Path
) -> None:
    z = zygote(("sleeper",), modules, tmp_path)
    z._send({"argv": ["sleeper", "60"], "env": modules, "out": os.devnull, "err": os.devnull})
    pid = int(z._receive(30)["pid"])
    z._in_flight = pid
    z.close()
    assert z._proc.returncode is not None
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the child outlived its zygote"


@pytest.mark.timeout(60)
def test_an_interrupted_wait_leaves_its_child_to_close_which_kills_it(
    modules: dict[str, str], tmp_path: Path
) -> None:
    """A Ctrl-C (here an alarm raising ``KeyboardInterrupt``) while a child runs: the child is
    still in flight for ``close``, which kills it. It is the zygote's child, so killing the
    zygote alone left it running, writing into directories the sweep was removing."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        z = zygote(("sleeper",), modules, tmp_path)
        signal.alarm(2)
        with pytest.raises(KeyboardInterrupt):
            z.run(["sleeper", "60"], env=modules, timeout_s=30)
        pid = z._in_flight
        assert pid is not None and _alive(pid)
        z.close()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not _alive(pid), "the child outlived the interrupted sweep"


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


class _Refusing:
    """A target whose preload starts a thread: the sweep must fall back and say so."""

    name = "refusing"
    environment = None

    def preload(self, options: TargetOptions) -> tuple[str, ...]:
        del options
        return ("threading_at_import_for_the_test",)


def test_a_refused_zygote_falls_back_to_fresh_interpreters_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "threading_at_import_for_the_test.py").write_text(MODULES["threaded.py"])
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{REPO}")
    refusing = _Refusing()  # a stand-in Target: warm reads its name and preload only
    with warm(refusing, TargetOptions()) as (z, why):  # type: ignore[arg-type]  # above
        assert z is None
    assert why.startswith("a fresh interpreter each: the zygote refused to fork: ")
    assert "thread(s) running (poller)" in why
    with warm(refusing, TargetOptions(), fork=False) as (z, why):  # type: ignore[arg-type]  # same
        assert z is None and why.endswith("asked for (--fresh)")


def test_an_apps_libraries_are_preloaded_and_its_own_modules_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Modules of installed libraries the app imports at its top, by their dotted names, a
    namespace package's among them (as ``langgraph``'s are); not its own modules, not its
    effects' modules, not imports in a body."""
    site = tmp_path / "site"
    (site / "spread_pkg").mkdir(parents=True)  # no __init__.py: a namespace package
    (site / "spread_pkg" / "part.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(site))
    work = tmp_path / "app"
    work.mkdir()
    (work / "helpers.py").write_text("X = 1\n")
    (work / "payments.py").write_text("def charge(key):\n    pass\n")
    app = work / "app.py"
    app.write_text(
        "from __future__ import annotations\nimport json\nimport trio.lowlevel\n"
        "from spread_pkg.part import X\nimport helpers\nfrom payments import charge\n\n"
        "def main():\n    import hypothesis\n",
        encoding="utf-8",
    )
    spec = parse_app(
        "python", AppArgs(app=f"{app}:main", effects=("payments:charge",), workdir=str(work))
    )
    assert app_preload(spec) == ("__future__", "json", "trio.lowlevel", "spread_pkg.part")
    # Not after the app's own code (it may set up what the import needs), and not a library
    # the app's directory has a module of the same name for (the child imports that one).
    (work / "hypothesis.py").write_text("X = 1\n")
    app.write_text("import json\nimport hypothesis\nSETUP = 1\nimport trio\n", encoding="utf-8")
    assert app_preload(spec) == ("json",)


def test_a_forked_sweep_judges_the_python_demo_as_fresh_interpreters_do() -> None:
    """The demo job as first written (its keyed version: in the slow tier's comparison of every
    target's demo below)."""
    target = get_target("python")
    seen = {}
    for fork in (True, False):
        sweep = sweep_target(target, target.demo().as_is, fork=fork)
        failures = [(f.schedule, f.invariants) for f in sweep.failures]
        seen[fork] = (sweep.matrix, failures, sweep.reference.outcome["children"])
    assert seen[True][:2] == seen[False][:2]
    assert seen[True][1], "the demo job charges twice somewhere"
    assert seen[True][2].startswith("forked from a warm zygote that preloaded sim.targets")
    assert seen[False][2] == "a fresh interpreter each: asked for (--fresh)"


@pytest.mark.slow  # every installed target's demo points, forked and fresh
@pytest.mark.parametrize("name", target_names())
def test_every_target_judges_its_demo_points_alike_forked_and_fresh(name: str) -> None:
    target = get_target(name)
    if target.missing() is not None:
        pytest.skip(target.missing() or "")
    demo = target.demo()
    # The fixed variant forks the same way through another app: a repetition, run in a release
    # check (``tiers.release``); the as-is variant, whose points fail, always runs.
    for options in (demo.as_is, demo.fixed) if release() else (demo.as_is,):
        seen = []
        for fork in (True, False):
            sweep = sweep_target(target, options, choose=demo.choose, fork=fork)
            seen.append(
                ([c["verdict"] for c in sweep.matrix], [f.invariants for f in sweep.failures])
            )
        assert seen[0] == seen[1], f"{name}: forked {seen[0]} but fresh {seen[1]}"


@pytest.mark.timeout(120)
def test_a_zygote_that_dies_mid_sweep_makes_the_point_an_error_not_a_traceback() -> None:
    """Killed between two points (the OOM killer, say), the zygote cannot fork the next child:
    the point is reported with the reason, as a hung child is, and the sweep goes on."""
    target = get_target("python")
    options = target.demo().as_is
    with warm(target, options) as (z, _):
        assert z is not None
        assert run_point(target, options, None, zygote=z).error is None
        z._proc.kill()
        z._proc.wait()
        run = run_point(target, options, None, zygote=z)
    assert run.error is not None and run.error.startswith("child p1 could not be forked: ")
    assert "the zygote died" in run.error


@pytest.mark.slow  # a LangGraph job through the `python` target, forked and fresh
@needs("langgraph", reason="needs the langgraph extra: pip install -e '.[langgraph]'")
def test_a_langgraph_job_forks_with_langgraph_imported_and_judges_as_fresh() -> None:
    """``examples/langgraph_job``: the zygote imports the LangGraph modules the job imports (the
    top package alone is a namespace that imports nothing), and the points around each effect
    and a commit that leaves the restarted job short are judged as fresh interpreters judge
    them."""
    job = REPO / "examples" / "langgraph_job"
    options = app_options(
        "python",
        f"{job / 'job.py'}:main",
        effects=("services:PAYMENTS.refund", "services:MAILER.send"),
        workdir=str(job),
    )
    assert {"langgraph.graph", "langgraph.checkpoint.sqlite"} <= set(
        get_target("python").preload(options)
    )

    def around_the_refund(labels: list[str]) -> list[tuple[int, str]]:
        refund = next(i for i, label in enumerate(labels) if "PAYMENTS.refund" in label)
        return [(refund, "after"), (refund + 1, "after")]

    seen = []
    for fork in (True, False):
        sweep = sweep_target(get_target("python"), options, choose=around_the_refund, fork=fork)
        seen.append(([c["verdict"] for c in sweep.matrix], [f.invariants for f in sweep.failures]))
        if fork:  # a refused zygote would compare fresh with fresh
            assert sweep.reference.outcome["children"].startswith("forked from a warm zygote")
    assert seen[0] == seen[1], f"forked {seen[0]} but fresh {seen[1]}"
    assert seen[0] == (["safety", "safety"], [["I1"], ["I1", "I7"]])


@pytest.mark.timeout(60)
def test_a_zygote_that_does_not_fork_in_time_is_closed_not_read_again(
    modules: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork answer that comes late would be read as the next child's: the zygote is closed,
    this child and every later one refused in one line."""
    monkeypatch.setattr("sim.targets.zygote.FORK_TIMEOUT_S", 0.2)
    with zygote(("sleeper",), modules, tmp_path) as z:
        send = z._send
        monkeypatch.setattr(z, "_send", lambda message: None)  # a request it never answers
        with pytest.raises(ZygoteRefused, match="did not fork within"):
            z.run(["sleeper", "0"], env=modules, timeout_s=10)
        monkeypatch.setattr(z, "_send", send)
        with pytest.raises(ZygoteRefused, match="the zygote died"):
            z.run(["sleeper", "0"], env=modules, timeout_s=10)
