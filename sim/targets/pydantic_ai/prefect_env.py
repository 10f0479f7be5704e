"""Prefect's API for the ``prefect`` durability of the pydantic-ai target: one local, offline
Prefect server per point, served inside each child process, on the point's own SQLite database.

Prefect runs a flow only against an API (it creates the flow run there and sets its states), so
something must serve one. Prefect's own ways do not survive this harness: its ephemeral mode
(``SubprocessASGIServer``, what ``get_client`` starts when no ``PREFECT_API_URL`` is set) and
``prefect.testing.utilities.prefect_test_harness`` both start a uvicorn *subprocess* that
``atexit`` stops -- which a SIGKILL skips, so the server would outlive the point -- and the
harness keeps its database in a fresh ``mkdtemp`` the next child never finds. Here each child
binds a loopback socket itself, points Prefect's settings at the point's files, and serves
Prefect's own API app (``create_app(ephemeral=True)``) with uvicorn in a daemon thread of its
own process (``sim.targets.pydantic_ai.prefect_agent.PrefectServer``): a SIGKILL or a Ctrl-C ends
the server with the child, so no server process is ever left after a point, and the next child
serves the same database file again. What this costs in realism: the API dies with the flow's
process (a deployment's server would not), so task-run *events* still in flight at the kill are
lost; flow-run states are written synchronously through the API and task results are files,
which is all Prefect's recovery reads.

Prefect reads its settings when it is first imported, so ``configure`` sets the environment
before anything imports prefect (and drops any ``PREFECT_*`` of the user's, e.g. a Cloud URL);
in a child forked from a warm zygote, which imported prefect under the settings every point
shares (``prefect_preload``), it sets the point's and has Prefect read them again.
Migrating a new Prefect SQLite database takes tens of seconds; it is done once per machine and
Prefect version into a template (``python -m sim.targets.pydantic_ai.prefect_env PATH``, in the
user's cache directory), and each point's first child starts from a copy of it.

This module never imports prefect (only its template subprocess does).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from sim.targets.protocol import ChildContext

DB_NAME = "prefect.sqlite"
RESULTS_DIR = "prefect-results"
HOME_DIR = "prefect-home"
TEMPLATE_TIMEOUT_S = 600.0


def _settings(home: Path, db: Path) -> dict[str, str]:
    """The settings every Prefect process of a point shares (the API URL comes on top)."""
    return {
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{db}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_TO_API_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        # The template is migrated once; a copy needs no migration and no block registration.
        "PREFECT_API_DATABASE_MIGRATE_ON_START": "false",
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        # What Prefect's own ephemeral server sets: no UI, the services an ephemeral API runs.
        "PREFECT__SERVER_EPHEMERAL": "1",
    }


def _set_environment(values: dict[str, str]) -> None:
    for name in [n for n in os.environ if n.startswith("PREFECT_")]:
        del os.environ[name]
    os.environ.update(values)


def set_shared_settings() -> None:
    """Before a warm zygote imports prefect (``prefect_preload``): the settings every point
    shares, with a home beside the template and a database no process opens (a point's own
    are set in the child by ``configure``)."""
    cache = template_path().parent
    _set_environment(_settings(cache / HOME_DIR, cache / "zygote-never-opened.sqlite"))


def template_path() -> Path:
    """In the user's cache directory (``XDG_CACHE_HOME``, else ``~/.cache``): a cache kept on
    purpose across sweeps, not a temporary directory a run leaves behind."""
    version = metadata.version("prefect")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "durable-sim" / f"prefect-{version}" / DB_NAME


def ensure_template() -> Path:
    """The migrated, empty Prefect database every point copies (made once, atomically: two
    sweeps that both make it each write their own file and the last rename wins)."""
    template = template_path()
    if template.exists():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(dir=template.parent, suffix=".sqlite")
    os.close(fd)
    os.unlink(scratch)
    env = {n: v for n, v in os.environ.items() if not n.startswith("PREFECT_")}
    env |= _settings(template.parent / HOME_DIR, Path(scratch))
    command = [sys.executable, "-m", "sim.targets.pydantic_ai.prefect_env", scratch]
    subprocess.run(command, env=env, check=True, timeout=TEMPLATE_TIMEOUT_S, capture_output=True)
    os.replace(scratch, template)
    return template


def configure(point_dir: Path) -> socket.socket:
    """In a child, before it uses prefect: the point's database (a copy of the template, the
    first time), its result storage and home, and a bound loopback socket whose port is the
    API URL's (bound here, served by the child's server: no race for the port). Prefect, if a
    zygote imported it already, reads these settings again."""
    db = point_dir / DB_NAME
    if not db.exists():
        source = sqlite3.connect(ensure_template())
        target = sqlite3.connect(db)
        try:
            source.backup(target)  # consistent whatever the template's journal holds
        finally:
            target.close()
            source.close()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    values = _settings(point_dir / HOME_DIR, db)
    values["PREFECT_LOCAL_STORAGE_PATH"] = str(point_dir / RESULTS_DIR)
    values["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    _set_environment(values)
    context = sys.modules.get("prefect.context")
    if context is not None:  # forked from a zygote that imported prefect under shared settings
        context.refresh_global_settings_context()
    return sock


def run_child(ctx: ChildContext) -> str:
    """Configure Prefect for the point, then run the agent's flow (start or retry it)."""
    sock = configure(ctx.point_dir)
    # Prefect reads its settings when imported: only after configure() set the point's
    from sim.targets.pydantic_ai.prefect_agent import run_child as run_flow_child

    return run_flow_child(ctx, sock)


def _migrate() -> None:
    # Prefect reads its settings when imported: only after configure() set the point's
    from prefect.server.database import provide_database_interface

    asyncio.run(provide_database_interface().create_db())


if __name__ == "__main__":  # the template's subprocess, its settings already in the environment
    if len(sys.argv) != 2:
        sys.exit("usage: python -m sim.targets.pydantic_ai.prefect_env DATABASE_PATH")
    _migrate()
