"""The Temporal workflow under test, as a user writes it: the payment agent's shape, each effect an
activity.

Kept apart from the worker's module on purpose: Temporal runs workflow code in a sandbox that
re-imports the workflow's module, so this module imports nothing but ``temporalio`` and refers
to its activities by name (the worker, ``sim.targets.temporal.worker``, registers them).

Timeouts are short so that a point takes seconds, not minutes: Temporal retries an activity
whose worker died only once its start-to-close timeout has passed (``ACTIVITY_TIMEOUT``; then
the next attempt ``RETRY_FIRST`` later: Temporal's default retry policy but for its first
interval, 1 s by default, which was a fifth of such a point; the resume child brings the
timeout forward, ``sim.targets.temporal.expiry``), and re-dispatches a workflow task whose worker
died once the workflow task timeout has passed (``TASK_TIMEOUT``, set when the workflow is
started: 1 s, against at most 21 ms for a workflow task in one sweep of the target here, and
0.12 s in three sweeps while the fast test tier ran on both cores).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

WORKFLOW_NAME = "pay_invoice"
USER_INPUT = "Please pay invoice INV-42 (42 EUR) and email the receipt to ada@example.com."
ANSWER = "Paid invoice INV-42 (42 EUR) and emailed the receipt to ada@example.com."
ACTIVITY_TIMEOUT = timedelta(seconds=3)
TASK_TIMEOUT = timedelta(seconds=1)
RETRY_FIRST = timedelta(milliseconds=100)
RETRY = RetryPolicy(initial_interval=RETRY_FIRST)


@workflow.defn(name=WORKFLOW_NAME)
class PayInvoice:
    """Charge the card, then email the receipt (each an activity, in this order), then answer."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        del prompt  # the bundled workflow's plan is fixed: the prompt is its recorded input
        await workflow.execute_activity(
            "charge_card",
            {"invoice": "INV-42", "amount_eur": 42},
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=RETRY,
            result_type=str,
        )
        await workflow.execute_activity(
            "send_receipt",
            {"to": "ada@example.com", "invoice": "INV-42"},
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=RETRY,
            result_type=str,
        )
        return ANSWER
