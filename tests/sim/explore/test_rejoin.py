"""Rejoin: canonical views of a crashed run against the fault-free run (sim/explore/rejoin.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import REPO, terminated

from sim.explore import rejoin
from sim.outputs.cli import main
from sim.run.runner import run_scenario
from sim.world.faults import Schedule, parse_schedule
from sim.world.scenario import load_scenario

SIM = (sys.executable, "-m", "sim")


def test_a_renaming_keeps_order_and_roles_and_forgets_absolute_values() -> None:
    state = {
        "last_sequence": 29,
        "epoch": 2,
        "intents": {"call-7": {"sequence": 21, "deadline_s": 40.0}},
        "note": "owner-3 ran call-7 on notes-3.txt",
    }
    renaming = rejoin.Renaming.of([state], extra_epochs=[1], now_s=10.0)
    assert renaming.apply(state, ids=rejoin.Roles(("call", "owner"))) == {
        "epoch": ("epoch", 1),
        "intents": {"call#0": {"deadline_s": ("dt_ns", 30_000_000_000), "sequence": ("seq", 0)}},
        "last_sequence": ("seq", 1),
        "note": "owner#0 ran call#0 on notes-3.txt",
    }
    shifted = {
        "last_sequence": 30,
        "epoch": 3,
        "intents": {"call-8": {"sequence": 22, "deadline_s": 41.0}},
        "note": "owner-4 ran call-8 on notes-3.txt",
    }
    again = rejoin.Renaming.of([shifted], extra_epochs=[2], now_s=11.0)
    ids = rejoin.Roles(("call", "owner"))
    assert again.apply(shifted, ids=ids) == renaming.apply(
        state, ids=rejoin.Roles(("call", "owner"))
    )
    # A zombie's older epoch stays older than the fence the new owner set: not renamed away.
    fenced_by_the_new_owner = rejoin.Renaming.of([state], extra_epochs=[2], now_s=10.0)
    assert fenced_by_the_new_owner.epochs != renaming.epochs


def _probed(name: str, schedule: str) -> tuple[rejoin.CanonicalProbe, rejoin.CanonicalProbe]:
    scenario = load_scenario(name)
    reference = rejoin.CanonicalProbe(Schedule())
    run_scenario(scenario, seed=0, store="file", fork=reference)
    crash = parse_schedule(schedule)
    child = rejoin.CanonicalProbe(crash)
    run_scenario(scenario, seed=0, store="file", schedule=crash, fork=child)
    return reference, child


def _meet(
    reference: rejoin.CanonicalProbe, child: rejoin.CanonicalProbe, view: str
) -> tuple[int | None, int | None]:
    keys = [row.key(view) for row in reference.rows]
    stamps = [row.stamp for row in reference.rows]
    return rejoin._meet(child, keys, stamps, child.base.last_index, view)


def test_a_crash_before_anything_is_durable_rejoins_strictly() -> None:
    """A process killed before its first lease: the next one does what the first would have,
    renamed, to the end, and draws the same interleaving: trio's scheduler RNG is reseeded at
    every commit's end from what was committed (``seed_commit_scheduler``), so even the strict
    view, which holds it, rejoins at the first commit."""
    reference, child = _probed("read_edit_answer", "0:before:process")
    assert _meet(reference, child, "renamed") == (0, 0)
    assert _meet(reference, child, "strict") == (0, 0)


def _boundary(name: str, prefix: str) -> int:
    """The index of the first boundary of ``name``'s fault-free run whose label starts so."""
    result = run_scenario(load_scenario(name), seed=0, store="file")
    return next(b.index for b in result.trace.boundaries if b.label.startswith(prefix))


def test_a_crash_that_changes_the_outcome_never_rejoins() -> None:
    """A kill between the edit's effect and its result: the recovery verifies the edit and the
    state records how, so no view meets the fault-free run again (the view can fail)."""
    effect = _boundary("read_edit_answer", "tool.effect:workspace.append_line")
    reference, child = _probed("read_edit_answer", f"{effect}:after:process")
    for view in rejoin.VIEWS:
        assert _meet(reference, child, view) == (None, None), view
    assert "state" in rejoin._ends_differ(child, reference)


def test_a_crash_inside_a_commit_meets_that_commit_redone() -> None:
    """A kill at boundary 9, inside the first commit (which began at 7): the child's views
    start after the crash, and its first one -- the commit redone by the next process -- meets
    the fault-free run's first commit, which ended after boundary 9 (its end is what counts as
    "no earlier than the crash", not its start)."""
    reference, child = _probed("read_edit_answer", "9:after:process")
    assert reference.rows[0].stamp > 9 and all(row.stamp > 9 for row in child.rows)
    assert _meet(reference, child, "renamed") == (0, 0)


def test_meeting_once_is_not_rejoining() -> None:
    """A child that meets the fault-free run at a commit and differs from it at a later one
    (a view that misses what decides the future would let that happen) has met it, not
    rejoined it: only a whole equal suffix counts."""
    reference = rejoin.CanonicalProbe(Schedule())
    reference.rows = [
        rejoin.Row(stamp, {c: str(stamp) for c in rejoin.COMPONENTS}) for stamp in (5, 6, 7)
    ]
    child = rejoin.CanonicalProbe(parse_schedule("4:after:process"))
    child.rows = [
        rejoin.Row(10, {c: "6" for c in rejoin.COMPONENTS}),  # meets the reference's second
        rejoin.Row(11, {c: "8" for c in rejoin.COMPONENTS}),  # then parts from it
    ]
    assert _meet(reference, child, "strict") == (0, None)
    child.rows[1] = rejoin.Row(11, {c: "7" for c in rejoin.COMPONENTS})
    assert _meet(reference, child, "strict") == (0, 0)


def test_with_the_scheduler_reseeded_at_commits_meeting_is_rejoining() -> None:
    """The scheduler's draws are a function of what was committed: the strict view rejoins as
    often as the renamed one, and in ``abort_mid_tool`` and ``delegate_to_subagent`` every
    child that meets the fault-free run stays with it -- the view holds everything their
    futures depend on (without the client's steps still due it did not: a restarted client
    acts at once on the ones already past; nor with epochs ranked across conversations: a
    parent recovered at epoch 2 beside a fresh sub-agent at epoch 1)."""
    for name in ("abort_mid_tool", "delegate_to_subagent"):
        measured = rejoin.measure(load_scenario(name), store="file", points=40)
        assert measured.rejoined["strict"] == measured.rejoined["renamed"] > 0, name
        for view in rejoin.VIEWS:
            assert measured.met[view] == measured.rejoined[view], (name, view, measured.document())


def test_each_view_rejoins_at_least_as_often_as_the_one_before() -> None:
    """The measured fractions of ``read_edit_answer`` grow view by view, the strict one equal
    to the renamed one (the scheduler is reseeded at every commit's end); what is left out by
    the aligned view (the lease's phase and the checkpoint cadence, back in phase only at the
    first checkpoint after the crash) still keeps some children apart in a run this short."""
    measured = rejoin.measure(load_scenario("read_edit_answer"), store="file", points=1000)
    fractions = [measured.fraction(view) for view in rejoin.VIEWS]
    assert 0.0 < fractions[0] == fractions[1] <= fractions[2] < fractions[3] < 1.0, fractions
    doc = measured.document()
    assert doc["points"] == doc["of_points"] == measured.points
    assert doc["differs_at_end"]["renamed"]["lease_phase"] > 0


def test_a_replacement_renews_and_checkpoints_in_phase_in_a_long_run() -> None:
    """In a run long enough to reach a checkpoint after the crash, what a process used to
    count from its own start (the lease's phase, the checkpoint cadence) comes back into
    phase: most of ``long_horizon``'s children rejoin the fault-free run in the strict view, a
    few commits after their crash (the runtime counting from its own start, 5 % did)."""
    measured = rejoin.measure(load_scenario("long_horizon"), store="file", points=10)
    doc = measured.document()
    median = doc["median_commits_to_rejoin"]["strict"]
    assert measured.fraction("strict") >= 0.7 and median is not None and median <= 20, doc


def test_the_measurement_does_not_depend_on_the_hash_seed() -> None:
    def measured(hash_seed: str) -> object:
        done = subprocess.run(
            [*SIM, "rejoin", "idempotent_payment", "--store", "file", "--points", "12", "--json"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return json.loads(done.stdout)

    first = measured("1")
    assert first == measured("2")
    assert first["scenarios"][0]["points"] == 12  # type: ignore[index]  # a JSON document


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["rejoin", "--points", "0"], "--points"),
        (["rejoin", "--store", "postgres"], "rejoin does not take the postgres store"),
        (["rejoin", "--crash", "process,"], "--crash"),
        (["rejoin", "no_such_scenario"], "no_such_scenario"),
        (["rejoin", "--crash", "process,storage"], "rejoin measures process and power crashes"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert named in err, err


def test_sigterm_stops_a_measurement_cleanly(tmp_path: Path) -> None:
    """Exit 130 soon after SIGTERM, no worker and no temporary directory left."""
    command = ["rejoin", "long_horizon", "read_edit_answer", "--store", "file", "--jobs", "2"]
    status, stderr = terminated(command, tmp_path, started="durable-sim-jobs-*")
    assert status == 130, stderr
    assert "Traceback" not in stderr
