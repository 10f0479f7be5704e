"""Running the reach measurement: a fresh interpreter that starts coverage.py before ``durable``
is imported, sweeps (forking a child per crash point, each saving its own arcs) and fuzzes, or
replays a reach corpus, and hands back the arcs and the corpus candidates (``Raw``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from hypothesis.configuration import set_hypothesis_home_dir

from sim.errors import UserError
from sim.explore.progress import Progress
from sim.explore.reach.regions import (
    Arc,
    ReachError,
    durable_dir,
    package_dir,
    region_filter,
    relative_source,
)
from sim.world.faults import CrashPoint, Schedule, parse_schedule

if TYPE_CHECKING:  # names for annotations only: coverage.py and durable load inside the child
    from coverage import Coverage

    from sim.explore.fuzz import Finding
    from sim.explore.recording import ScenarioSweep
    from sim.world.scenario import Scenario

CORPUS_SCHEMA_VERSION = 1
REGENERATE = "durable-sim coverage --write-corpus tests/reach_corpus.json"


class ReachUnavailable(UserError):
    """coverage.py is not installed: the one-line error of ``durable-sim coverage``."""


def require_coverage() -> None:
    """Raise ``ReachUnavailable`` unless coverage.py can be imported."""
    try:
        # whether the reach extra (coverage.py) is installed: the import is the check
        import coverage  # noqa: F401
    except ImportError as exc:
        raise ReachUnavailable(
            "coverage.py is not installed (it is the reach extra: pip install -e '.[reach]')"
        ) from exc


# -- what the measurement covers -----------------------------------------------------------------


class OptionsDoc(TypedDict):
    """``Options`` as it crosses to the measuring interpreter (its first argument)."""

    scenarios: list[str]
    stores: list[str]
    crash_kinds: list[str]
    fuzz_examples: int
    seed: int
    corpus: str | None
    quiet: bool


class CaseRun(TypedDict):
    """One run a corpus case replays: its schedule's text, whether the scenario's own faults
    are left out, and the boundary label each crash point was chosen at."""

    schedule: str
    fault_free: bool
    labels: list[str]


class SweepFigures(TypedDict):
    """One measured sweep, as the report's ``measurement`` lists it."""

    scenario: str
    store: str
    schedules: int
    measured_children: int
    verdicts: dict[str, int]


class CaseDoc(TypedDict):
    """A corpus candidate as the measuring interpreter hands it back."""

    scenario: str
    store: str
    runs: list[CaseRun]
    arcs: dict[str, list[list[int]]]
    cost: int


class RawDoc(TypedDict):
    """``Raw`` as the measuring interpreter writes it (its output file)."""

    arcs: dict[str, list[list[int]]]
    fuzz_arcs: dict[str, list[list[int]]]
    cases: list[CaseDoc]
    sweeps: list[SweepFigures]
    notes: list[str]
    wall_s: float


@dataclass(frozen=True, kw_only=True)
class Options:
    """What to run under coverage: a sweep (narrowed by scenarios and stores) plus the fuzzer, or
    the cases of a reach corpus."""

    scenarios: tuple[str, ...] = ()  # () = every bundled scenario
    stores: tuple[str, ...] = ("file", "sqlite")
    crash_kinds: tuple[str, ...] = ("process", "power")  # the default sweep's
    fuzz_examples: int = 300  # 0 = no fuzzing
    seed: int = 0
    corpus: str | None = None  # replay this corpus instead of sweeping
    quiet: bool = False

    def to_json(self) -> OptionsDoc:
        return {
            "scenarios": list(self.scenarios),
            "stores": list(self.stores),
            "crash_kinds": list(self.crash_kinds),
            "fuzz_examples": self.fuzz_examples,
            "seed": self.seed,
            "corpus": self.corpus,
            "quiet": self.quiet,
        }

    @classmethod
    def from_json(cls, doc: OptionsDoc) -> Options:
        return cls(
            scenarios=tuple(doc["scenarios"]),
            stores=tuple(doc["stores"]),
            crash_kinds=tuple(doc["crash_kinds"]),
            fuzz_examples=int(doc["fuzz_examples"]),
            seed=int(doc["seed"]),
            corpus=doc["corpus"],
            quiet=bool(doc["quiet"]),
        )


@dataclass
class Case:
    """Runs that a corpus can replay, and the region arcs only they are credited with. One run
    for a crash schedule; the fault-free runs of a sweep (and its base crash) for its ``P``."""

    scenario: str
    store: str
    runs: list[CaseRun]
    arcs: set[Arc] = field(default_factory=set)
    cost: int = 0  # boundaries its runs pass: the corpus prefers cheap cases among equals


@dataclass
class Raw:
    """What the measuring interpreter hands back: every arc executed, and the corpus candidates."""

    arcs: set[Arc] = field(default_factory=set)
    cases: list[Case] = field(default_factory=list)
    fuzz_arcs: set[Arc] = field(default_factory=set)
    sweeps: list[SweepFigures] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def to_json(self) -> RawDoc:
        return {
            "arcs": _arcs_json(self.arcs),
            "fuzz_arcs": _arcs_json(self.fuzz_arcs),
            "cases": [
                {
                    "scenario": c.scenario,
                    "store": c.store,
                    "runs": c.runs,
                    "arcs": _arcs_json(c.arcs),
                    "cost": c.cost,
                }
                for c in self.cases
            ],
            "sweeps": self.sweeps,
            "notes": self.notes,
            "wall_s": round(self.wall_s, 3),
        }

    @classmethod
    def from_json(cls, doc: RawDoc) -> Raw:
        return cls(
            arcs=_arcs_from(doc["arcs"]),
            fuzz_arcs=_arcs_from(doc["fuzz_arcs"]),
            cases=[
                Case(c["scenario"], c["store"], c["runs"], _arcs_from(c["arcs"]), c.get("cost", 0))
                for c in doc["cases"]
            ],
            sweeps=doc["sweeps"],
            notes=doc["notes"],
            wall_s=doc["wall_s"],
        )


def _arcs_json(arcs: Iterable[Arc]) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {}
    for path, a, b in sorted(arcs):
        out.setdefault(path, []).append([a, b])
    return out


def _arcs_from(doc: dict[str, list[list[int]]]) -> set[Arc]:
    return {(path, a, b) for path, pairs in doc.items() for a, b in pairs}


# -- the child hook (called by sim.explore.forking in a forked child) ------------------------------

#: Set by the measuring interpreter around each sweep; a forked child inherits it. None in every
#: ordinary run, so the hook costs one global read there.
_SINK: str | None = None


def save_child_coverage(schedule: str) -> None:
    """In a forked sweep child about to ``os._exit``: save what coverage recorded, labelled with
    the child's schedule. Does nothing unless a reach measurement is running. Never raises: the
    child must exit whatever happens here (a missing file is counted by the measurement)."""
    sink = _SINK
    if sink is None:
        return
    try:
        # coverage.py (the reach extra): only `durable-sim coverage` needs it
        import coverage

        cov = coverage.Coverage.current()
        if cov is None:
            return
        cov.stop()
        doc = {"schedule": schedule, "arcs": _arcs_json(_harvest(cov))}
        path = os.path.join(sink, f"child-{os.getpid()}.json")
        with open(f"{path}.tmp", "w", encoding="utf-8") as out:
            json.dump(doc, out)
        os.replace(f"{path}.tmp", path)
    except BaseException:  # see the docstring: the child must reach os._exit
        pass


def _harvest(cov: Coverage) -> set[Arc]:
    """The arcs recorded since the last harvest (flushing the collector), as repository paths;
    the data is erased so the next harvest starts empty. After a fork, coverage.py gives the
    child a data store of its own, so a child's harvest never touches the parent's."""
    data = cov.get_data()
    arcs: set[Arc] = set()
    for filename in data.measured_files():
        path = relative_source(filename)
        if path is None:
            continue
        arcs.update((path, a, b) for a, b in data.arcs(filename) or ())
    data.erase()
    return arcs


# -- the measuring interpreter -------------------------------------------------------------------


def quiet_coverage() -> None:
    """An empty harvest (nothing ran since the last one) is expected here, not worth a warning."""
    warnings.filterwarnings("ignore", message="No data was collected")


def _start_coverage() -> Coverage:
    # coverage.py (the reach extra): only `durable-sim coverage` needs it
    import coverage

    quiet_coverage()
    cov = coverage.Coverage(
        data_file=None, branch=True, source=[str(durable_dir())], config_file=False, auto_data=False
    )
    cov.start()
    return cov


def measure(options: Options, cov: Coverage) -> Raw:
    """Run the sweep (and the fuzzer) or the corpus under the already started ``cov``."""
    started = time.perf_counter()
    raw = Raw()
    raw.arcs |= _harvest(cov)  # whatever ran at import time
    with Progress(command="coverage", unit="runs", enabled=not options.quiet) as progress:
        if options.corpus is not None:
            _replay_corpus(options, cov, raw, progress)
        else:
            _measure_sweeps(options, cov, raw, progress)
            if options.fuzz_examples:
                _measure_fuzz(options, cov, raw, progress)
    raw.arcs |= _harvest(cov)
    raw.wall_s = time.perf_counter() - started
    return raw


def _scenario_names(options: Options) -> list[str]:
    # imports durable: only after coverage started in this child, so its import-time lines count
    from sim.world.scenario import bundled_names

    return list(options.scenarios) or bundled_names()


def _measure_sweeps(options: Options, cov: Coverage, raw: Raw, progress: Progress) -> None:
    global _SINK
    # imports durable: only after coverage started in this child, so its import-time lines count
    from sim.explore import forking
    from sim.explore.sweep import SweepPlan, sweep
    from sim.world import tempdirs
    from sim.world.faults import CrashKind
    from sim.world.scenario import load_scenario
    from sim.world.stores import StoreKind

    for name in _scenario_names(options):
        scenario = load_scenario(name)
        for store in options.stores:
            progress.start(f"sweep {scenario.name}[{store}]")
            raw.arcs |= _harvest(cov)
            sink = tempdirs.make("reach")
            _SINK = sink
            if save_child_coverage not in forking.CHILD_EXIT_HOOKS:
                forking.CHILD_EXIT_HOOKS.append(save_child_coverage)
            try:
                plan = SweepPlan(
                    scenario=scenario,
                    ref=name,
                    store=StoreKind(store),
                    seed=options.seed,
                    crash_kinds=tuple(CrashKind(kind) for kind in options.crash_kinds),
                    determinism="off",  # I10's second runs re-run identical code: no new arcs
                )
                result = sweep(
                    plan,
                    progress=progress.advance,
                    fork_from=0,  # every schedule in a forked child: its exit hook measures it
                )
                parent = _harvest(cov)
                children = _read_children(sink)
            finally:
                _SINK = None
                _remove_tree(sink)
            raw.arcs |= parent
            _record_sweep(raw, scenario, store, result, parent, children)
            progress.finish(f"{result.schedules} schedules, {len(children)} measured children")


def _record_sweep(
    raw: Raw,
    scenario: Scenario,
    store: str,
    result: ScenarioSweep,
    parent: set[Arc],
    children: list[tuple[str, set[Arc]]],
) -> None:
    """Corpus candidates of one sweep: its fault-free runs (credited with ``parent``) and each
    measured child (credited with what it reached beyond ``parent``)."""
    labels: list[str] = result.reference.labels
    regional = region_filter()
    base = _schedule_text(result.reference.base_points)
    fault_free: list[CaseRun] = [{"schedule": "none", "fault_free": True, "labels": []}]
    if base != "none":
        fault_free.append(
            {"schedule": base, "fault_free": True, "labels": _labels_of(base, labels)}
        )
    if scenario.timed_crashes:  # the forking run keeps the scenario's own timed crashes
        fault_free.append(
            {"schedule": base, "fault_free": False, "labels": _labels_of(base, labels)}
        )
    cost = len(labels)
    raw.cases.append(
        Case(scenario.name, store, fault_free, regional(parent), cost * len(fault_free))
    )
    for schedule, arcs in children:
        raw.arcs |= arcs
        own = regional(arcs - parent)
        if own:
            run: CaseRun = {
                "schedule": schedule,
                "fault_free": False,
                "labels": _labels_of(schedule, labels),
            }
            raw.cases.append(Case(scenario.name, store, [run], own, cost))
    raw.sweeps.append(
        {
            "scenario": scenario.name,
            "store": store,
            "schedules": result.schedules,
            "measured_children": len(children),
            "verdicts": dict(result.verdicts),
        }
    )
    if result.reference.failed:
        raw.notes.append(f"{scenario.name}[{store}]: its fault-free run fails; nothing was swept")


def _schedule_text(points: list[CrashPoint]) -> str:
    return Schedule(tuple(points)).text()


def _labels_of(schedule: str, labels: list[str]) -> list[str]:
    """The boundary label of each crash point of ``schedule`` in the traced run (``?`` beyond)."""
    return [
        labels[p.index] if p.index < len(labels) else "?" for p in parse_schedule(schedule).points
    ]


def _read_children(sink: str) -> list[tuple[str, set[Arc]]]:
    """Every child's (schedule, arcs), in schedule order (not by process id: the corpus built
    from them must not depend on the order the children happened to get their pids)."""
    out = []
    for name in os.listdir(sink):
        if name.startswith("child-") and name.endswith(".json"):
            doc = json.loads(Path(sink, name).read_text(encoding="utf-8"))
            out.append((doc["schedule"], _arcs_from(doc["arcs"])))
    return sorted(out, key=lambda child: _schedule_order(child[0]))


def _schedule_order(text: str) -> list[tuple[int, int, str]]:
    return [(p.index, p.when == "after", p.kind) for p in parse_schedule(text).points]


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class _Fuzzer(Protocol):
    """``fuzz_schedules`` bound to a scenario, or ``fuzz_machine``: what ``_measure_fuzz`` runs."""

    def __call__(
        self, *, store: str, examples: int, fuzz_seed: int, on_example: Callable[[], None]
    ) -> Finding | None: ...


def _measure_fuzz(options: Options, cov: Coverage, raw: Raw, progress: Progress) -> None:
    """The schedule fuzzer on every chosen scenario, and the world machine when no scenario was
    named, on the file store if it is chosen (the fuzzer's default), else SQLite."""
    # imports durable: only after coverage started in this child, so its import-time lines count
    from sim.explore.fuzz import fuzz_machine, fuzz_schedules
    from sim.world import tempdirs
    from sim.world.scenario import load_scenario

    store = "file" if "file" in options.stores else options.stores[0]
    home = tempdirs.make("reach")
    set_hypothesis_home_dir(home)
    findings = 0
    runs: list[tuple[str, _Fuzzer]] = [
        (f"fuzz {name}[{store}]", partial(fuzz_schedules, load_scenario(name)))
        for name in _scenario_names(options)
    ]
    if not options.scenarios:
        runs.append((f"fuzz world machine[{store}]", fuzz_machine))
    try:
        for title, fuzzer in runs:
            progress.start(title)
            raw.arcs |= _harvest(cov)
            finding = fuzzer(
                store=store,
                examples=options.fuzz_examples,
                fuzz_seed=options.seed,
                on_example=lambda: progress.advance(1),
            )
            findings += finding is not None
            raw.fuzz_arcs |= _harvest(cov)
            progress.finish("failure found (see durable-sim fuzz)" if finding else "done")
    finally:
        _remove_tree(home)
    raw.arcs |= raw.fuzz_arcs
    if findings:
        raw.notes.append(
            f"the fuzzer found {findings} failing case(s); reach does not judge them: run "
            "durable-sim fuzz"
        )


def load_corpus(path: str) -> dict[str, Any]:
    """A reach corpus file, checked enough that a bad one is one line (``ReachError``)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReachError(f"cannot read reach corpus {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ReachError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(doc, dict) or doc.get("schema_version") != CORPUS_SCHEMA_VERSION:
        raise ReachError(f"{path}: not a reach corpus of schema version {CORPUS_SCHEMA_VERSION}")
    if not isinstance(doc.get("cases"), list):
        raise ReachError(f"{path}: a reach corpus needs a list of cases")
    return doc


def _replay_corpus(options: Options, cov: Coverage, raw: Raw, progress: Progress) -> None:
    """Replay every run of every corpus case (no forking: one ``run_scenario`` each) and check
    that each crash point still lands on the boundary it was chosen for."""
    # imports durable: only after coverage started in this child, so its import-time lines count
    from sim.run.runner import run_scenario
    from sim.world.scenario import load_scenario

    assert options.corpus is not None
    doc = load_corpus(options.corpus)
    progress.start(f"replay {options.corpus}")
    for case in doc["cases"]:
        scenario = load_scenario(case["scenario"])
        for run in case["runs"]:
            schedule = parse_schedule(run["schedule"])
            chosen = scenario.without_faults() if run["fault_free"] else scenario
            result = run_scenario(chosen, seed=doc["seed"], store=case["store"], schedule=schedule)
            landed = [c.label for c in result.trace.crashes]
            if landed != run["labels"]:
                raw.notes.append(
                    f"boundary numbering changed: {case['scenario']}[{case['store']}] "
                    f"{run['schedule']} was chosen at {run['labels']} but crashes at {landed}; "
                    f"regenerate the corpus: {REGENERATE}"
                )
            progress.advance(1)
    raw.arcs |= _harvest(cov)
    progress.finish(f"{len(doc['cases'])} cases")


# -- running it ----------------------------------------------------------------------------------


def run_measurement(options: Options) -> Raw:
    """Measure in a fresh interpreter (coverage must start before ``durable`` is imported, or its
    module-level lines would count as missed); stderr is shared, for the progress lines."""
    require_coverage()
    if options.corpus is not None:  # the child starts elsewhere: a relative path is the caller's
        options = replace(options, corpus=os.path.abspath(options.corpus))
    with tempfile.TemporaryDirectory(prefix="durable-sim-reach-") as tmp:
        out = Path(tmp, "raw.json")
        command = [
            sys.executable,
            "-m",
            "sim.explore.reach",
            json.dumps(options.to_json()),
            str(out),
        ]
        # Started where this ``sim`` package was imported from (a checkout, or site-packages):
        # ``-m`` imports from the current directory first, and the caller's may hold another one.
        child = subprocess.Popen(
            command, cwd=str(package_dir("sim").parent), stdout=subprocess.DEVNULL
        )
        try:
            code = child.wait()
        except BaseException:
            child.terminate()
            child.wait()
            raise
        if code != 0 or not out.exists():
            problem = Path(tmp, "error.txt")
            why = problem.read_text(encoding="utf-8") if problem.exists() else f"exit {code}"
            raise ReachError(f"the measuring interpreter failed: {why.strip()}")
        return Raw.from_json(json.loads(out.read_text(encoding="utf-8")))


def worker(argv: list[str]) -> int:
    """``python -m sim.explore.reach OPTIONS_JSON OUT``: start coverage, then import and run."""
    options = Options.from_json(json.loads(argv[0]))
    out = Path(argv[1])
    cov = _start_coverage()
    try:
        raw = measure(options, cov)
    except (ReachError, ValueError) as exc:  # a scenario or corpus error: one line upstairs
        cov.stop()
        out.with_name("error.txt").write_text(f"{type(exc).__name__}: {exc}", encoding="utf-8")
        return 2
    cov.stop()
    out.write_text(json.dumps(raw.to_json()), encoding="utf-8")
    return 0
