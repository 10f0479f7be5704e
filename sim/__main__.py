"""``python -m sim`` is the ``durable-sim`` command."""

from sim.outputs.cli import main

raise SystemExit(main())
