"""CrewAI's switches set in this process (``OFFLINE_ENV``): imported by the crewai target's zygote
before the flow's module, so that importing crewai starts no telemetry exporter thread (which
would also keep the zygote from forking) and no later call of CrewAI tries the network.

A child forked from the zygote gets its environment from the parent (``Target.point_env``), and
a fresh child or reader is started with it or sets it (``sim.targets.crewai.state``); this module
is for the one process that imports crewai before any point is known.
"""

from __future__ import annotations

import os

from sim.targets.crewai import OFFLINE_ENV

os.environ.update(OFFLINE_ENV)
