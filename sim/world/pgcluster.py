"""A throw-away PostgreSQL cluster: the project's ``PostgresStore`` tests run on one, and so do the
points of a ``python`` target sweep with ``--postgres`` (``sim.targets.python_app.database``).

``initdb`` into a fresh temporary directory, ``pg_ctl start`` listening on a Unix socket in that
directory only (``-h ''``: no TCP port, so parallel runs cannot collide), ``fsync=off`` (the
cluster dies with its user; its durability is not what is tested: a crash point kills the
program, never the server), and ``pg_ctl stop -m immediate`` at the end. Every wait is bounded: a
cluster that does not come up raises ``ClusterUnavailable`` with the server's log instead of
hanging its caller.

``initdb`` refuses to run as root. As root the cluster is run as an unprivileged user
(``postgres``, else ``nobody``) through ``runuser``; the temporary directory is handed to that
user. Clients connect over the socket as the database superuser ``postgres`` with ``trust``
authentication (the socket's directory is private to this run).

The tools are found on ``PATH``, else in the directories distributions install them in without
putting them on ``PATH`` (``FALLBACK_BINDIRS``: Debian's and Ubuntu's ``apt-get install
postgresql``, the PGDG RPMs), the newest version first. ``cannot_start()`` says why no cluster
can be started here (no ``initdb``, root with nobody to run as); ``unavailable()`` is the tests'
wider question (no psycopg either, unless ``DURABLE_SIM_PG_CONNINFO`` names a server to use
instead), so tests that need a server are skipped with that reason instead of passing.

Cleanup survives an interrupt: a ``start`` interrupted half-way removes what it made, and
``stop`` holds SIGINT and SIGTERM back while it stops the server and removes its files (bounded
by the stop's timeout; the signal is delivered right after), so a second Ctrl-C cannot leave a
server running on removed files. A server ``pg_ctl`` cannot stop is killed by its pid.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from durable.store.postgres import EXTRA
from sim.errors import UserError
from sim.world.pgserver import CONNINFO_ENV as CONNINFO_ENV

#: Users to run the cluster as when running as root, in order of preference.
RUN_AS_CANDIDATES = ("postgres", "nobody")
#: Where distributions put PostgreSQL's server tools off ``PATH`` (globs; newest version first).
FALLBACK_BINDIRS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin")
#: The tools a cluster needs.
TOOLS = ("initdb", "pg_ctl")
#: The port the socket is named after (``.s.PGSQL.5432`` in the cluster's private directory).
PORT = 5432
START_TIMEOUT_S = 30
INITDB_TIMEOUT_S = 120
#: After ``pg_ctl stop`` failed: how long the postmaster may take to die of SIGKILL.
KILL_WAIT_S = 5.0
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class ClusterUnavailable(UserError, RuntimeError):
    """No cluster here: the tools are missing, or the cluster did not start (with its log)."""


def run_as_user() -> str | None:
    """The unprivileged user to run the cluster as (root only), or None if not root; "" when
    root has nobody to run it as."""
    if os.geteuid() != 0:
        return None
    for name in RUN_AS_CANDIDATES:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    return ""


def tools() -> dict[str, str] | None:
    """The path of each of ``TOOLS``, all from one installation: ``PATH`` first, else the
    newest of ``FALLBACK_BINDIRS`` that has them all; None if none has."""
    on_path = {tool: shutil.which(tool) for tool in TOOLS}
    if all(on_path.values()):
        return {tool: str(path) for tool, path in on_path.items()}
    found = [d for pattern in FALLBACK_BINDIRS for d in glob.glob(pattern)]
    for bindir in sorted(found, key=_version_key, reverse=True):
        paths = {tool: os.path.join(bindir, tool) for tool in TOOLS}
        if all(os.access(path, os.X_OK) for path in paths.values()):
            return paths
    return None


def _version_key(bindir: str) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin`` sorts after ``.../9.6/bin``: by the numbers in the path."""
    return tuple(int(n) for n in re.findall(r"\d+", bindir))


def cannot_start() -> str | None:
    """Why a throw-away cluster cannot be started here (one line), or None if it can."""
    if tools() is None:
        return (
            "PostgreSQL's server tools (initdb, pg_ctl) are not installed: apt-get install "
            "postgresql (or put the directory of its initdb and pg_ctl on PATH)"
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


def unavailable() -> str | None:
    """Why the tests cannot have a server here (no psycopg; no cluster to start and no
    ``CONNINFO_ENV``), or None if they can."""
    if importlib.util.find_spec("psycopg") is None:
        return f"psycopg is not installed (pip install '{EXTRA}')"
    if os.environ.get(CONNINFO_ENV):
        return None
    reason = cannot_start()
    return None if reason is None else f"{reason}; or set {CONNINFO_ENV} to an existing server"


@dataclass
class Cluster:
    """A running throw-away cluster; ``stop`` ends it and removes its directory."""

    root: Path
    user: str | None
    paths: dict[str, str]

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
        return f"host={self.sockets} port={PORT} user=postgres dbname=postgres"

    def uri(self, database: str) -> str:
        """A libpq URI for ``database`` on this cluster (host and port in the query, as libpq
        spells a socket directory; both given, so no ``PGHOST``/``PGPORT`` of the caller's
        environment can redirect it)."""
        return (
            f"postgresql://postgres@/{quote(database)}"
            f"?host={quote(str(self.sockets), safe='/')}&port={PORT}"
        )

    def command(self, *argv: str) -> list[str]:
        """``argv`` (its first word one of ``TOOLS``) run as the cluster's user."""
        words = [self.paths.get(argv[0], argv[0]), *argv[1:]]
        if self.user is None:
            return words
        return ["runuser", "-u", self.user, "--", *words]

    def run(self, *argv: str, timeout_s: float) -> None:
        try:
            done = subprocess.run(
                self.command(*argv),
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
            raise ClusterUnavailable(
                f"{' '.join(argv[:2])} did not finish in {timeout_s:g} s\n{self._log_tail()}"
            ) from exc
        if done.returncode != 0:
            raise ClusterUnavailable(
                f"{' '.join(argv[:2])} failed (exit {done.returncode}): "
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}\n{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""

    def stop(self) -> None:
        """Stop at once (nothing to flush: the cluster is thrown away) and remove its files,
        with the stop signals held back meanwhile (see the module docstring)."""
        with _stop_signals_held():
            try:
                self._stop_server()
            finally:
                shutil.rmtree(self.root, ignore_errors=True)

    def _stop_server(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return
        try:
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
        except (ClusterUnavailable, OSError):
            _kill_postmaster(pid_file)


def _kill_postmaster(pid_file: Path) -> None:
    """SIGKILL the postmaster named by its pid file and wait, bounded, for it to go (its
    backends follow it when they see it gone)."""
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back for the block (main thread only: where Python runs its
    handlers); one that came meanwhile is delivered when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def start() -> Cluster:
    """``initdb`` and start a cluster in a new temporary directory (see the module docstring);
    ``ClusterUnavailable`` (its first line says why) if it cannot be started."""
    reason = cannot_start()
    if reason is not None:
        raise ClusterUnavailable(reason)
    paths = tools()
    assert paths is not None, "cannot_start() found them"
    user = run_as_user()
    # Not under pytest's tmp_path: its parent is private to the invoking user, and the server
    # may run as another one.
    cluster = Cluster(root=Path(tempfile.mkdtemp(prefix="durable-pg-")), user=user, paths=paths)
    try:
        _initdb_and_start(cluster)
    except BaseException:  # an interrupt too: nothing of a half-made cluster is left
        cluster.stop()
        raise
    return cluster


def _initdb_and_start(cluster: Cluster) -> None:
    cluster.sockets.mkdir()
    if cluster.user is not None:
        entry = pwd.getpwnam(cluster.user)
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
