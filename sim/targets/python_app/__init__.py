"""The ``python`` target: a user's own Python program, run unmodified, crash-tested.

For a runtime the project has no target for (a team's home-grown agent loop, a batch job that
keeps its progress in SQLite), ``durable-sim target sweep python --app my_job.py:main --effect
charge=exactly_once`` runs ``main()`` in a child process whose working directory is the point's
own, so the program's durable files are the point's. The harness takes the program's boundaries
from what it does, without a line of it changed:

- every commit of a ``sqlite3`` connection the program opens (``Connection.commit`` and the
  connection used as a context manager), ``sqlite.commit#n``;
- every ``os.fsync``, ``os.replace`` and ``os.rename``, ``os.fsync#n`` and so on, and every
  ``os.write`` on a descriptor the program opened for writing with ``os.open``, ``os.write#n``;
- every commit to PostgreSQL through psycopg 3, sync or async -- ``commit()``, the end of ``with
  conn:`` and of the outermost ``conn.transaction()`` block, a statement that changes rows in
  autocommit mode, and so SQLAlchemy's ``Session.commit()`` and ``engine.begin()`` on psycopg --
  ``pg.commit#n``, when the transaction wrote something (``sim.targets.python_app.postgres``);
- every ``close`` of a file the program opened by name for writing (``open``, ``io.open``,
  ``pathlib``'s writes), ``file.close#n``: a kill before it loses what Python buffered;
- every call of an effect the user declares (``sim.targets.kit``): ``--effect NAME=POLICY`` (a
  function of the program's module, or ``module:qualname`` -- a function of any module, a method
  of a class or of an object) and ``--effect-http 'METHOD URL'`` (a call through httpx, requests
  or urllib3): the call lands on the effect ledger outside the child
  (``effect:app.NAME#NAME-n``, ``effect:http.METHOD URL#...``), which models the external service
  -- a call that carries an idempotency key is deduplicated there, as a payment provider
  deduplicates a repeated key -- and then the function itself runs (an HTTP call is answered by
  the user's stub and never leaves the process).

It kills the program at each boundary, before and after, and runs it again in a fresh process
(the program resumes from its own durable state, as it does in production), until it returns.
The judge (``sim.targets.judge``) holds each effect function to the policy the user declared
(``exactly_once``, ``at_most_once``, ``at_least_once``) against the fault-free run, the program's
return value to the fault-free run's, and the run to finishing. The program's own state is
opaque to the harness: the findings that read a runtime's history (H1, I6) do not apply.

With ``--postgres`` the harness starts a throw-away PostgreSQL cluster for the sweep and gives
each point a fresh database, named by ``DATABASE_URL`` (and ``SQLALCHEMY_URL``, ``PGHOST``...) in
the program's environment (``sim.targets.python_app.database``): the server is the durable
service, never killed; the program is.

What it does not see: a commit made by executing ``COMMIT`` as SQL, a connection opened with a
``factory`` of its own, writes of another process the program starts, other PostgreSQL drivers
than psycopg 3.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from sim.targets.kit.base import TargetBase
from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import AppShape, Demo, TargetError, TargetOptions

#: The bundled demo job (``sim.targets.python_app.demo_job``): the conformance test's app.
DEMO_JOB = "sim.targets.python_app.demo_job"


class PythonTarget(TargetBase):
    name = "python"
    description = "your own Python program (--app FILE.py:FUNCTION), unmodified"
    durabilities = ("own",)
    variants = ("as_is",)
    savers = ("files",)
    resumes = ("rerun",)
    snapshot_refusal = None  # the program's files are the point's: its working directory
    app_shape = AppShape(
        names="a function main() that runs the job",
        takes=frozenset({"--postgres"}),
        child_module="sim.targets.python_app.child",
        state_module="sim.targets.python_app.child",
    )

    def validate(self, options: TargetOptions) -> TargetOptions:
        """An app is required; ``--postgres`` needs psycopg and PostgreSQL's server tools,
        refused here in one line that says what to install, before any cluster or child."""
        if options.app is None:
            raise TargetError("python: --app FILE.py:FUNCTION (or MODULE:FUNCTION) is required")
        if options.app.postgres:
            # psycopg (the postgres extra), needed with --postgres only
            from sim.targets.python_app.database import missing

            why = missing()
            if why is not None:
                raise TargetError(why)
        return options

    def service(self, options: TargetOptions) -> contextlib.AbstractContextManager[object]:
        """With ``--postgres``, the sweep's throw-away cluster (a nested entry, ``run_point``'s
        around one point, reuses it and drops that point's database after it)."""
        if options.app is None or not options.app.postgres:
            return contextlib.nullcontext()
        # psycopg (the postgres extra), needed with --postgres only
        from sim.targets.python_app.database import serving

        return serving()

    def point_env(self, options: TargetOptions, point_dir: Path) -> dict[str, str]:
        """With ``--postgres``, a fresh database for the point: ``DATABASE_URL`` and the rest
        (``sim.targets.python_app.database``)."""
        del point_dir
        if options.app is None or not options.app.postgres:
            return {}
        # psycopg (the postgres extra), needed with --postgres only
        from sim.targets.python_app.database import point_env

        return point_env()

    def no_snapshots(self, options: TargetOptions) -> str | None:
        """Its database is not the point's with ``--postgres``. Whether the program's prefix is
        deterministic is the check's to find."""
        if options.app is not None and options.app.postgres:
            return "with --postgres the program's state is in a database outside the point"
        return None

    def demo(self) -> Demo:
        """The demo job charges an order, then records it in SQLite; keyed, it sweeps clean."""

        def job(function: str) -> TargetOptions:
            args = AppArgs(app=f"{DEMO_JOB}:{function}", effects=("charge",))
            return TargetOptions(app=parse_app(self.name, args))

        return Demo(
            as_is=job("main"),
            fixed=job("main_keyed"),
            points=(("effect:app.charge", "after"), ("sqlite.commit", "before")),
            point_s=1.0,
        )


TARGET = PythonTarget()
