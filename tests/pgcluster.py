"""The throw-away PostgreSQL cluster of the ``PostgresStore`` tests (``tests/conftest.py``'s
``pg_conninfo``): the code lives in ``sim.world.pgcluster``, where the ``python`` target's
``--postgres`` starts one too; this module keeps the tests' import of it."""

from __future__ import annotations

from sim.world.pgcluster import CONNINFO_ENV, Cluster, ClusterUnavailable, start, unavailable

__all__ = ["CONNINFO_ENV", "Cluster", "ClusterUnavailable", "start", "unavailable"]
