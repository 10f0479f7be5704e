"""Layer 1, the world: everything one seed determines -- the scenario, the crash points, the
simulated disk, the machine and its processes, the external services, the fake model and tools.
Imports nothing else from ``sim``."""
