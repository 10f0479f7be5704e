"""Layer 3, judgement: the invariant registry, the oracles over a run, the verdict of a schedule,
repro lines and timelines. Imports only ``sim.world`` and ``sim.run``."""
