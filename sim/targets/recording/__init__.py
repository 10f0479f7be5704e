"""``durable-sim target record``: run a user's app once with its own model and save what the
model answered as a ``--model-script``, so every later sweep is offline and deterministic.

A sweep never reaches a model provider (``sim.targets.offline``): the model's turns come from a
script. Writing one by hand is fine for a small agent; for a real one, the turns a real model
gives are the ones worth crash-testing. ``record`` runs the app's factory *without* the scripted
model (so it builds the model it uses in production), fault-free, in a child process that may use
the network, captures every response of the framework's chat model -- its text and tool calls,
the script's format -- and writes them to ``--out``. The effect functions are not wrapped: the
run is the app's own, so its service clients must point at stubs or a sandbox, as in any test.

Frameworks: ``langgraph`` (each ``BaseChatModel`` call) and ``pydantic-ai`` (the agent's model
wrapped in a recording ``WrapperModel``). A factory that needs a model argument gets none: give it
a default that builds the real model (``def build_graph(model=None)``).

This module only runs the child and checks its result; the child is
``sim.targets.recording.child``, which imports the framework.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sim.targets.kit.spec import AppArgs, parse_app
from sim.targets.protocol import TargetError
from sim.targets.shapes import ScriptTurn

#: The frameworks ``record`` knows how to listen to.
FRAMEWORKS = ("langgraph", "pydantic-ai")
#: Wall seconds the recording run may take (a real model answers in seconds per turn).
MAX_RECORD_S = 600.0
#: Turns a recording keeps at most (a longer run is a loop, not a script).
MAX_TURNS = 200


def record_script(
    target: str, *, app: str, app_input: str, out: Path, timeout_s: float = MAX_RECORD_S
) -> list[ScriptTurn]:
    """Run ``app`` once with its own model and write the model's turns to ``out``; returns
    them. Bad input or a run that fails is a one-line ``TargetError``."""
    if target not in FRAMEWORKS:
        raise TargetError(
            f"target record: {target!r} has no model to record (one of {', '.join(FRAMEWORKS)})"
        )
    spec = parse_app(target, AppArgs(app=app, input=app_input))
    if spec.input is None or not isinstance(spec.input.value, str | dict):
        raise TargetError(
            f"{target}: --input FILE.json: the user's message (a JSON string) or the graph's input"
        )
    if out.exists():
        raise TargetError(f"target record: {out} exists; record never overwrites a script")
    with tempfile.TemporaryDirectory(prefix="durable-sim-record-") as work:
        result = Path(work) / "script.json"
        spec_file = Path(work) / "app.json"
        spec_file.write_text(json.dumps(spec.to_json()), encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "sim.targets.recording.child",
            target,
            str(spec_file),
            str(result),
        ]
        try:
            done = subprocess.run(command, capture_output=True, timeout=timeout_s, cwd=work)
        except subprocess.TimeoutExpired as exc:
            raise TargetError(
                f"target record: the app did not finish within {timeout_s:g} s"
            ) from exc
        if done.returncode != 0:
            lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise TargetError(
                f"target record: {lines[-1] if lines else f'status {done.returncode}'}"
            )
        turns = json.loads(result.read_text(encoding="utf-8"))
    if not turns:
        raise TargetError("target record: the app's model was never called")
    if len(turns) > MAX_TURNS:
        raise TargetError(f"target record: {len(turns)} model turns, more than {MAX_TURNS}")
    out.write_text(json.dumps(turns, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return list(turns)
