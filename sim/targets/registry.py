"""The targets the harness knows, by name. Looking one up imports only the harness's side of it
(``sim.targets.<name>``), never the target's library: that is an optional extra."""

from __future__ import annotations

import importlib

from sim.targets.protocol import Target, TargetError

#: name -> the module whose ``TARGET`` object implements ``sim.targets.protocol.Target``.
TARGETS: dict[str, str] = {
    "langgraph": "sim.targets.langgraph",
    "dbos": "sim.targets.dbos",
    "pydantic-ai": "sim.targets.pydantic_ai",
    "python": "sim.targets.python_app",
    "llama-index": "sim.targets.llama_index",
    "agent-framework": "sim.targets.agent_framework",
    "temporal": "sim.targets.temporal",
    "openai-agents": "sim.targets.openai_agents",
    "adk": "sim.targets.adk",
    "crewai": "sim.targets.crewai",
}


def target_names() -> tuple[str, ...]:
    return tuple(TARGETS)


def get_target(name: str) -> Target:
    """The target called ``name``; an unknown name is a one-line ``TargetError``."""
    module = TARGETS.get(name)
    if module is None:
        raise TargetError(f"unknown target {name!r} (known: {', '.join(TARGETS)})")
    target: Target = importlib.import_module(module).TARGET
    return target
