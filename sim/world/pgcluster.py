"""A throw-away PostgreSQL cluster: for the ``PostgresStore`` tests, and for the ``python``
target's ``--postgres`` (a cluster per sweep).

``initdb`` into a fresh temporary directory, ``pg_ctl start`` listening on a Unix socket in that
directory only (``-h ''``: no TCP port, so parallel runs cannot collide), ``fsync=off`` (the
cluster dies with the test session; its durability is not what is tested), and ``pg_ctl stop -m
immediate`` at the end. Every wait is bounded: a cluster that does not come up fails the session
fixture with the server's log instead of hanging it.

``initdb`` refuses to run as root. As root the cluster is run as an unprivileged user (``postgres``,
else ``nobody``) through ``runuser``; the temporary directory is handed to that user. Tests connect
over the socket as the database superuser ``postgres`` with ``trust`` authentication (the socket's
directory is private to this run).

``unavailable()`` says why a cluster cannot be started here (no ``initdb``, no psycopg, root with
nobody to run as), so tests that need one are skipped with that reason instead of passing.
Setting ``DURABLE_SIM_PG_CONNINFO`` uses an existing server instead (nothing is started).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: An existing server to test against instead of a throw-away cluster.
CONNINFO_ENV = "DURABLE_SIM_PG_CONNINFO"
#: Users to run the cluster as when the tests run as root, in order of preference.
RUN_AS_CANDIDATES = ("postgres", "nobody")
START_TIMEOUT_S = 30
INITDB_TIMEOUT_S = 120


def run_as_user() -> str | None:
    """The unprivileged user to run the cluster as (root only), or None if not root."""
    if os.geteuid() != 0:
        return None
    for name in RUN_AS_CANDIDATES:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    return ""


def unavailable() -> str | None:
    """Why a throw-away cluster cannot run here, or None if it can."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install 'durable-sim[postgres]')"
    if os.environ.get(CONNINFO_ENV):
        return None
    missing = [tool for tool in ("initdb", "pg_ctl") if shutil.which(tool) is None]
    if missing:
        return (
            f"PostgreSQL's {' and '.join(missing)} not on PATH: cannot start a throw-away "
            f"cluster (or set {CONNINFO_ENV} to an existing server)"
        )
    user = run_as_user()
    if user == "":
        return (
            "running as root, which initdb refuses, and no unprivileged user "
            f"({', '.join(RUN_AS_CANDIDATES)}) to run the cluster as"
        )
    if user is not None and shutil.which("runuser") is None:
        return f"running as root, which initdb refuses, and no runuser to run it as {user}"
    return None


@dataclass
class Cluster:
    """A running throw-away cluster; ``stop`` ends it and removes its directory."""

    root: Path
    user: str | None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockets(self) -> Path:
        return self.root / "sockets"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def conninfo(self) -> str:
        return f"host={self.sockets} port=5432 user=postgres dbname=postgres"

    def command(self, *argv: str) -> list[str]:
        """``argv`` run as the cluster's user."""
        if self.user is None:
            return list(argv)
        return ["runuser", "-u", self.user, "--", *argv]

    def run(self, *argv: str, timeout_s: float) -> None:
        done = subprocess.run(
            self.command(*argv),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed (exit {done.returncode}): "
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}\n{log}"
            )

    def stop(self) -> None:
        """Stop at once (nothing to flush: the cluster is thrown away) and remove its files."""
        try:
            if (self.data / "postmaster.pid").exists():
                self.run(
                    "pg_ctl",
                    "stop",
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "-t",
                    str(START_TIMEOUT_S),
                    timeout_s=START_TIMEOUT_S + 10,
                )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start() -> Cluster:
    """``initdb`` and start a cluster in a new temporary directory (see the module docstring)."""
    reason = unavailable()
    assert reason is None, reason
    user = run_as_user()
    # Not under pytest's tmp_path: its parent is private to the invoking user, and the server
    # may run as another one.
    cluster = Cluster(root=Path(tempfile.mkdtemp(prefix="durable-pg-")), user=user)
    try:
        cluster.sockets.mkdir()
        if user is not None:
            entry = pwd.getpwnam(user)
            for path in (cluster.root, cluster.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        cluster.run(
            "initdb",
            "-D",
            str(cluster.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            timeout_s=INITDB_TIMEOUT_S,
        )
        options = f"-k {cluster.sockets} -h '' -c fsync=off -c full_page_writes=off"
        cluster.run(
            "pg_ctl",
            "start",
            "-D",
            str(cluster.data),
            "-l",
            str(cluster.log),
            "-o",
            options,
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            timeout_s=START_TIMEOUT_S + 10,
        )
    except Exception:
        cluster.stop()
        raise
    return cluster
