"""Campaigns: a sweep (or a fuzzing budget) as a deterministic plan of small units of work, spread
over any number of processes and machines, each unit's result a file (docs/campaigns.md).

- ``address``: canonical JSON, content addresses, the project version a result belongs to;
- ``plan``: the units -- a scenario x store x crash kinds x a range of fold roots -- their costs,
  and a shard's share of them;
- ``unit``: one unit run and its result document (also ``python -m sim.explore.campaign.unit``,
  the fresh interpreter a remote worker runs a unit in);
- ``document``: a unit's result as JSON with a checksum of its own content;
- ``files``: the campaign directory, its atomically written, checksummed unit files;
- ``merge``: unit results back into the one-process sweep's results, in plan order;
- ``tasks`` and ``engines``: what an executor is, and the executors (the local process pool;
  ``dask_engine`` imports Dask, and only it);
- ``run``: a campaign end to end -- plan, skip what is done, run the rest, merge;
- ``fuzz_unit`` and ``fuzz_budget``: fuzzing as units, for a time budget.

The layer is ``sim.explore``: nothing here imports the reports or the command line.
"""
