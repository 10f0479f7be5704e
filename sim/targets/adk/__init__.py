"""The adk target: a Google ADK ``LlmAgent`` in a resumable ``App``
(``ResumabilityConfig(is_resumable=True)``) on a ``SqliteSessionService``, with a ``BaseLlm``
subclass answering from the payment script (no network) and two function tools.

Asked to pay invoice INV-42 (42 EUR) and email the receipt to ada@example.com, the agent calls
``charge_card`` (payments, declared exactly once), then ``send_receipt`` (outbox, declared
exactly once), then answers. ADK's durable state is the session: every event the runner yields
is appended to the SQLite file (``append_event``, one commit each). The restart is what ADK's
resume docs give a caller: load the session and, while its last invocation has not ended, call
``run_async(..., invocation_id=...)`` with no new message (``--durability resumable``). With
``--durability approval`` the charge needs a human's approval (``FunctionTool(...,
require_confirmation=True)``): the first run stops at ADK's ``adk_request_confirmation`` call,
the caller answers it with ``{"confirmed": true}`` in a new message under the same invocation
id, and a restart answers a confirmation still unanswered, else resumes the invocation.

Variants: ``as_is``; ``idempotent`` (each effect keyed by the invocation id and the function
call id, both kept in the session and handed back on resume).

Crash boundaries (in the child only): the scripted model's call (``model.call#n``), each tool's
effect (``effect:{service}.{op}#{call_id}``) and each ``SqliteSessionService.append_event``
(``session.append_event#n``).

With ``--app MODULE:FACTORY`` the app is the user's own, unmodified (``sim.targets.adk.app``):
the factory returns a resumable ``App`` or an agent the harness wraps in one, every
``LlmAgent`` answers from ``--model-script``, ``--input`` is the user's message, and the effects
are declared the kit's way (``--effect``, ``--effect-http``, ``--http-stub``); the same session
service, resume and boundaries, and the session read the same way
(``sim.targets.adk.app_state``).

google-adk cannot be installed beside the other targets (its OpenTelemetry pin and Prefect's
exclude each other), so this target runs in an environment of its own
(``sim.targets.environments``): its children and its state reader run under that venv's
interpreter. This module never imports google.adk: ``sim.targets.adk.agent`` and ``.state``
do, there.
"""

from __future__ import annotations

from sim.targets.environments import Environment
from sim.targets.kit.base import TargetBase
from sim.targets.protocol import AppShape, TargetError, TargetOptions

#: The release the target was built and measured against: the pin of its environment.
ADK_PIN = "google-adk==2.13.0"

#: What ADK 2.13.0 imports inside functions, on a runner's first ``run_async`` rather than with
#: ``google.adk``: the agent router and its workflow scheduler, the LLM flows, auth, the Gemini
#: model and the built-in tools (with fastapi, authlib and cryptography: about 550 modules).
#: Preloaded by the zygote, so each forked child does not import them again: measured, a child
#: went from 2.9 s to 0.35-0.45 s (2.4 s of it imports, 1.1 s compiling source where bytecode
#: is not written). Each name is a root (none imports another); a name this pin lacks makes
#: the zygote refuse, and the sweep says so and runs fresh interpreters (``sim.targets.zygote``).
LAZY_MODULES = (
    "google.adk.agents._agent_router",
    "google.adk.workflow._node_runner_utils",
    "google.adk.workflow._llm_agent_wrapper",
    "google.adk.flows.llm_flows.auto_flow",
    "google.adk.auth.auth_preprocessor",
    "google.adk.models.google_llm",
    "google.adk.tools.agent_tool",
    "google.adk.tools.google_search_tool",
    "google.adk.tools.vertex_ai_search_tool",
    "google.adk.a2a.agent",
)


class AdkTarget(TargetBase):
    name = "adk"
    description = (
        "Google ADK resumable App (scripted BaseLlm, two function tools) on "
        "SqliteSessionService, resumed by run_async(invocation_id=...); also a human approval"
    )
    distributions = ("google-adk",)
    durabilities = ("resumable", "approval")
    savers = ("sqlite",)
    resumes = ("invocation",)
    environment = Environment(name="adk", pins=(ADK_PIN,))
    child_module = "sim.targets.adk.agent"
    state_module = "sim.targets.adk.state"
    app_shape = AppShape(
        names="a factory returning a resumable google.adk App or an agent, build_app()",
        takes=frozenset({"--input", "--model-script"}),
        requires=frozenset({"--input", "--model-script"}),
        input_kinds=(str,),
        child_module="sim.targets.adk.app",
        state_module="sim.targets.adk.app_state",
    )
    demo_point_s = 1.0  # measured 0.9-1.0 s a point at load 4-5, forked (docs/targets.md)

    def validate(self, options: TargetOptions) -> TargetOptions:
        """An app runs as it is written: ``--durability approval`` makes the bundled agent's
        charge ask a human, and an app's own ``require_confirmation`` tools are approved under
        the default ``resumable``."""
        if options.app is not None and options.durability == "approval":
            raise TargetError(
                "adk: --durability approval is the bundled agent's; an app's own confirmations "
                "are approved under --durability resumable"
            )
        return options

    def preload(self, options: TargetOptions) -> tuple[str, ...]:
        """The agent's modules, then what ADK imports on its first run (``LAZY_MODULES``)."""
        return (*super().preload(options), *LAZY_MODULES)


TARGET = AdkTarget()
