"""``durable-sim``: the command line of the simulator (docs/architecture.md, 3).

One module per command (``single_run``: list, run, replay; ``sweep``; ``fuzz``; ``mutants``;
``bench``; ``realcrash``; ``coverage``), each with ``add_parsers(sub)`` that sets its handler;
``main`` parses and dispatches; ``common`` holds the shared options and the exit statuses;
``startup`` keeps an interrupt during the imports below from printing a traceback.

Exit status: 0 all pass, 1 a safety violation, 2 usage error, 3 liveness, 4 nondeterminism,
5 harness error (a seam's code that raised, too), 130 interrupted. Bad input gets one line on
stderr naming the problem, never a traceback.
"""

from sim.outputs.cli import startup

startup.guard()  # before the imports it guards: they take over a second

from sim.outputs.cli.main import entry, main  # noqa: E402

startup.imported()

__all__ = ["entry", "main"]
