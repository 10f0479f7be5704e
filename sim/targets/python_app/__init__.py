"""The ``python`` target: a user's own Python program, run unmodified, crash-tested.

For a runtime the project has no target for (a team's home-grown agent loop, a batch job that
keeps its progress in SQLite), ``durable-sim target sweep python --app my_job.py:main --effect
charge=exactly_once`` runs ``main()`` in a child process whose working directory is the point's
own, so the program's durable files are the point's. The harness takes the program's boundaries
from what it does, without a line of it changed:

- every commit of a ``sqlite3`` connection the program opens (``Connection.commit`` and the
  connection used as a context manager), ``sqlite.commit#n``;
- every ``os.fsync``, ``os.replace`` and ``os.rename``, ``os.fsync#n`` and so on;
- every ``close`` of a file the program opened by name for writing (``open``, ``io.open``,
  ``pathlib``'s writes), ``file.close#n``: a kill before it loses what Python buffered;
- every call of a function the user names with ``--effect NAME=POLICY`` (a module-level function
  of the program's module, looked up at call time as the program's own calls look it up): the
  call lands on the effect ledger outside the child (``effect:app.NAME#NAME-n``), which models
  the external service -- a call that passes ``idempotency_key=...`` is deduplicated there, as a
  payment provider deduplicates a repeated key -- and then the function itself runs.

It kills the program at each boundary, before and after, and runs it again in a fresh process
(the program resumes from its own durable state, as it does in production), until it returns.
The judge (``sim.targets.judge``) holds each effect function to the policy the user declared
(``exactly_once``, ``at_most_once``, ``at_least_once``) against the fault-free run, the program's
return value to the fault-free run's, and the run to finishing. The program's own state is
opaque to the harness: the findings that read a runtime's history (H1, I6) do not apply.

What it does not see: a commit made by executing ``COMMIT`` as SQL, a connection opened with a
``factory`` of its own, a file opened with ``os.open``, writes of another process the program
starts.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sim.targets.protocol import ChildContext, TargetError, TargetOptions, TargetState, TargetTool
from sim.targets.python_app.options import canonical_effects, checked_app, parse_effects


class PythonTarget:
    name: str = "python"
    description: str = "your own Python program (--app FILE.py:FUNCTION), unmodified"
    extra: str = ""  # the standard library only
    distributions: tuple[str, ...] = ()
    durabilities: tuple[str, ...] = ("own",)
    variants: tuple[str, ...] = ("as_is",)
    savers: tuple[str, ...] = ("files",)
    resumes: tuple[str, ...] = ("rerun",)

    def missing(self) -> str | None:
        return None

    def validate(self, options: TargetOptions) -> TargetOptions:
        """The options with ``--app`` checked and absolute and ``--effect`` canonical."""
        if not options.app:
            raise TargetError("python: --app FILE.py:FUNCTION (or MODULE:FUNCTION) is required")
        if not options.effects:
            raise TargetError("python: name at least one effect function: --effect NAME=POLICY")
        if options.app_input or options.model_script:
            raise TargetError("python: --input and --model-script are a framework target's")
        effects = canonical_effects(options.effects)
        return replace(options, app=checked_app(options.app), effects=effects)

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        return parse_effects(options.effects)

    def run_child(self, ctx: ChildContext) -> str:
        from sim.targets.python_app.child import run_child

        return run_child(ctx)

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        from sim.targets.python_app.child import read_state

        return read_state(point_dir, options)


TARGET = PythonTarget()
