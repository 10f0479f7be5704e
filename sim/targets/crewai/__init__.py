"""The crewai target: a CrewAI ``Flow`` with structured state (a pydantic model), decorated with
``@persist(SQLiteFlowPersistence(...))`` on a file in the point's directory, whose steps ask a
``BaseLLM`` subclass answering from the payment script (no network) for the next step.

Asked to pay invoice INV-42 (42 EUR) and email the receipt to ada@example.com, the flow's router
asks the model, which calls ``charge_card`` (payments, declared exactly once), then
``send_receipt`` (outbox, declared exactly once), then answers; a listener runs each call the
state holds without a result and appends the result. CrewAI's durable state is the flow's state:
after each method completes, ``@persist`` inserts the whole state as one row of the SQLite file
(``SQLiteFlowPersistence.save_state``, one commit each). The restart is what CrewAI's docs give a
caller: ``kickoff(inputs={"id": FLOW_ID})`` of the fixed flow id, which loads the latest saved
state and runs the flow from its start method again over it (``--durability persist``).

Variants: ``as_is``; ``idempotent`` (each effect keyed by the flow id and the tool call id, both
kept in the persisted state: a method run again after a kill sends its first attempt's key).

Crash boundaries (in the child only): the scripted model's call (``model.call#n``), each tool's
effect (``effect:{service}.{op}#{call_id}``), and each durable write CrewAI makes here:
``SQLiteFlowPersistence.init_db`` (the schema, once per process) and ``save_state``.

crewai cannot be installed beside the other targets without moving them back (it pins older
pydantic, openai, mcp, httpx, rich and aiosqlite), so this target runs in an environment of its
own (``sim.targets.environments``): its zygote, children and state reader run under that venv's
interpreter. This module never imports crewai: ``.flow`` and ``.state`` do, there.

With ``--app MODULE:FACTORY`` the flow is the user's own, unmodified (``sim.targets.crewai.app``):
the factory returns a ``Flow`` class, persisted by ``SQLiteFlowPersistence`` on the point's file,
kicked off with the fixed id and ``--input``; its LLMs answer from ``--model-script`` (optional:
a flow with no model needs none), its effects declared the kit's way (``--effect``,
``--effect-http``, ``--http-stub``); the state read from what ``@persist`` saved
(``sim.targets.crewai.app_state``).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from sim.targets.environments import Environment
from sim.targets.kit.base import TargetBase
from sim.targets.protocol import AppShape, TargetOptions

#: The release the target was built and measured against: the pin of its environment.
CREWAI_PIN = "crewai==1.15.44"
#: The flow's persisted state, in the point's directory, and the flow id every run kicks off.
DB_NAME = "flows.sqlite"
FLOW_ID = "pay-INV-42"
#: What every crewai process of a point finds in its environment, before crewai is imported
#: (``sim.targets.crewai.offline`` sets it in the zygote, ``point_env`` in a child): CrewAI would
#: otherwise reach the network. Its anonymous telemetry starts an OpenTelemetry exporter thread
#: when imported (``CREWAI_DISABLE_TELEMETRY``, ``CREWAI_DISABLE_TRACKING``, ``OTEL_SDK_DISABLED``
#: are all read by ``crewai_core.telemetry``); a flow's start asks PyPI for a newer crewai
#: (``ConsoleFormatter._show_version_update_message_if_needed``); a first execution collects a
#: trace, asks the terminal whether to upload it and writes the answer to the user's data
#: directory (``crewai.execution._start_tracing``, off when ``CREWAI_TRACING_ENABLED`` is false).
OFFLINE_ENV = MappingProxyType(
    {
        "CREWAI_DISABLE_TELEMETRY": "true",
        "CREWAI_DISABLE_TRACKING": "true",
        "OTEL_SDK_DISABLED": "true",
        "CREWAI_DISABLE_VERSION_CHECK": "true",
        "CREWAI_TRACING_ENABLED": "false",
    }
)


def isolated_home(root: Path) -> dict[str, str]:
    """Where a crewai process keeps what it writes in the user's home, under ``root``: importing
    crewai makes ``~/.config/crewai`` (and reads the user's ``settings.json`` there), writes an
    encryption key to ``~/.local/share/crewai/credentials`` and makes a data directory named
    after the working directory (``CREWAI_STORAGE_DIR``, fixed here). A sweep must depend on
    neither the user's files nor the directory it runs from, and must not add to them. The
    zygote's ``root`` is in its venv (``sim.targets.crewai.offline``: what crewai fixes when
    imported), a child's in its point's directory (what it looks up when called)."""
    return {
        "HOME": str(root),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "CREWAI_STORAGE_DIR": "durable-sim",
    }


class CrewAiTarget(TargetBase):
    name = "crewai"
    description = (
        "CrewAI Flow (structured state, scripted BaseLLM, two tools) under "
        "@persist(SQLiteFlowPersistence), restarted by kickoff(inputs={'id': ...})"
    )
    distributions = ("crewai",)
    durabilities = ("persist",)
    savers = ("sqlite",)
    resumes = ("kickoff",)
    environment = Environment(name="crewai", pins=(CREWAI_PIN,))
    child_module = "sim.targets.crewai.flow"
    state_module = "sim.targets.crewai.state"
    app_shape = AppShape(
        names="a factory returning a crewai Flow class, build_flow()",
        takes=frozenset({"--input", "--model-script"}),
        input_kinds=(dict,),
        child_module="sim.targets.crewai.app",
        state_module="sim.targets.crewai.app_state",
    )
    # Forked from the zygote: 0.68-0.75 s a point in the full sweeps. The zygote's import of
    # crewai takes about 6 s more, and the first use makes the venv (about a minute).
    demo_point_s = 0.75

    def point_env(self, options: TargetOptions, point_dir: Path) -> dict[str, str]:
        """CrewAI's switches (``OFFLINE_ENV``) and a home of the point's own (``isolated_home``):
        a child forked from the zygote gets the parent's environment and this, not the
        zygote's, and CrewAI reads them again at each call."""
        del options
        return {**OFFLINE_ENV, **isolated_home(point_dir / "home")}

    def preload(self, options: TargetOptions) -> tuple[str, ...]:
        """The zygote sets CrewAI's switches (``offline``) before it imports the flow's module
        (the bundled flow's, or the app's child and the libraries the app imports)."""
        modules = super().preload(options)
        return (modules[0], "sim.targets.crewai.offline", *modules[1:])


TARGET = CrewAiTarget()
