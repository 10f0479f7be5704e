"""A user's own CrewAI flow (``--app MODULE:FACTORY``), crash-tested as the bundled flow is.

The factory is the user's code, unmodified, called with no argument. It returns a ``Flow``
subclass -- the class, not an instance: CrewAI's restart is a new instance's
``kickoff(inputs={"id": ...})`` over the saved state, and the harness makes one per process as a
restarted service would. An instance, or anything else, is refused in one line naming it.

Persistence is CrewAI's ``SQLiteFlowPersistence`` on the point's file (``DB_NAME``): every one
the child makes is redirected there (its ``__init__``, replaced before the app is imported), so
a flow's ``@persist(SQLiteFlowPersistence("orders.db"))`` or ``@persist()`` (whose default file
is in the user's data directory) saves to the point, never to the user's files. A flow with no
``@persist`` anywhere gets the class-level one (CrewAI's metadata stamp, before its definition
is built); a ``@persist`` with another ``FlowPersistence`` is refused in one line: the harness
reads and restarts only what SQLite holds. Each process kicks off the fixed id ``APP_FLOW_ID``
with ``--input`` (a JSON object, optional) as the rest of the inputs.

The model: ``crewai.LLM(...)`` made anywhere in the child (its ``__new__`` is replaced before the
app is imported) is a ``ScriptedLLM``, and every other ``BaseLLM`` subclass's ``call`` and
``acall`` (CrewAI's native providers, a user's own) answer from the script too, so no request
leaves the process. A call's turn is the number of assistant messages in what it is given (a
string prompt: the first turn), so a method run again after a restart gets the turn a real
model would; ``scripted_turn`` answers it. A turn's tool calls are run when the caller gives
their functions (``available_functions``, as CrewAI's providers do: the first call's result),
else returned as OpenAI-style tool calls. ``--model-script`` is optional: a flow that never
calls a model needs none, and one that does without a script is one line.

Effects are the kit's (``sim.targets.kit.loading.load_app``). Each flow method runs inside
``running_tool`` named after the method, so an effect carries the method that made it, and a
method that lands none is listed as undeclared. Boundaries: ``model.call#n``, each effect, each
``persistence.save_state#n``. The flow opts out of CrewAI's automatic memory (its class's
``_skip_auto_memory``): that store lives in the user's data directory, outside the point, and
would carry one point's writes into the next; a flow given its own ``memory`` keeps it.

Imports crewai at module level: import this module only in a child process, under the target's
own environment (``sim.targets.crewai``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from crewai import LLM
from crewai.flow.flow import Flow
from crewai.flow.persistence import SQLiteFlowPersistence, persist
from crewai.llms.base_llm import BaseLLM

from sim.targets.boundaries import wrap_method
from sim.targets.crewai import DB_NAME
from sim.targets.crewai.app_state import APP_FLOW_ID, APP_NOTE
from sim.targets.kit.declarations import AppError
from sim.targets.kit.landing import running_tool
from sim.targets.kit.loading import call_factory, load_app
from sim.targets.kit.scripted import scripted_turn
from sim.targets.protocol import ChildContext
from sim.targets.shapes import Json

#: The attribute ``@persist`` stamps on a class or a method (CrewAI's metadata).
PERSIST_ATTR = "__flow_persistence_config__"


class Script:
    """The process's model: the user's turns, the calls answered so far (for tool call ids),
    and the boundaries each call crosses. One per process, shared by every LLM of the flow."""

    def __init__(self, ctx: ChildContext, turns: list[dict[str, Json]] | None) -> None:
        self.ctx = ctx
        self.turns = turns
        self.calls = 0

    def answer(self, messages: object, tools: object, functions: dict[str, Any] | None) -> object:
        """One call of an LLM of the flow, answered inside ``model.call#n``."""
        if self.turns is None:
            spec = self.ctx.options.app
            entry = spec.entry if spec is not None else "?"
            raise AppError(
                f"--app {entry}: the flow called an LLM; give --model-script with its turns"
            )
        said = messages if isinstance(messages, list) else [{"role": "user", "content": messages}]
        turn = sum(isinstance(m, dict) and m.get("role") == "assistant" for m in said)
        names = {*_tool_names(tools), *(functions or {})}
        self.calls += 1
        boundaries = self.ctx.boundaries
        return boundaries.crossing(
            boundaries.numbered("model.call"),
            lambda: self._reply(turn, names, functions or {}),
            turn=turn,
        )

    def _reply(self, turn: int, names: set[str], functions: dict[str, Any]) -> object:
        assert self.turns is not None, "checked by answer"
        text, calls = scripted_turn(self.turns, turn, names)
        if not calls:
            return text
        if calls[0].name in functions:  # a provider given the functions runs the first call
            return functions[calls[0].name](**calls[0].args)
        return [
            {
                "id": f"call_{self.ctx.process}_{self.calls}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args)},
            }
            for i, call in enumerate(calls)
        ]


def _tool_names(tools: object) -> list[str]:
    """The names of OpenAI-style tool schemas (``{"function": {"name": ...}}``) or bare ones."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            named = tool.get("function", tool)
            if isinstance(named, dict) and isinstance(named.get("name"), str):
                names.append(named["name"])
    return names


_SCRIPT: Script | None = None  # the process's model, set by run_child before the app imports


def _script() -> Script:
    if _SCRIPT is None:
        raise RuntimeError("the scripted model runs only inside a target child")
    return _SCRIPT


def _call(self: object, messages: object, tools: object = None, *args: Any, **kwargs: Any) -> Any:
    """Every LLM's ``call``: the script's answer (``available_functions`` by keyword or place)."""
    del self
    functions = kwargs.get("available_functions", args[1] if len(args) > 1 else None)
    return _script().answer(messages, tools, functions)


async def _acall(
    self: object, messages: object, tools: object = None, *args: Any, **kwargs: Any
) -> Any:
    return _call(self, messages, tools, *args, **kwargs)


class ScriptedLLM(BaseLLM):
    """What ``crewai.LLM(...)`` makes in a child: a ``BaseLLM`` answering from the script."""

    def call(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
        return _call(self, messages, tools, *args, **kwargs)

    async def acall(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
        return _call(self, messages, tools, *args, **kwargs)


def _new_llm(cls: type, model: str = "scripted", *args: Any, **kwargs: Any) -> ScriptedLLM:
    """``LLM.__new__``: a ``ScriptedLLM`` named after the model asked for (no provider, no key;
    not an ``LLM``, so Python calls no ``LLM.__init__`` on it)."""
    del cls, args, kwargs
    return ScriptedLLM(model=str(model))


def swap_models() -> None:
    """Every LLM the flow can make or hold answers from the script: ``LLM(...)`` makes a
    ``ScriptedLLM``, and every ``BaseLLM`` subclass defined by now calls the script."""
    setattr(LLM, "__new__", staticmethod(_new_llm))  # noqa: B010  (a class's __new__ slot)
    todo: list[type] = [BaseLLM]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls is not BaseLLM and cls is not ScriptedLLM:
            cls.call = _call  # type: ignore[attr-defined]  # a BaseLLM subclass, typed as type
            cls.acall = _acall  # type: ignore[attr-defined]  # likewise


def redirect_persistence(path: Path) -> None:
    """Every ``SQLiteFlowPersistence`` made in this process saves to ``path``, whatever file it
    was given (the module docstring says why)."""
    original = SQLiteFlowPersistence.__init__

    def init(self: Any, db_path: str | None = None, /, **kwargs: Any) -> None:
        del db_path
        kwargs.pop("db_path", None)
        original(self, str(path), **kwargs)

    SQLiteFlowPersistence.__init__ = init


def flow_class(entry: str, made: object) -> type:
    """What the factory returned as the ``Flow`` class each process instantiates, persisted on
    SQLite (the module docstring says how); anything else refused, naming what it is."""
    if isinstance(made, Flow):
        raise AppError(
            f"--app {entry}: returned a {type(made).__name__} instance; return its class (a "
            "restart is a new instance's kickoff, made by the harness in each process)"
        )
    if not (isinstance(made, type) and issubclass(made, Flow)):
        raise AppError(f"--app {entry}: returned a {type(made).__name__}, not a crewai Flow class")
    stamped = [getattr(made, PERSIST_ATTR, None)] + [
        getattr(value, PERSIST_ATTR, None) for cls in made.__mro__ for value in vars(cls).values()
    ]
    configs = [config for config in stamped if config is not None]
    for config in configs:
        if not isinstance(config.persistence, SQLiteFlowPersistence):
            raise AppError(
                f"--app {entry}: its @persist saves to a {type(config.persistence).__name__}; "
                "the harness restarts flows persisted by SQLiteFlowPersistence (or none)"
            )
    if not configs:
        persist(SQLiteFlowPersistence())(made)
        made._flow_definition = None  # type: ignore[attr-defined]  # rebuilt with the stamp
    # CrewAI creates its memory only when the flow has none: a flow given its own keeps it.
    made._skip_auto_memory = True  # type: ignore[attr-defined]  # CrewAI reads it by getattr
    return made


def build_flow(ctx: ChildContext) -> type:
    """The user's flow class, its effects on the ledger, its LLMs on the script."""
    spec = ctx.options.app
    assert spec is not None, "an app child runs only with --app"
    _, factory = load_app(ctx)
    made = call_factory(
        spec.entry,
        factory,
        why_no_argument="the harness gives every LLM of the flow its scripted model",
    )
    cls = flow_class(spec.entry, made)
    swap_models()  # again: the user's own BaseLLM subclasses exist now
    return cls


def wrap_methods(ctx: ChildContext) -> None:
    """Each flow method runs inside ``running_tool``: the caller of the effects it lands.
    CrewAI 1.15.44 runs every method through ``Flow._execute_method`` (private: the target's pin
    is exact), a sync one on a thread that copies the context, so the caller reaches it."""
    original = Flow._execute_method

    async def execute(self: Any, method_name: Any, method: Any, *args: Any, **kwargs: Any) -> Any:
        with running_tool(ctx, str(method_name)):
            return await original(self, method_name, method, *args, **kwargs)

    Flow._execute_method = execute


def _describe_save(self: Any, flow_uuid: str, method_name: str, state_data: Any) -> str:
    del self, flow_uuid, state_data
    return f"after {method_name}"


def run_child(ctx: ChildContext) -> str:
    """Kick the user's flow off, or off again over its saved state, to its end. An
    ``AppError`` out of the run is raised again bare: the child reports an exception's last
    line, which CrewAI's wrapping would otherwise be."""
    global _SCRIPT
    spec = ctx.options.app
    assert spec is not None, "an app child runs only with --app"
    # CrewAI locks the database through a file in the temp directory: the point's keeps it.
    tempfile.tempdir = str(ctx.point_dir)
    redirect_persistence(ctx.point_dir / DB_NAME)
    wrap_method(
        SQLiteFlowPersistence,
        "save_state",
        ctx.boundaries,
        "persistence.save_state",
        _describe_save,
    )
    _SCRIPT = Script(ctx, spec.turns() if spec.model_script is not None else None)
    swap_models()
    wrap_methods(ctx)
    cls = build_flow(ctx)
    saved = SQLiteFlowPersistence().load_state(APP_FLOW_ID)
    given = spec.input.value if spec.input is not None else {}
    inputs = {**(given if isinstance(given, dict) else {}), "id": APP_FLOW_ID}
    try:
        cls().kickoff(inputs=inputs)
    except AppError as exc:
        raise AppError(str(exc)) from None
    ctx.boundaries.note(what=APP_NOTE)
    return "resume" if saved is not None else "start"
