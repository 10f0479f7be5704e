"""Targets: crash-testing the durable agent runtimes people actually use (LangGraph, ...).

A *target* is a foreign runtime driven by the harness in real child processes: it names its crash
boundaries (library functions the child wraps), how to start and resume a run, how to read its
durable state, and the tools whose effects land on a ledger outside the child
(``sim.targets.ledger``). A child SIGKILLs itself at one boundary of the fault-free trace; a fresh
child resumes; the judge (``sim.targets.judge``) compares what the ledger and the runtime's own
state say with the fault-free run and with the policy the user declares for each tool.

This layer sits between ``sim.explore`` and ``sim.outputs``: it reuses the results shapes of the
explore layer (``ScenarioSweep``, ``results_document``) and the judgement layer's ``Violation``,
and the outputs layer renders its sweeps. No module here imports a target's library at module
level: a target's library is an optional extra, imported only inside the child process or when
its state is read.
"""
