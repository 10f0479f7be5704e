"""The llama-index target: a LlamaIndex Workflow (``llama-index-workflows`` 2.26.1, module
``workflows``) of two ``@step``s, made durable by the route that package itself ships: the
checkpoint loop of upstream's "Writing durable workflows" page.

Why that route: in 2.26.1 ``BasicRuntime`` (the default) is "asyncio-based ... with no
durability"; the page says "There is no built-in checkpointer to enable": the user streams the
run's internal events (``handler.stream_events(expose_internal=True)``), saves
``handler.ctx.to_dict()`` each time a ``StepStateChanged`` reports ``StepState.NOT_RUNNING``, and
after a crash loads the last snapshot and passes ``Context.from_dict(wf, snapshot)`` to
``wf.run(ctx=...)``. The managed routes the page points to next (``DurableWorkflowRuntime`` with
a ``SqliteWorkflowStore``, from ``llama-agents-server``; the DBOS runtime, from
``llama-agents-dbos``) are separate distributions that are not installed here. The same page
says what this target shows: "A step that was mid-execution when you captured the state is
rewound and runs again from the top. Resume is at-least-once."

The workflow ``PayInvoice``: ``charge_card`` (StartEvent -> Charged; payments, declared exactly
once), then ``send_receipt`` (Charged -> StopEvent with the answer; outbox, declared exactly
once). Each step records its result in the workflow's state store (``ctx.store``), which the
page names as where values that must survive a restart go, so the snapshot says which steps
are done. The snapshot is saved, as the page's ``db.save("my-run", ...)``, in a SQLite table
(``checkpoints.sqlite``), one row per run id, overwritten at each save.

Durability ``step``: a snapshot at every step's end (the page's loop). Resume ``running``: a
restarted process resumes from the last snapshot while it says the run is still running
(``is_running``), starts the run when there is none, and does nothing once the snapshot is of a
finished run (a finished snapshot passed to ``run(ctx=...)`` starts the workflow over from a new
``StartEvent``: the context is then carried into a new run, not resumed).

Variants: ``as_is``; ``idempotent``: each effect keyed by the run id (fixed, ``pay-INV-42``)
and the step's work item id (``work_item_1``), which the runtime keeps in the snapshot of an
in-progress step and gives back to the re-run step (and numbers the same way in a run started
over), so the re-run carries the same key -- and the workflow starts with a step that does
nothing outside (``accept``), so the loop has saved a snapshot before the first effect: a kill
during the charge resumes it instead of starting the run over (the fix the page implies).

Crash boundaries (in the child only): each step's body (``step.{name}#n``: before it runs,
after it returned its event), each effect (``effect:{service}.{op}#{run id}:{work item}``) and
each save of the snapshot (``checkpoint.save#n``, the route's only durable write).

This module never imports the library: ``sim.targets.llama_index.workflow`` does, in the child
and when the state is read.
"""

from __future__ import annotations

from sim.targets.kit.base import TargetBase

#: The module the distribution ``llama-index-workflows`` installs (its import name).
REQUIRED = ("workflows",)


class LlamaIndexTarget(TargetBase):
    name = "llama-index"
    #: ``--recovery-only`` allowed: its checkpoints are a SQLite file in the point's directory,
    #: written from the workflow's own task (every point of its demo, as is and keyed, judged
    #: alike from snapshots and the real way).
    snapshot_refusal = None
    description = (
        "LlamaIndex Workflow (two @steps) with the checkpoint loop of its durable-workflows "
        "docs: Context.to_dict() saved to SQLite at each step's end, Context.from_dict() on restart"
    )
    extra = "llama-index"
    distributions = ("llama-index-workflows",)
    durabilities = ("step",)
    variants = ("as_is", "idempotent")
    savers = ("sqlite",)
    resumes = ("running",)
    required = REQUIRED
    child_module = "sim.targets.llama_index.workflow"
    state_module = "sim.targets.llama_index.workflow"
    demo_point_s = 1.0


TARGET = LlamaIndexTarget()
