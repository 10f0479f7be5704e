"""Sweep a target: record the fault-free trace, then kill the run at every boundary, before and
after, resume it in a fresh process, and judge every point (``sim.targets.judge``).

The result is a ``sim.explore.sweep.ScenarioSweep`` (name: the target, plus ``+idempotent`` for
the fixed variant; store: ``sqlite-{durability}``), so ``results_document`` and every report
view render it as they render a sweep of the reference runtime. Each failure carries the one
line that replays it: ``durable-sim target replay langgraph --durability sync --schedule 7:after``.

A schedule names a boundary of the fault-free trace by its index; the child is killed at that
boundary's *label* (see ``sim.targets.boundaries``), so a runtime that saves on background
threads (LangGraph's ``async`` durability) is still killed at the same logical instant.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import ScheduleError
from sim.explore.results import results_document
from sim.explore.sweep import Failure, ScenarioSweep
from sim.targets.environments import interpreter, versions
from sim.targets.host import DEFAULT_TIMEOUT_S, Crash, PointRun, run_point, target_service
from sim.targets.judge import ORDER, PointVerdict, judge_point, timeline
from sim.targets.kit.landing import effect_sites, undeclared_tools
from sim.targets.kit.options import check_options
from sim.targets.offline import network_attempts
from sim.targets.protocol import Target, TargetError, TargetOptions
from sim.targets.recovery_only import (
    RecoveryCheck,
    RecoveryOnly,
    checked,
    refusal,
    snapshot_dirs,
)
from sim.targets.snapshots import snapshots_in
from sim.targets.zygote import Zygote, ZygoteRefused
from sim.world.faults import CrashKind, When, parse_schedule

ProgressFn = Callable[[int, int, Crash, str], None]


def parse_point(text: str) -> tuple[int, When]:
    """``7:after`` (``7:after:process`` too: a target's only crash kind is a kill), read by the
    crash model's own grammar (``sim.world.faults``), so a target point and a simulator point
    are one language."""
    given = text.strip()
    if given.count(":") == 1:
        given += f":{CrashKind.PROCESS}"
    try:
        points = parse_schedule(given).points
    except ScheduleError as exc:
        raise TargetError(
            f"a target schedule is INDEX:before|after (e.g. 7:after), not {text!r}: {exc}"
        ) from None
    if len(points) != 1 or points[0].kind != CrashKind.PROCESS:
        raise TargetError(f"a target schedule is one INDEX:before|after kill, not {text!r}")
    return points[0].index, points[0].when


def crash_at(reference: PointRun, index: int, when: str) -> Crash:
    """The crash at boundary ``index``, on side ``when`` (a ``When``, or its text), of the
    fault-free trace, named by that boundary's label."""
    labels = reference.labels
    if not 0 <= index < len(labels):
        raise TargetError(
            f"boundary {index} is outside the fault-free trace (0..{len(labels) - 1})"
        )
    return Crash(index, When(when), labels[index])


def all_crashes(reference: PointRun) -> list[Crash]:
    return [Crash(i, when, label) for i, label in enumerate(reference.labels) for when in When]


def replay_line(target: Target, options: TargetOptions, crash: Crash) -> str:
    """The one line that runs this point again (options at their defaults are left out)."""
    words = ["durable-sim", "target", "replay", target.name]
    if len(target.durabilities) > 1:
        words += ["--durability", options.durability]
    for flag, value, default in (
        ("--saver", options.saver, target.savers[0]),
        ("--variant", options.variant, target.variants[0]),
        ("--resume", options.resume, target.resumes[0]),
    ):
        if value != default:
            words += [flag, value]
    if options.preempt_s:
        words += ["--preempt", f"{options.preempt_s:g}"]
    if options.app is not None:
        words += options.app.words()
    words += ["--schedule", crash.text()]
    return " ".join(shlex.quote(w) for w in words)


def run_name(target: Target, options: TargetOptions) -> str:
    """``langgraph``, ``langgraph+idempotent``, ``langgraph+resume=next``: the report's name."""
    name = target.name
    if options.variant != target.variants[0]:
        name += f"+{options.variant}"
    if options.resume != target.resumes[0]:
        name += f"+resume={options.resume}"
    if options.app is not None and target.name != "python":
        name += "+app"
    if options.preempt_s:
        name += f"+preempt={options.preempt_s:g}s"
    return name


def report_dir(target: Target, options: TargetOptions) -> str:
    """Where a sweep's report goes by default: one directory per target and mode, and for an
    app one per app and entry point (``target-python-orders-main``), so the next app's sweep
    never overwrites this one's."""
    name = f"reports/target-{run_name(target, options)}-{options.saver}"
    if len(target.durabilities) > 1:
        name += f"-{options.durability}"
    if options.app is not None:
        stem = options.app.app.rsplit("/", 1)[-1].removesuffix(".py").replace(".", "-")
        name += f"-{stem}-{options.app.function}"
    return name.replace("+", "-").replace("=", "-")


def reference_run(
    target: Target,
    options: TargetOptions,
    *,
    timeout_s: float,
    zygote: Zygote | None = None,
    keep: Path | None = None,
    snapshot_to: Path | None = None,
) -> PointRun:
    """The fault-free run; one that fails is refused (every point is judged against it).
    ``keep`` and ``snapshot_to``: ``run_point``'s (``sim.targets.recovery_only``)."""
    reference = run_point(
        target,
        options,
        None,
        timeout_s=timeout_s,
        zygote=zygote,
        keep=keep,
        snapshot_to=snapshot_to,
    )
    verdict = judge_point(reference, reference, target.tools(options))
    if verdict.verdict != "pass" or not reference.labels:
        tried = network_attempts(reference.rows)
        if tried:
            raise TargetError(
                f"{target.name}: the app tried to reach {', '.join(tried)} in the fault-free run, "
                "and sweeps run offline: script its model (--model-script), declare its calls "
                "to outside APIs (--effect-http, answered by --http-stub) or point its clients "
                "at stubs"
            )
        why = verdict.violations[0].explanation if verdict.violations else "no boundary crossed"
        raise TargetError(f"{target.name}: the fault-free run fails: {why}")
    return reference


def app_outcome(options: TargetOptions, reference: PointRun) -> dict[str, object]:
    """What a report says about a user's app: its entry point and declared effects; the
    framework's tools that landed no declared effect (counted, not judged); declared effects the
    fault-free run never called (a method of a class the app never instantiates, a misspelt
    function of another module's name) and HTTP patterns no call matched: a sweep that judges
    nothing there says so instead of passing quietly. And where the app calls each effect
    (``effect_sites``: the file and line of the fault-free run's first call, relative to where
    the command ran), so a report can point a failure about an effect at the user's line."""
    app = options.app
    assert app is not None
    called = {row.tool for row in reference.ledger}
    outcome: dict[str, object] = {
        "app": app.entry,
        "declared_effects": [f"{d.name}: {d.declared}" for d in app.declared()],
    }
    sites = effect_sites(reference.rows, app.workdir)
    if sites:
        outcome["effect_sites"] = sites
    undeclared = undeclared_tools(reference.rows)
    if undeclared:
        outcome["undeclared_effects"] = undeclared
    never = [e.name for e in app.effects if e.name not in called]
    if never:
        outcome["never_called"] = never
    unmatched = [h.name for h in app.http if h.name not in called]
    if unmatched:
        outcome["unmatched_http"] = unmatched
    return outcome


def sweep_target(
    target: Target,
    options: TargetOptions,
    *,
    points: list[tuple[int, str]] | None = None,
    choose: Callable[[list[str]], list[tuple[int, str]]] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: ProgressFn | None = None,
    reference: PointRun | None = None,
    fork: bool = True,
    recovery: RecoveryCheck | None = None,
) -> ScenarioSweep:
    """Every boundary x before/after of the fault-free trace, judged; or only ``points``, or
    the points ``choose`` picks from the fault-free trace's labels (a reduced sweep that names
    its boundaries by what they are, not by an index that moves when the trace changes).
    ``reference``: a fault-free run of the same target and options made before (``reference_run``),
    to judge against instead of running one more. ``fork``: fork every child from a warm zygote
    (``sim.targets.zygote``) where the target's preload allows it; False: a fresh interpreter
    per child, always (``--fresh``). ``recovery``: start each point's recovery from a snapshot
    of the fault-free run's files at its instant, running the points ``recovery`` says the real
    way too (``sim.targets.recovery_only``); a difference sweeps again the real way."""
    options = check_options(target, options)
    assert recovery is None or reference is None, "a recovery-only sweep makes its own reference"
    refused = None if recovery is None else refusal(target, options)
    if refused is not None:
        raise TargetError(f"{target.name}: --recovery-only cannot be used here: {refused}")
    pick = Pick(points, choose)
    with contextlib.ExitStack() as stack:
        # The snapshots' directories first, so they are removed last: after the zygote and any
        # child of it, which may still be writing them when an interrupt unwinds this block.
        dirs = stack.enter_context(snapshot_dirs()) if recovery is not None else None
        stack.enter_context(target_service(target, options))
        zygote, why = stack.enter_context(warm(target, options, fork=fork))
        if recovery is not None:
            assert dirs is not None
            out, broken = _recovery_only_sweep(
                target, options, pick, recovery, timeout_s, progress, zygote, dirs
            )
            if broken is None:
                out.reference.outcome["children"] = f"{why}; {out.reference.outcome['children']}"
                return out
            why += (
                f"; not from snapshots: the check found {broken}, so every point ran the real way"
            )
            reference = None
        out = _real_sweep(target, options, pick, timeout_s, progress, reference, zygote)
        out.reference.outcome["children"] = why
        return out


@dataclass(frozen=True)
class Pick:
    """Which points a sweep runs: ``points`` as given, those ``choose`` picks from the
    fault-free trace's labels, or (both None) every one."""

    points: list[tuple[int, str]] | None
    choose: Callable[[list[str]], list[tuple[int, str]]] | None

    def crashes(self, reference: PointRun) -> list[Crash]:
        points = self.choose(reference.labels) if self.choose is not None else self.points
        if points is None:
            return all_crashes(reference)
        return [crash_at(reference, i, when) for i, when in points]


def _real_sweep(
    target: Target,
    options: TargetOptions,
    pick: Pick,
    timeout_s: float,
    progress: ProgressFn | None,
    reference: PointRun | None,
    zygote: Zygote | None,
) -> ScenarioSweep:
    """Every point the real way: a first process killed at it, the next ones recovering."""
    started = time.perf_counter()
    if reference is None:
        reference = reference_run(target, options, timeout_s=timeout_s, zygote=zygote)

    def run(crash: Crash) -> PointRun:
        return run_point(target, options, crash, timeout_s=timeout_s, zygote=zygote)

    out = _sweep(target, options, pick.crashes(reference), reference, run, progress)
    out.wall_s = time.perf_counter() - started
    return out


def _recovery_only_sweep(
    target: Target,
    options: TargetOptions,
    pick: Pick,
    check: RecoveryCheck,
    timeout_s: float,
    progress: ProgressFn | None,
    zygote: Zygote | None,
    dirs: tuple[Path, Path],
) -> tuple[ScenarioSweep, str | None]:
    """Every point from its snapshot (``sim.targets.recovery_only``); and the first difference
    the check found between such a point and the same point run the real way (None: none)."""
    started = time.perf_counter()
    point_dir, into = dirs
    reference = reference_run(
        target, options, timeout_s=timeout_s, zygote=zygote, keep=point_dir, snapshot_to=into
    )
    copies, stopped = snapshots_in(into)
    crashes = pick.crashes(reference)
    recovery = RecoveryOnly(
        target=target,
        options=options,
        reference=reference,
        point_dir=point_dir,
        copies=copies,
        checked_texts=checked(crashes, check),
        timeout_s=timeout_s,
        zygote=zygote,
        stopped=stopped,
    )
    out = _sweep(target, options, crashes, reference, recovery.run, progress)
    out.reference.outcome["children"] = recovery.summary()
    out.wall_s = time.perf_counter() - started
    return out, recovery.broken


@contextlib.contextmanager
def warm(
    target: Target, options: TargetOptions, *, fork: bool = True
) -> Iterator[tuple[Zygote | None, str]]:
    """A zygote that preloaded ``target.preload(options)``, and what the report says of the
    children: "forked from a warm zygote", or "a fresh interpreter each: WHY" when forking was
    not asked for or the zygote refused (a thread or descriptor its preload left). The zygote and
    its working directory are gone when the block ends, however it ends."""
    if not fork:
        yield None, "a fresh interpreter each: asked for (--fresh)"
        return
    preload = target.preload(options)
    if not preload:
        yield None, f"a fresh interpreter each: {target.name} preloads nothing it can fork from"
        return
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix=f"zygote-{os.getpid()}-") as workdir:
        try:
            python = interpreter(target.environment)
            zygote = Zygote(preload, workdir=Path(workdir), env=env, python=python)
        except (ZygoteRefused, TimeoutError) as exc:
            yield None, f"a fresh interpreter each: the zygote refused to fork: {exc}"
            return
        with zygote:
            yield zygote, f"forked from a warm zygote that preloaded {', '.join(preload)}"


def _sweep(
    target: Target,
    options: TargetOptions,
    crashes: list[Crash],
    reference: PointRun,
    run: Callable[[Crash], PointRun],
    progress: ProgressFn | None,
) -> ScenarioSweep:
    """Each of ``crashes`` run by ``run`` and judged against ``reference``."""
    store = options.saver
    if len(target.durabilities) > 1:
        store += f"-{options.durability}"
    out = ScenarioSweep(run_name(target, options), store, 0, 1, ["process"])
    out.determinism = "off"
    out.ref = target.name
    out.reference.labels = reference.labels
    out.reference.boundaries = len(out.reference.labels)
    for label in out.reference.labels:
        kind = label.split(":", 1)[0].split("#", 1)[0]
        out.reference.boundary_kinds[kind] = out.reference.boundary_kinds.get(kind, 0) + 1
    out.reference.outcome = {
        "answer": reference.state.answer,
        "history": reference.state.history,
        "processes": reference.processes,
    }
    if reference.state.figures:
        out.reference.outcome["figures"] = reference.state.figures
    if options.app is not None:
        out.reference.outcome.update(app_outcome(options, reference))
    for row in reference.ledger:
        if row.applied:
            key = f"{row.service}.{row.op}"
            out.reference.effects[key] = out.reference.effects.get(key, 0) + 1
    for n, crash in enumerate(crashes, 1):
        point = run(crash)
        verdict = judge_point(point, reference, target.tools(options))
        record(out, target, options, point, verdict)
        if progress is not None:
            progress(n, len(crashes), crash, verdict.verdict)
    return out


def record(
    out: ScenarioSweep,
    target: Target,
    options: TargetOptions,
    run: PointRun,
    verdict: PointVerdict,
) -> None:
    """One point into the sweep: its matrix cell and, unless it passed, its failure."""
    assert run.crash is not None
    crash = run.crash
    out.schedules += 1
    out.verdicts[verdict.verdict] += 1
    out.matrix.append(
        {"index": crash.index, "when": crash.when, "kind": "process", "verdict": verdict.verdict}
    )
    if verdict.verdict == "pass":
        return
    first = verdict.violations[0]
    others = [f"also {v.invariant}: {v.explanation}" for v in verdict.violations[1:]]
    out.failures.append(
        Failure(
            scenario=out.name,
            store=out.store,
            seed=out.seed,
            # The reports' schedule form (``INDEX:WHEN:KIND``), which their matrix cells match.
            schedule=f"{crash.text()}:process",
            verdict=verdict.verdict,
            invariant=first.invariant,
            explanation=first.explanation,
            witness=[*first.witness, *others],
            expected=first.expected,
            actual=first.actual,
            repro=replay_line(target, options, crash),
            crash_labels=[str(c["label"]) for c in run.crashes] or [crash.label],
            timeline=timeline(run),
            invariants=sorted({v.invariant for v in verdict.violations}, key=ORDER.index),
        )
    )


def target_versions(target: Target) -> dict[str, str]:
    """The versions of ``target``'s distributions where its children run: this environment's,
    or its own (``sim.targets.environments.versions``)."""
    return versions(target.environment, target.distributions)


def target_document(
    sweeps: list[ScenarioSweep], *, wall_s: float, versions: dict[str, str]
) -> dict[str, Any]:
    """The results document of target sweeps (the library versions they ran against in its
    config, where every report view shows them)."""
    document = results_document(sweeps, wall_s=wall_s, fast=False)
    document["config"]["target_versions"] = versions
    return document
