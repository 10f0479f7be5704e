"""The target kit: what every target shares, so that an adapter for a runtime declares only what
differs -- how its agent or the user's app is built, run, resumed, and how its state is read.

- ``spec``: ``AppSpec``, the user's app as the harness runs it (the entry point, the effects
  wherever they are made, HTTP effects, the run's input, the model's script), parsed and checked
  once in the parent and handed to every child whole;
- ``options``: checking a target's options against its ``AppShape`` and its modes;
- ``base``: ``TargetBase``, the defaults of every hook of ``sim.targets.protocol.Target``;
- ``loading``, ``effects``, ``http``, ``landing``: inside a child, loading the app and landing
  each declared effect (a function, a method, an HTTP call) on the ledger;
- ``scripted``: a ``--model-script`` turn as the scripted model in a user's app answers it.

docs/architecture.md, section 2.10 ("Targets"), says how the pieces fit.
"""
