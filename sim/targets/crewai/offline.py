"""CrewAI's switches (``OFFLINE_ENV``) and a home of its own (``isolated_home``, in the venv)
set in this process: imported by the crewai target's zygote before the flow's module, so that
importing crewai starts no telemetry exporter thread (which would also keep the zygote from
forking), no later call of CrewAI tries the network, and what crewai fixes when imported (its
config path) is not the user's.

A child forked from the zygote gets its environment from the parent (``Target.point_env``), and
a fresh child is started with it; the state reader imports no crewai. This module is for the one
process that imports crewai before any point is known.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sim.targets.crewai import OFFLINE_ENV, isolated_home

os.environ.update({**OFFLINE_ENV, **isolated_home(Path(sys.prefix) / "home")})
