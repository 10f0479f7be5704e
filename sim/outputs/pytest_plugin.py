"""pytest plugin (entry point ``pytest11``): crash sweeps as pytest items, plus options and
fixtures for simulator-driven tests.

Why: a team that already runs pytest in CI should get the simulator's verdicts where it already
looks -- pytest's summary, its ``-m``/``-k`` selection, ``pytest-xdist`` parallelism and its
JUnit XML -- without a second tool and a second report format. The plugin is registered by the
package's ``pytest11`` entry point, so installing ``durable-sim`` is enough: no ``-p durable_sim``
and no ``conftest.py``.

Scenario sweeps as items
------------------------
``pytest --sim-scenarios PATH [--sim-scenarios PATH ...]`` (or ``PATH,PATH``) collects one item
per scenario file (every ``*.json`` under a directory, in sorted order, or a file given directly)
and store: node ids read ``sim/scenarios/read_edit_answer.json::file`` and ``...::sqlite``. Each
item runs ``sim.explore.sweep.sweep`` -- every depth-1 crash schedule, every oracle, I10 included --
and fails if any schedule's verdict is not ``pass``; the failure lists the verdict counts and the
first failing schedules, each with its invariant, explanation, witness and the one-line
``durable-sim replay`` command that reproduces it. Items are independent (one sweep each) and
collected in a fixed order, so ``pytest-xdist`` can spread them over workers. In CI::

    pytest --sim-scenarios sim/scenarios/ -n auto --junitxml=reports/sweep-junit.xml

Which tests run:

- ``--sim-scenarios`` and no positional paths: only the scenario items (``testpaths`` is not
  collected), so the line above runs just the sweeps.
- ``--sim-scenarios`` and positional paths: the scenario items as well as those tests.
- the ini option ``sim_scenarios`` (one path a line, relative to the rootdir): when pytest
  collects its default paths (no positional paths), the scenario items are collected in addition
  to them; with positional paths, only ``*.json`` files inside those paths that lie under a
  configured scenario path become items (so ``pytest tests/test_x.py`` stays quick). The command
  line option, when given, replaces the ini option.

``--sim-stores file,sqlite`` (default ``file,sqlite``; ``both`` is its alias) chooses the
stores, ``--sim-crash process,power,storage`` (default ``process,power,pause``, as ``durable-sim
sweep``'s) the crash kinds, ``--sim-seed N`` the seed: parsed by ``sim.outputs.options``, the
command line's parser, with its defaults. Every item carries the marker ``durable_sim_sweep``
(``-m durable_sim_sweep`` or ``-m "not durable_sim_sweep"``). A path that does not exist, or a
bad option value, is a one-line usage error (exit status 4); a scenario file that does not load
is a one-line collection error naming the file.

Fixtures for your own tests
---------------------------
``--sim-seed N`` (the seed fixtures use; default 0) and ``--sim-replay SPEC`` (a crash schedule in
replay form, e.g. ``14:after:power``, that ``sim_schedule`` returns; validated when pytest
starts). Fixtures: ``sim_seed``, ``sim_schedule``, ``sim_world`` and ``sim_run`` (run a scenario by
name, file path or object under the seed and schedule; a failing test ends with the repro
command, which names a scenario file by its path).

The plugin is loaded into every pytest run of a project that installs durable-sim, so it changes
no other library's settings (no Hypothesis profile, for one) and keeps its per-test state in
pytest's stashes, not on pytest's objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sim.errors import UserError
from sim.judgement.repro import replay_command
from sim.outputs import options as shared
from sim.world.faults import CrashKind, Schedule
from sim.world.scenario import (
    Scenario,
    ScenarioError,
    bundled_names,
    load_scenario,
    load_scenario_file,
)
from sim.world.seeded import World
from sim.world.stores import StoreKind

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from sim.explore.sweep import ScenarioSweep
    from sim.world.scenario import Scenario

MARKER = "durable_sim_sweep"
ITEM_TIMEOUT_S = 4 * 3600  # per sweep item, under pytest-timeout (the longest bundled: ~30 min)
#: The stores the plugin sweeps: those on the simulated disk (a Postgres sweep needs a server,
#: which ``durable-sim sweep --store postgres`` checks for before it starts).
STORES: tuple[StoreKind, ...] = shared.FILE_STORES
COMMAND = "the durable-sim pytest plugin"  # how a refusal of an unsupported store names it
SHOWN_FAILURES = 5


@dataclass(frozen=True)
class SweepOptions:
    """The validated sweep options of one pytest run (kept in ``config.stash``)."""

    roots: tuple[Path, ...]  # resolved scenario files and directories
    stores: tuple[StoreKind, ...]
    crash_kinds: tuple[CrashKind, ...]
    seed: int
    schedule: Schedule  # --sim-replay's, for the fixtures
    invocation_dir: Path

    def claims(self, path: Path) -> bool:
        """Whether ``path`` is a scenario file: a configured file, or a ``*.json`` file under a
        configured directory."""
        resolved = path.resolve()
        for root in self.roots:
            if resolved == root:
                return True
            if path.suffix == ".json" and root.is_dir() and resolved.is_relative_to(root):
                return True
        return False

    def ref(self, path: Path) -> str:
        """How a repro command names the file: its path from where pytest was started (so the
        command works when pasted there), or its absolute path if it lies elsewhere."""
        resolved = path.resolve()
        if resolved.is_relative_to(self.invocation_dir):
            return str(resolved.relative_to(self.invocation_dir))
        return str(resolved)


OPTIONS_KEY = pytest.StashKey[SweepOptions]()
#: The repro command of the last ``sim_run`` of a test, shown when the test fails.
REPRO_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("durable-sim")
    group.addoption(
        "--sim-seed",
        default=str(shared.DEFAULT_SEED),
        metavar="N",
        help=f"seed for simulator fixtures and sweeps, 0..2**64-1 (default {shared.DEFAULT_SEED})",
    )
    group.addoption(
        "--sim-replay",
        default=None,
        help="crash schedule to replay, e.g. '14:after:power,20:before:process'",
    )
    group.addoption(
        "--sim-scenarios",
        action="append",
        default=[],
        metavar="PATH",
        help="collect a crash-sweep item per scenario file (*.json under a directory, or a file) "
        "and store; repeatable or comma-separated. Without positional paths only these run.",
    )
    group.addoption(
        "--sim-stores",
        default=",".join(shared.DEFAULT_STORES),
        metavar="STORES",
        help="stores to sweep each scenario on, comma-separated: "
        + shared.store_help(STORES, shared.DEFAULT_STORES),
    )
    group.addoption(
        "--sim-crash",
        default=",".join(shared.DEFAULT_CRASH_KINDS),
        metavar="KINDS",
        help="crash kinds of the sweeps, comma-separated: process, power, storage (default "
        f"{','.join(shared.DEFAULT_CRASH_KINDS)}, as durable-sim sweep's)",
    )
    parser.addini(
        "sim_scenarios",
        type="linelist",
        default=[],
        help="scenario files or directories (relative to the rootdir) collected as crash-sweep "
        "items in addition to the default test paths",
    )


def _parsed(option: str, parse: Any, value: str, **keywords: Any) -> Any:
    """``value`` parsed by the command line's parser (``sim.outputs.options``); what it refuses
    is a one-line usage error naming the option."""
    try:
        return parse(value, **keywords)
    except UserError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


def _scenario_paths(option: str, values: list[str], base: Path) -> list[Path]:
    """Split comma-separated path values and check each exists (and, for a directory, holds a
    scenario): a typo must stop the run, not silently collect nothing."""
    found: list[Path] = []
    for value in values:
        for part in value.split(","):
            given = part.strip()
            if not given:
                raise pytest.UsageError(f"{option}: empty path in {value!r}")
            path = (base / given).resolve()
            if not path.exists():
                raise pytest.UsageError(f"{option}: no such file or directory: {given}")
            if path.is_dir() and not any(path.rglob("*.json")):
                raise pytest.UsageError(f"{option}: no *.json scenario files under {given}")
            found.append(path)
    return found


def pytest_configure(config: pytest.Config) -> None:
    """Validate every durable-sim option before anything runs (a bad value is one line and exit
    status 4, not a traceback in every test), and point collection at the scenario paths."""
    config.addinivalue_line(
        "markers", f"{MARKER}: a durable-sim crash sweep of one scenario file on one store"
    )
    spec = config.getoption("--sim-replay")
    schedule = Schedule() if spec is None else _parsed("--sim-replay", shared.schedule, spec)
    seed = _parsed("--sim-seed", shared.seed, config.getoption("--sim-seed"))
    stores = _parsed(
        "--sim-stores",
        shared.stores,
        config.getoption("--sim-stores"),
        command=COMMAND,
        supported=STORES,
    )
    kinds = _parsed("--sim-crash", shared.crash_kinds, config.getoption("--sim-crash"))

    invocation_dir = config.invocation_params.dir.resolve()
    cli = _scenario_paths("--sim-scenarios", config.getoption("--sim-scenarios"), invocation_dir)
    ini = (
        []
        if cli
        else _scenario_paths("sim_scenarios", config.getini("sim_scenarios"), config.rootpath)
    )
    chosen = cli or ini
    config.stash[OPTIONS_KEY] = SweepOptions(
        roots=tuple(chosen),
        stores=stores,
        crash_kinds=kinds,
        seed=seed,
        schedule=schedule,
        invocation_dir=invocation_dir,
    )
    if not chosen:
        return
    # Collection starts from config.args. Every xdist worker re-parses the same command line and
    # runs this same code, so workers and controller collect the same items in the same order.
    # pytest drops duplicate and overlapping arguments itself, and names items relative to the
    # rootdir whatever form their argument had.
    from_defaults = config.args_source != pytest.Config.ArgsSource.ARGS
    if cli and from_defaults:
        config.args = [str(path) for path in cli]
    elif cli or from_defaults:
        config.args = [*config.args, *(str(path) for path in chosen)]


def pytest_report_header(config: pytest.Config) -> str | None:
    options = config.stash.get(OPTIONS_KEY, None)
    if options is None or not options.roots:
        return None
    return (
        f"durable-sim sweeps: stores {','.join(options.stores)}, crash "
        f"{','.join(options.crash_kinds)}, seed {options.seed}"
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    options = parent.config.stash.get(OPTIONS_KEY, None)
    if options is None or not options.claims(file_path):
        return None
    return ScenarioFile.from_parent(parent, path=file_path)


class ScenarioFile(pytest.File):
    """One scenario file: an item per selected store."""

    def collect(self) -> Iterator[SweepItem]:
        options = self.config.stash[OPTIONS_KEY]
        try:
            scenario = load_scenario_file(self.path)
        except ScenarioError as exc:
            # CollectError is shown as its message alone: one line naming the file and problem.
            raise self.CollectError(str(exc)) from exc
        for store in options.stores:
            # The name as plain text: pytest-xdist sends an item's keywords (its name among them)
            # through execnet, which serializes built-in types only, not a str subclass.
            item = SweepItem.from_parent(self, name=store.value, scenario=scenario, store=store)
            item.add_marker(MARKER)
            # A whole sweep is not a unit test: a suite-wide pytest-timeout (this repository's
            # is 15 min) would cut long scenarios off. Its own bound replaces it; the sweep also
            # bounds every forked child (see sim.explore.forking).
            if item.config.pluginmanager.hasplugin("timeout"):
                item.add_marker(pytest.mark.timeout(ITEM_TIMEOUT_S))
            yield item


class SweepFailed(Exception):
    """A sweep with at least one schedule whose verdict is not ``pass``."""

    def __init__(self, result: ScenarioSweep) -> None:
        super().__init__(f"{result.name}: {len(result.failures)} failing schedules")
        self.result = result


class SweepItem(pytest.Item):
    """The depth-1 crash sweep of one scenario on one store."""

    def __init__(self, *, scenario: Scenario, store: StoreKind, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.store = store
        options = self.config.stash[OPTIONS_KEY]
        self.seed = options.seed
        self.crash_kinds = options.crash_kinds
        self.ref = options.ref(self.path)
        # pytest-trio's trio_mode reads ``item.obj`` of every collected item (it assumes they
        # are all functions); a plain, synchronous callable makes it leave this item alone.
        self.obj = self.runtest

    def runtest(self) -> None:
        # pytest loads this plugin in every session: sim's modules only when a test uses them
        from sim.explore.sweep import SweepPlan, sweep

        plan = SweepPlan(
            scenario=self.scenario,
            store=self.store,
            seed=self.seed,
            crash_kinds=self.crash_kinds,
            ref=self.ref,
        )
        result = sweep(plan, jobs=_jobs_per_item())
        # Shown in the JUnit XML as <properties> of the test case.
        self.user_properties.append(("schedules", result.schedules))
        self.user_properties.append(("verdicts", result.verdict_counts()))
        self.user_properties.append(("boundaries", result.reference.boundaries))
        if result.failures:
            raise SweepFailed(result)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        """A failed sweep reads as a report, not a traceback into the harness; anything else (a
        harness error) keeps pytest's usual traceback, which is what one needs to debug it."""
        if isinstance(excinfo.value, SweepFailed):
            return failure_report(excinfo.value.result)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"durable-sim sweep {self.ref} [{self.store}]"


def _jobs_per_item() -> int | None:
    """Forked children per sweep: under pytest-xdist the workers already share the cores, so
    each sweep forks one child at a time (the default, one per core, would oversubscribe)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None:
        return None
    cores = os.cpu_count() or 1
    return max(1, cores // max(1, int(workers)))


def failure_report(result: ScenarioSweep) -> str:
    """The failure message of a sweep item: the counts, then the first failures each with the
    command that replays it."""
    kinds = ",".join(result.crash_kinds)
    lines = [
        f"durable-sim sweep of {result.ref} on the {result.store} store (seed {result.seed}, "
        f"crash {kinds}): {len(result.failures)} of {result.schedules} schedules failed",
        f"verdicts: {result.verdict_counts()}",
    ]
    if result.store == "postgres" and (
        result.expansion.skipped_power or result.expansion.skipped_storage
    ):
        lines.append(
            "(only process kills are run on the postgres store: the server is not crashed)"
        )
    elif result.expansion.skipped_power or result.expansion.skipped_storage:
        lines.append(f"({result.store}: some crash kinds asked for are not simulated there)")
    for failure in result.failures[:SHOWN_FAILURES]:
        lines.append("")
        lines.append(f"{failure.invariant} {failure.verdict} at schedule {failure.schedule}")
        if failure.explanation:
            lines.append(f"  {failure.explanation}")
        lines.extend(f"    {line}" for line in failure.witness)
        lines.append(f"  repro: {failure.repro}")
    hidden = len(result.failures) - SHOWN_FAILURES
    if hidden > 0:
        lines.append("")
        lines.append(f"... and {hidden} more")
    return "\n".join(lines)


@pytest.fixture
def sim_seed(request: pytest.FixtureRequest) -> int:
    return request.config.stash[OPTIONS_KEY].seed


@pytest.fixture
def sim_schedule(request: pytest.FixtureRequest) -> Schedule:
    return request.config.stash[OPTIONS_KEY].schedule


@pytest.fixture
def sim_world(sim_seed: int) -> Any:
    """A seeded ``sim.world.seeded.World`` (RNG streams, ids, trace) for tests of your own parts."""

    return World(sim_seed)


@pytest.fixture
def sim_run(
    request: pytest.FixtureRequest, sim_seed: int, sim_schedule: Schedule
) -> Callable[..., Any]:
    """``sim_run("read_edit_answer", store="file")`` runs a scenario -- a bundled name, a file's
    path, or a ``Scenario`` -- under the session's seed and schedule and returns the
    ``RunResult``; a failing test then ends with the repro command of the last run."""
    # pytest loads this plugin in every session: sim's modules only when a test uses them
    from sim.run.runner import run_scenario

    options = request.config.stash[OPTIONS_KEY]

    def run(
        scenario: str | os.PathLike[str] | Scenario,
        *,
        store: StoreKind | str = StoreKind.FILE,
        schedule: Schedule | None = None,
    ) -> Any:
        loaded, ref = _scenario_and_ref(scenario, options)
        chosen = schedule if schedule is not None else sim_schedule
        if ref is None:
            request.node.stash[REPRO_KEY] = (
                f"no durable-sim replay line: the scenario {loaded.name!r} was given as an object "
                f"that is not a bundled scenario; give sim_run its file's path to get one "
                f"(seed {sim_seed}, store {store}, schedule {chosen.text()})"
            )
        else:
            request.node.stash[REPRO_KEY] = replay_command(
                ref, seed=sim_seed, store=store, schedule=chosen.text()
            )
        return run_scenario(loaded, seed=sim_seed, store=store, schedule=chosen)

    return run


def _scenario_and_ref(
    scenario: str | os.PathLike[str] | Scenario, options: SweepOptions
) -> tuple[Scenario, str | None]:
    """The scenario ``sim_run`` was given, and how ``durable-sim replay --scenario`` names it: a
    bundled name as is, a file by its path (a name would be an unknown scenario to replay), an
    object by its name only if it is that bundled scenario (None: it cannot be named)."""
    if isinstance(scenario, Scenario):
        bundled = scenario.name in bundled_names() and load_scenario(scenario.name) == scenario
        return scenario, scenario.name if bundled else None
    if isinstance(scenario, str):
        return load_scenario(scenario), scenario
    path = Path(scenario)
    return load_scenario_file(path), options.ref(path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    repro = item.stash.get(REPRO_KEY, None)
    if report.failed and repro:
        report.sections.append(("durable-sim repro", repro))
    return report
