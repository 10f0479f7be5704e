"""``TargetBase``: what every target shares, so an adapter declares only what differs.

A target is a handful of class attributes (its name, extra, modes) and two modules: one that
runs its bundled agent in a child and reads that agent's state, and -- for a target that takes
a user's app -- one pair that does the same for an app (``AppShape``). Everything else is here,
once: the extra's check, the defaults of the hooks, the dispatch between bundled and app mode,
and the tools the judge holds (the payment agent's, or the app's declared effects).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from pathlib import Path

from sim.targets.environments import Environment
from sim.targets.kit.preload import app_preload
from sim.targets.protocol import (
    PAYMENT_AGENT_TOOLS,
    AppShape,
    BundleMaker,
    ChildContext,
    Demo,
    TargetError,
    TargetOptions,
    TargetState,
    TargetTool,
    missing_extra,
)

#: Where the payment agent of every bundled target shows its finding: right after the charge
#: landed, before the runtime recorded it.
AFTER_THE_CHARGE = (("effect:payments.charge", "after"),)


class TargetBase:
    """The defaults of ``sim.targets.protocol.Target`` (see the module docstring)."""

    name: str
    description: str
    extra: str = ""
    distributions: tuple[str, ...] = ()
    durabilities: tuple[str, ...]
    variants: tuple[str, ...] = ("as_is", "idempotent")
    savers: tuple[str, ...]
    resumes: tuple[str, ...]
    required: tuple[str, ...] = ()  # the modules the extra installs (checked, never imported)
    child_module: str = ""  # the bundled agent's: has ``run_child(ctx)``
    state_module: str = ""  # has ``read_state(point_dir, options)``
    app_shape: AppShape | None = None
    #: Seconds one point of the bundled agent takes, roughly, on the 2-core machine
    #: (``Demo.point_s``): what the default demo says.
    demo_point_s: float = 5.0
    #: The worked finding (``Demo``); None: the payment agent's, charged twice right after the
    #: charge as is and clean with ``--variant idempotent``, in the default modes.
    demo_finding: Demo | None = None
    #: Durabilities that run on an engine of their own, which ``durable-sim bench --targets``
    #: times besides the demo's (its as-is variant on each).
    timed_durabilities: tuple[str, ...] = ()
    #: Why ``--recovery-only`` cannot start its points from snapshots of the point's directory
    #: (``sim.targets.recovery_only``); None: it can. Said after the target's name.
    snapshot_refusal: str | None = "has not been shown to keep all its state in the point's files"
    #: An environment of its own (``sim.targets.environments``): its children and its state
    #: reader run under that venv's interpreter; None: under this one, its library an extra.
    environment: Environment | None = None

    def missing(self) -> str | None:
        return missing_extra(self.name, self.required, self.extra) if self.required else None

    def validate(self, options: TargetOptions) -> TargetOptions:
        return options

    def service(self, options: TargetOptions) -> contextlib.AbstractContextManager[object]:
        del options
        return contextlib.nullcontext()

    def point_env(self, options: TargetOptions, point_dir: Path) -> dict[str, str]:
        del options, point_dir
        return {}

    def preload(self, options: TargetOptions) -> tuple[str, ...]:
        """The harness's child, the module that runs this run (which imports the framework) and,
        for an app, the libraries its file imports (``app_preload``)."""
        modules = ("sim.targets.child", self._module(options, child=True))
        if options.app is None:
            return modules
        return (*modules, *app_preload(options.app))

    def no_snapshots(self, options: TargetOptions) -> str | None:
        """``snapshot_refusal``: a target declares what it is (None: its durable state is the
        point's files, written from the run's own thread)."""
        del options
        return None if self.snapshot_refusal is None else f"{self.name} {self.snapshot_refusal}"

    def tools(self, options: TargetOptions) -> tuple[TargetTool, ...]:
        return options.app.tools() if options.app is not None else PAYMENT_AGENT_TOOLS

    def run_child(self, ctx: ChildContext) -> str:
        action: str = importlib.import_module(self._module(ctx.options, child=True)).run_child(ctx)
        return action

    def read_state(self, point_dir: Path, options: TargetOptions) -> TargetState:
        module = importlib.import_module(self._module(options, child=False))
        state: TargetState = module.read_state(point_dir, options)
        return state

    def demo(self) -> Demo:
        if self.demo_finding is not None:
            return self.demo_finding
        return Demo(
            as_is=TargetOptions(),
            fixed=TargetOptions(variant="idempotent"),
            points=AFTER_THE_CHARGE,
            point_s=self.demo_point_s,
        )

    def bundle(self, options: TargetOptions) -> BundleMaker:
        """The ``bundle`` module next to the target's code (``sim.targets.<name>.bundle``, which
        imports no framework: it fills in templates) makes its repro bundles; a target without
        one is refused in one line."""
        module = f"{type(self).__module__}.bundle"
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # the target's class is in a module, not a package
            found = False
        if not found:
            raise TargetError(f"{self.name}: no repro bundle yet")
        maker: BundleMaker = importlib.import_module(module).bundler(self, options)
        return maker

    def _module(self, options: TargetOptions, *, child: bool) -> str:
        """The module that runs (``child``) or reads the run: the app's or the bundled agent's."""
        if options.app is not None:
            assert self.app_shape is not None, "check_options refuses an app this target lacks"
            return self.app_shape.child_module if child else self.app_shape.state_module
        return self.child_module if child else self.state_module
