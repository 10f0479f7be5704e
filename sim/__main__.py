"""``python -m sim`` is the ``durable-sim`` command."""

from sim.outputs.cli import entry

raise SystemExit(entry())
