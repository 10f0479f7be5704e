"""The fleet mode (``durable-sim workers``): real workers on one store, killed, paused, judged.

The judge's checks are first shown to fail on remains built by hand (each check can fail, and
deterministically); then real fleets on both stores pass with kills and pauses actually done;
then the broken stores of ``sim.explore.mutants.fleet`` are caught by real fleets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiers import tiered

from durable.events import Event, EventRecord, InputAccepted, LeaseAcquired
from durable.state import new_state
from sim.explore.mutants import FLEET_MUTANTS
from sim.outputs.cli import main as cli_main
from sim.targets.boundaries import TraceLog
from sim.targets.ledger import LEDGER_NAME, Ledger
from sim.targets.workers.child import CONFIG_NAME, trace_name
from sim.targets.workers.fleet import FleetOptions, FleetRun, Incarnation, run_fleet
from sim.targets.workers.judge import (
    _appends_after_a_grant,
    _effects,
    _fencing_in_logs,
    _grants_and_renewals,
    judge_fleet,
)
from sim.world.stores import StoreKind

pytestmark = pytest.mark.timeout(600)


def _record(seq: int, owner: str, epoch: int, event: Event) -> EventRecord:
    return EventRecord(
        conversation_id="c1",
        sequence=seq,
        event_id=f"e{seq}",
        recorded_at_s=0.0,
        batch=f"b{seq}",
        last_in_batch=True,
        owner_id=owner,
        epoch=epoch,
        event=event,
    ).sealed()


def test_an_append_from_a_fenced_owner_is_an_i8_violation() -> None:
    log = [
        _record(1, "p1", 1, LeaseAcquired(owner_id="p1", epoch=1, expires_at_s=1.0)),
        _record(2, "p2", 2, LeaseAcquired(owner_id="p2", epoch=2, expires_at_s=2.0)),
        _record(3, "p1", 1, InputAccepted(submission_id="s1", request_id="r", content="x")),
    ]
    assert _fencing_in_logs({"c1": log[:2]}) == []
    (violation,) = _fencing_in_logs({"c1": log})
    assert violation.invariant == "I8" and "fenced owner" in violation.explanation


def test_an_epoch_granted_twice_and_a_late_renewal_are_i8_violations(tmp_path: Path) -> None:
    log = TraceLog(tmp_path / "t.jsonl")
    grant = {"t": "note", "kind": "grant", "conversation": "c1"}
    traces = {
        "p1": [grant | {"owner": "p1", "epoch": 1, "done_s": 1.0}],
        "p2": [grant | {"owner": "p2", "epoch": 2, "done_s": 2.0}],
    }
    assert _grants_and_renewals(traces) == []
    late = {"t": "note", "kind": "renew", "conversation": "c1", "owner": "p1", "epoch": 1}
    traces["p1"].append(late | {"started_s": 2.5})
    traces["p3"] = [grant | {"owner": "p3", "epoch": 2, "done_s": 3.0}]
    found = [v.explanation for v in _grants_and_renewals(traces)]
    assert found == [
        "c1: epoch 2 was granted to 2 owners",
        "c1: a renewal of epoch 1 succeeded after epoch 2 was granted (two live leases)",
    ]
    log.write({"t": "note"})  # the trace format the judge reads is the workers' own


def test_two_applied_charges_or_two_receipts_are_i1_violations(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / LEDGER_NAME)
    with_key = {"service": "payments", "op": "charge", "tool": "charge_card", "key": "k"}
    for call, key in (("c1/call-1", "k1"), ("c1/call-1", "k1"), ("c2/call-1", None)):
        ledger._conn.execute(
            "INSERT INTO ledger (service, op, tool, call_id, key, process, detail, applied, "
            "note) VALUES (?, ?, ?, ?, ?, 'p1', '', 1, '')",
            (with_key["service"], with_key["op"], with_key["tool"], call, key),
        )
    rows = ledger.rows()
    ledger.close()
    found = _effects(rows, {"c1": new_state("c1"), "c2": new_state("c2")})
    assert [v.explanation for v in found] == [
        "c1: charge_card (idempotent: exactly once) applied 2 times"
    ]
    assert _effects(rows[2:], {"c2": new_state("c2")}) == []


def _conninfo(store: str, request: pytest.FixtureRequest) -> str:
    """The session's PostgreSQL server for a postgres fleet (skipped, with the reason, where
    none can be started); nothing for the other stores."""
    return str(request.getfixturevalue("pg_conninfo")) if store == "postgres" else ""


@pytest.mark.parametrize("store", tiered(["file", "sqlite", "postgres"], fast=["file"]))
def test_a_fleet_with_kills_and_pauses_passes(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    options = FleetOptions(
        store=StoreKind(store),
        workers=3,
        conversations=4,
        kills=3,
        pauses=1,
        fenced_pauses=0,  # its random pause must happen: a fence pause holds those off for 5 s
        seed=7,
        conninfo=_conninfo(store, request),
    )
    run = run_fleet(options, tmp_path / "fleet")
    violations = judge_fleet(run)
    assert violations == [], [v.to_json() for v in violations]
    killed = [i for i in run.incarnations if i.status == -9]
    assert killed, "no planned crash was reached: the fleet tested nothing"
    assert len(run.pauses) == 1 and run.missed_pauses == 0 and not run.timed_out
    # Every conversation was served and its charge booked exactly once (the ledger is real).
    ledger = Ledger(tmp_path / "fleet" / LEDGER_NAME)
    charged = {r.call_id.split("/")[0] for r in ledger.rows() if r.applied and r.op == "charge"}
    ledger.close()
    assert charged == {"c1", "c2", "c3", "c4"}


def test_a_worker_error_is_reported_not_passed(tmp_path: Path) -> None:
    """A worker that raised (here: a store path that cannot be opened) fails the fleet."""
    fleet_dir = tmp_path / "fleet"
    run = run_fleet(FleetOptions(workers=1, conversations=1, kills=0, pauses=0), fleet_dir)
    config = json.loads((fleet_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    assert config["store"] == "file"
    (fleet_dir / trace_name("p1")).write_text(
        '{"t":"error","p":"p1","error":"OSError: disk gone","trace":["x"]}\n', encoding="utf-8"
    )
    assert [v.invariant for v in judge_fleet(run)] == ["E"]
    assert isinstance(run.incarnations[0], Incarnation) and isinstance(run, FleetRun)


@pytest.mark.parametrize(
    ("mutant", "store"),
    tiered(
        [(m.name, str(store)) for m in FLEET_MUTANTS for store in m.stores],
        # The fast tier's one: caught by the first fleet in each of 4 measured runs (6-8 s);
        # renew-ignores-epoch took 1 to 5 fleets (7-57 s) and runs with the slow tier.
        fast=[("file-lock-dropped", "file")],
    ),
)
def test_fleet_mutants_are_caught(
    mutant: str, store: str, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    """Each broken store fails a fleet of the command line (exit 1, a safety verdict). The
    races are the kernel's: one measured run of 5 fleets caught renew-ignores-epoch in 3/5
    (file), 4/5 (SQLite) and 4/5 (Postgres), file-lock-dropped in 5/5; 12 fleets miss with
    odds under 1e-4. fence-outside-transaction (with the default fence pause) failed 20/20
    fleets of 3 workers and 6 conversations on each store, in each of two measured runs."""
    shape = ["--workers", "4", "--conversations", "8", "--pauses", "4"]
    if mutant == "fence-outside-transaction":
        # The zombie stopped at its fence needs a worker free to take its lease over within the
        # fence wait: FENCED_FLEET's shape, no kills or pauses. With them, on a loaded machine,
        # restarts and parent pauses left nobody free in all 12 fleets of one run (file store).
        shape = [a for k, v in FENCED_FLEET.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    status = cli_main(
        [
            "workers",
            "--store",
            store,
            "--mutant",
            mutant,
            *shape,
            "--fleets",
            "12",
            "--first-failure",
            "--conninfo",
            _conninfo(store, request),
        ]
    )
    err = capsys.readouterr().err
    assert status == 1, err[-2000:]
    assert "fleet(s) passed; failing seeds:" in err


def test_a_record_of_an_older_epoch_beyond_a_new_owners_first_read_is_an_i8_violation() -> None:
    """The new owner read the log through #1 after its grant of epoch 2: p1's epoch-1 record
    #2 was accepted after that grant (a fence checked outside the transaction); #1 was not."""
    log = [
        _record(1, "p1", 1, LeaseAcquired(owner_id="p1", epoch=1, expires_at_s=1.0)),
        _record(2, "p1", 1, InputAccepted(submission_id="s1", request_id="r", content="x")),
    ]
    read = {"t": "note", "p": "p2", "kind": "recovered", "conversation": "c1", "epoch": 2}
    assert _appends_after_a_grant({"c1": log}, {"p2": [read | {"through": 2}]}) == []
    (violation,) = _appends_after_a_grant({"c1": log}, {"p2": [read | {"through": 1}]})
    assert violation.invariant == "I8"
    assert (
        violation.explanation == "c1: an append of epoch 1 was accepted after epoch 2 was granted"
    )
    assert violation.witness[1] == "#2 input_accepted by p1 epoch 1"


#: The fleet that puts a zombie's write into a new owner's window: the first worker to reach its
#: seeded 2nd..5th append of work stops itself between that append's fence check and its write;
#: no kills or random pauses to blur it. The workers start together and there are more
#: conversations than workers, so the zombie's conversation is one nobody has answered, and the
#: others keep visiting it until someone takes it over.
FENCED_FLEET = {"workers": 3, "conversations": 6, "kills": 0, "pauses": 0, "fenced_pauses": 1}
#: One seeded fleet per store, a different seed on each (each fleet holds its fence pause for
#: seconds): the family still stops at the appends of seeds 0, 1 and 2, and the broken store and
#: the correct one of a store are run on the same fleet.
FENCED_SEEDS = {"file": 0, "sqlite": 1, "postgres": 2}


def _fenced_fleet(
    store: str, mutant: str | None, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[FleetRun, list[str]]:
    options = FleetOptions(
        store=StoreKind(store),
        seed=FENCED_SEEDS[store],
        mutant=mutant,
        conninfo=_conninfo(store, request),
        **FENCED_FLEET,
    )
    run = run_fleet(options, tmp_path / "fleet")
    return run, [f"{v.invariant}: {v.explanation}" for v in judge_fleet(run)]


@pytest.mark.slow  # the fleet mutants above catch the same broken fence
@pytest.mark.parametrize("store", ["file", "sqlite", "postgres"])
def test_a_fence_checked_outside_the_transaction_is_caught(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The fleet's zombie stopped at its fence, another worker took the lease over in the
    meantime, and the zombie's write was accepted after that grant: I8."""
    run, violations = _fenced_fleet(store, "fence-outside-transaction", tmp_path, request)
    (fenced,) = run.fenced
    assert fenced["taken_over_by"] is not None, fenced
    stale = f"{fenced['conversation']}: an append of epoch {fenced['epoch']} was accepted"
    assert any(v.startswith(f"I8: {stale}") for v in violations), violations


@pytest.mark.slow
@pytest.mark.parametrize("store", ["file", "sqlite", "postgres"])
def test_the_same_fleets_pass_on_the_correct_stores(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The same fleet on the real store: the zombie stopped at its fence holds the append's
    critical section (OS lock, BEGIN IMMEDIATE, locked lease row), so nobody takes over until it
    has written, and the fleet passes."""
    run, violations = _fenced_fleet(store, None, tmp_path, request)
    assert violations == []
    (fenced,) = run.fenced
    assert fenced["taken_over_by"] is None, fenced
