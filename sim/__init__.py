"""durable-sim: a deterministic simulation and crash-testing harness for durable agent runtimes.

The package is layered; each layer imports only the layers before it (docs/architecture.md,
section 2, "Layers"; ``tests/project/test_layers.py`` enforces it):

1. ``sim.world``     -- one seeded world: scenario, crash points, disk, processes, services, model
   and tools
2. ``sim.run``       -- one run of a scenario under one crash schedule
3. ``sim.judgement`` -- the oracles, verdicts, repro lines and timelines of a run
4. ``sim.explore``   -- many runs: sweeps, forking, fuzzing, mutants, reach
   ``sim.targets``   -- foreign runtimes (LangGraph, DBOS) crash-tested in real processes
5. ``sim.outputs``   -- what users see: reports, bench, the real-process host, CLI, pytest plugin
"""
