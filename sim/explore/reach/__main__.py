"""``python -m sim.explore.reach OPTIONS_JSON OUT``: the measuring interpreter that
``run_measurement`` starts. The hook it registers is the importable module's
(``sim.explore.reach.measurement``), the one a forked sweep child calls."""

import sys

from sim.explore.reach.measurement import worker

sys.exit(worker(sys.argv[1:]))
