"""The ``python`` target on programs that keep their state in PostgreSQL (``--postgres``): a
throw-away cluster for the module (``sim.world.pgcluster``), a database per point, and every
commit through psycopg 3 -- sync, async, a transaction block, SQLAlchemy's session, a statement
in autocommit mode -- one ``pg.commit#n`` boundary (``sim.targets.python_app.postgres``).

The example job (``examples/postgres_invoices``) charges an invoice, then marks it paid in
PostgreSQL: killed between the two it charges twice, its replay line reproduces that, and its
keyed version passes there. Tests that need a cluster skip, with the reason, where none can
start; the refusals (no PostgreSQL, no psycopg) and psycopg's lazy patching need none.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from targetkit import app_options
from testkit import REPO

from sim.outputs.cli.main import main
from sim.targets.protocol import TargetOptions
from sim.targets.python_app import database
from sim.targets.registry import get_target
from sim.targets.sweep import reference_run, sweep_target
from sim.world import pgcluster

EXAMPLE = REPO / "examples" / "postgres_invoices" / "invoices.py"
EFFECT = "billing:charge"
TIMEOUT_S = 60.0
#: How long the interrupted sweep may take to start its cluster and its first child.
STARTED_WITHIN_S = 120.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One cluster for the module's sweeps: theirs nest in it and reuse it (a start costs
    seconds); skipped, with the reason, where none can start."""
    reason = database.missing()
    if reason is not None:
        pytest.skip(reason)
    with database.serving():
        yield


def _window(labels: list[str]) -> list[tuple[int, str]]:
    """Right after the first charge, and right before the commit that records it (the first
    ``pg.commit`` after the charge): where the as-is job charges twice."""
    charged = next(
        i for i, label in enumerate(labels) if label.startswith("effect:app.billing:charge#")
    )
    recorded = next(
        i for i, label in enumerate(labels) if i > charged and label.startswith("pg.commit#")
    )
    return [(charged, "after"), (recorded, "before")]


def _needs_sqlalchemy() -> None:
    if importlib.util.find_spec("sqlalchemy") is None:
        pytest.skip("SQLAlchemy is not installed (the example's ORM): pip install sqlalchemy")


def _options(app: str) -> TargetOptions:
    """The example's options (its ORM needs SQLAlchemy: skipped, with the reason, without)."""
    _needs_sqlalchemy()
    return app_options("python", app, effects=[EFFECT], postgres=True)


@pytest.mark.usefixtures("cluster")
def test_the_job_charges_an_invoice_twice_and_its_replay_line_shows_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Killed right after the charge or right before the commit that marks the invoice paid,
    the next run charges it again (I1 on billing:charge); the replay line, run as the command
    line, reproduces it (exit 1)."""
    target = get_target("python")
    result = sweep_target(target, _options(f"{EXAMPLE}:main"), choose=_window)
    assert result.reference.labels[:2] == [
        "pg.commit#1",
        "pg.commit#2",
    ]  # the table, the two invoices
    assert result.reference.labels[2].startswith("effect:app.billing:charge#")
    assert result.schedules == 2 and len(result.failures) == 2, result.failures
    assert {f.invariant for f in result.failures} == {"I1"}
    crashed = sorted(label for f in result.failures for label in f.crash_labels)
    assert crashed[0].startswith("effect:app.billing:charge#") and crashed[1] == "pg.commit#3"
    failure = result.failures[0]
    assert " --postgres " in failure.repro
    assert main(shlex.split(failure.repro)[1:]) == 1
    out = capsys.readouterr().out
    assert "I1" in out and "billing:charge" in out


@pytest.mark.slow  # 14 s: the fast tier has the as-is job's sweep and replay above
@pytest.mark.usefixtures("cluster")
def test_the_keyed_job_passes_where_the_first_charges_twice() -> None:
    """Keyed, the same two points pass; and each point's database is gone after its point."""
    result = sweep_target(get_target("python"), _options(f"{EXAMPLE}:main_keyed"), choose=_window)
    assert result.schedules == 2 and not result.failures, result.failures
    import psycopg

    with psycopg.connect(database._RUNNING[-1].cluster.conninfo, autocommit=True) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'point%'")
        assert rows.fetchall() == []


#: One program per way of committing: each commits one write twice, once more with nothing to
#: commit, and charges once: two ``pg.commit`` boundaries, whatever the way.
COMMITS = {
    "sync commit()": """
def work(url):
    with psycopg.connect(url) as conn:
        for n in (1, 2):
            conn.execute("INSERT INTO t VALUES (%s)", (n,))
            conn.commit()
        conn.execute("SELECT count(*) FROM t").fetchone()
        conn.commit()
""",
    "with conn: and conn.transaction()": """
def work(url):
    with psycopg.connect(url) as conn:
        with conn.transaction():
            conn.execute("INSERT INTO t VALUES (1)")
            with conn.transaction():
                conn.execute("INSERT INTO t VALUES (2)")
        conn.execute("INSERT INTO t VALUES (3)")
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1")
""",
    "async commit()": """
import asyncio

def work(url):
    async def run():
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await conn.execute("INSERT INTO t VALUES (1)")
            await conn.commit()
            async with conn.transaction():
                await conn.execute("INSERT INTO t VALUES (2)")
            await conn.execute("SELECT 1")
            await conn.commit()
    asyncio.run(run())
""",
    "SQLAlchemy Session.commit()": """
import sqlalchemy
from sqlalchemy.orm import Session

def work(url):
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        session.execute(sqlalchemy.text("INSERT INTO t VALUES (1)"))
        session.commit()
        session.execute(sqlalchemy.text("SELECT 1"))
        session.commit()
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text("INSERT INTO t VALUES (2)"))
    engine.dispose()
""",
    "autocommit INSERT": """
def work(url):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS u (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("SELECT 1")
        with conn.transaction():
            conn.execute("INSERT INTO t VALUES (2)")
""",
}
PROGRAM = """
import os
import psycopg

def charge(n, idempotency_key=None):
    return n

def main():
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
    work(url)
    charge(1)
    with psycopg.connect(url) as conn:
        return sorted(row[0] for row in conn.execute("SELECT x FROM t"))
"""


@pytest.mark.usefixtures("cluster")
@pytest.mark.parametrize("case", list(COMMITS))
def test_each_commit_crosses_one_boundary(case: str, tmp_path: Path) -> None:
    """Two commits that write, two boundaries: none for a commit with nothing to commit, for
    an inner block (a savepoint), for DDL in autocommit mode, or for the program's setup."""
    if "SQLAlchemy" in case:
        _needs_sqlalchemy()
    program = tmp_path / "job.py"
    program.write_text(PROGRAM + COMMITS[case], encoding="utf-8")
    options = app_options("python", f"{program}:main", effects=["charge"], postgres=True)
    reference = reference_run(get_target("python"), options, timeout_s=TIMEOUT_S)
    assert reference.labels == ["pg.commit#1", "pg.commit#2", "effect:app.charge#charge-1"]
    what = [str(b.get("details", {}).get("what", "")) for b in reference.boundaries[:2]]
    assert all("INSERT INTO t VALUES" in w for w in what), what


def test_psycopg_is_not_imported_for_a_program_that_does_not_use_it(tmp_path: Path) -> None:
    """The commits are patched when the program imports psycopg, never before: a program that
    does not use it pays nothing (and one that does gets its commits, the test above)."""
    program = tmp_path / "job.py"
    program.write_text(
        "import sys\n\ndef charge():\n    pass\n\ndef main():\n    charge()\n"
        "    return [m for m in ('psycopg', 'sqlalchemy') if m in sys.modules]\n",
        encoding="utf-8",
    )
    options = app_options("python", f"{program}:main", effects=["charge"])
    reference = reference_run(get_target("python"), options, timeout_s=TIMEOUT_S)
    assert reference.state.answer == "[]"


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        ("tools", "apt-get install postgresql"),
        ("psycopg", "pip install 'durable-sim[postgres]'"),
    ],
)
def test_postgres_without_what_it_needs_is_one_line_exit_2(
    broken: str, says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No initdb on PATH (nor where distributions put it), or no psycopg: refused before any
    cluster or child, in one line saying what to install."""
    if broken == "tools":
        monkeypatch.setenv("PATH", "/nonexistent")
        monkeypatch.setattr(pgcluster, "FALLBACK_BINDIRS", ())
    else:
        monkeypatch.setattr(database, "PSYCOPG", "durable_sim_no_such_module")
    status = main(
        ["target", "sweep", "python", "--app", f"{EXAMPLE}:main", "--effect", EFFECT, "--postgres"]
    )
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert says in err and "--postgres" in err


def _processes_naming(root: str) -> list[int]:
    """The processes whose command line names ``root``: the cluster's postmaster (its data
    directory), a point's child (its directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if root.encode() in cmdline:
            found.append(int(entry.name))
    return found


def _started(scratch: Path) -> bool:
    """The cluster answers on its socket and a point's child runs (its directory exists)."""
    sockets = list(scratch.glob("durable-pg-*/sockets/.s.PGSQL.*"))
    return bool(sockets) and any(scratch.glob("durable-sim-point-*"))


@pytest.mark.usefixtures("cluster")  # only for its skip: the command starts its own
def test_sigterm_mid_sweep_leaves_no_cluster_or_directory() -> None:
    """SIGTERM to ``durable-sim target sweep --postgres`` while a point's child runs: it exits
    130, and the cluster's server, its socket and data directories, the point's directory and
    its child are gone."""
    scratch = Path(tempfile.mkdtemp(prefix="durable-sim-pgtest-"))
    scratch.chmod(0o755)  # the server may run as another user: it must reach its directory
    command = [
        sys.executable,
        "-m",
        "sim",
        "target",
        "sweep",
        "python",
        "--app",
        f"{EXAMPLE}:main",
        "--effect",
        EFFECT,
        "--postgres",
        "--out",
        str(scratch / "r"),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch)}
    proc = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + STARTED_WITHIN_S
        while not _started(scratch) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _started(scratch), "the sweep did not start its cluster and a point in time"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        assert sorted(p.name for p in scratch.iterdir() if p.name != "r") == []
        assert _processes_naming(str(scratch)) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _processes_naming(str(scratch)):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)
