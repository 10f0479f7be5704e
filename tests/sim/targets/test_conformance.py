"""Every registered target against one contract (``sim.targets.protocol.Target``): it lists
itself, refuses bad options in one line with exit 2, and its worked finding (``Target.demo``,
declared next to the target's code) holds -- the fault-free run finishes, the as-is variant
fails at the demo's points with the demo's invariant, the fixed variant passes there.

A target added to the registry is in every test here without a line changed. The demos of the
slowest targets (their ``Demo.point_s``) run in the slow tier; a target whose extra is not
installed is skipped with the reason, never passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from targetkit import installed, runnable
from tiers import tiered

from sim.outputs.cli.main import main
from sim.targets.protocol import Demo
from sim.targets.registry import get_target, target_names
from sim.targets.sweep import sweep_target

#: A demo whose points cost at most this (seconds each, on the 2-core machine) runs in the fast
#: tier; the rest in the slow tier (each of those targets has a fast test of its own too).
FAST_POINT_S = 1.0
NAMES = target_names()


@pytest.mark.parametrize("name", NAMES)
def test_it_lists_itself_with_its_modes(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["target", "list"]) == 0
    out = capsys.readouterr().out
    target = get_target(name)
    assert f"{name} " in out and target.description in out
    assert f"--durability {'|'.join(target.durabilities)}" in out


#: Bad options every target refuses before any child starts: the flag, and what the one line
#: names.
BAD = [
    (["--variant", "no-such-variant"], "--variant"),
    (["--durability", "no-such-mode"], "--durability must be"),
    (["--resume", "no-such-rule"], "--resume must be"),
    (["--thread", "t-1"], "--thread"),
    (["--timeout", "0"], "--timeout"),
    (["--points", "7:sideways"], "INDEX:before|after"),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("flags", "says"), BAD)
def test_bad_options_are_one_line_and_exit_2(
    name: str, flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    installed(name)  # refused before any environment is made (``check_options``)
    needs_app = [] if get_target(name).demo().as_is.app is None else _app_words(name)
    status = main(["target", "sweep", name, *needs_app, *flags, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert len(err.splitlines()) == 1 and says in err, err


def _app_words(name: str) -> list[str]:
    """A target that needs an app (``python``) is given its demo's, so the bad flag is what is
    refused."""
    app = get_target(name).demo().as_is.app
    assert app is not None
    return app.words()


@pytest.mark.parametrize("name", NAMES)
def test_an_app_flag_it_does_not_take_is_named(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundled-only target refuses ``--app``; an app target refuses an app flag that is not
    its own, naming it."""
    target = installed(name)
    given = tmp_path / "given.json"
    given.write_text("[]", encoding="utf-8")
    flags = ["--app", "my_app:main", "--effect", "charge"]
    if target.app_shape is None:
        says = f"{name}: takes no --app"
    else:
        foreign = sorted({"--deps", "--answers"} - target.app_shape.takes)[0]
        flags += [foreign, str(given)]
        says = f"{name}: {foreign} is not for its --app"
    status = main(["target", "sweep", name, *flags, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert says in err, err


def _demo_ids() -> list[object]:
    # A target in an environment of its own (``Target.environment``) stays in the slow tier
    # however cheap its points: its first run makes a venv (30-60 s of pip), which the fast
    # tier never pays.
    fast = [
        n
        for n in NAMES
        if get_target(n).demo().point_s <= FAST_POINT_S and get_target(n).environment is None
    ]
    return tiered(NAMES, fast=fast)


@pytest.mark.parametrize("name", _demo_ids())
def test_its_demo_finding_holds_and_its_fix_sweeps_clean(name: str) -> None:
    target = runnable(name)
    demo: Demo = target.demo()
    found = sweep_target(target, demo.as_is, choose=demo.choose)
    assert found.schedules == len(demo.points)
    assert found.reference.outcome["processes"] == 1  # the fault-free run finished in one
    assert [c["verdict"] for c in found.matrix] == ["safety"] * len(demo.points), found.failures
    for failure in found.failures:
        assert demo.invariant in failure.invariants, (failure.schedule, failure.invariants)
        assert failure.repro.startswith(f"durable-sim target replay {name} ")
    fixed = sweep_target(target, demo.fixed, choose=demo.choose)
    assert [c["verdict"] for c in fixed.matrix] == ["pass"] * len(demo.points), fixed.failures


def test_every_target_declares_a_demo_whose_fix_differs() -> None:
    for name in NAMES:
        demo = get_target(name).demo()
        assert demo.points, name
        assert demo.as_is != demo.fixed, name
