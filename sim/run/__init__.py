"""Layer 2, one run: a scenario under one crash schedule in a fresh world, and what the oracles
read afterwards. Imports only ``sim.world``."""
