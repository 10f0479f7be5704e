"""The two fast paths of a depth-1 sweep over the points one run owns (``Roots``): a short run's
naive path split over forked workers (``split``), or the forking run that shares the fault-free
prefix (``forked``; ``sim.explore.forking``). Both fold crash points that leave the same world
(``sim.explore.folding``): a folded point inherits its twin's outcome."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

from sim.explore import forking, parallel
from sim.explore.recording import Judged, ScenarioSweep
from sim.explore.sweep.modes import Determinism, wants_rerun
from sim.explore.sweep.naive import ProgressFn, naive_parts, run_judged
from sim.explore.sweep.parts import Listed
from sim.judgement.oracles import Verdict, Violation, check_determinism, compare_fingerprints
from sim.run.runner import RunResult, run_scenario
from sim.world import tempdirs
from sim.world.faults import CrashKind, Schedule, parse_schedule
from sim.world.scenario import Scenario
from sim.world.stores import StoreKind


@dataclass
class FastRun:
    """The fast paths over the points ``owns`` takes (by schedule text): each returns the
    outcomes in the sweep's order, a folded schedule's inherited from its twin, for
    ``record_part`` to record; with ``stop``, up to the first failure only (a folded schedule
    whose twin was skipped is run on its own)."""

    out: ScenarioSweep
    scenario: Scenario
    reference: RunResult
    mode: Determinism
    progress: ProgressFn | None
    jobs: int
    twin_of: dict[str, str]
    owns: Callable[[str], bool]
    stop: bool = False

    def listed(self, texts: list[str], outcome: Callable[[str], Judged]) -> list[Listed]:
        """``(text, outcome(text))`` in order, up to the first failure if stopping: a stopped
        worker or forking run has no outcome for what comes later."""
        listed: list[Listed] = []
        for text in texts:
            listed.append((text, outcome(text)))
            if self.stop and listed[-1][1].verdict is not Verdict.PASS:
                break
        return listed

    def split(self, schedules: list[Schedule]) -> list[Listed]:
        """The naive path over ``jobs`` forked workers, each taking every ``jobs``-th schedule
        that has no twin."""
        out, twin_of, jobs, progress = self.out, self.twin_of, self.jobs, self.progress
        texts = [s.text() for s in schedules]
        own = [s for s, text in zip(schedules, texts, strict=True) if text not in twin_of]
        chunks = [own[i::jobs] for i in range(jobs)]
        steps = [
            parallel.Step(
                f"{out.name}[{out.store}]/{i}",
                partial(
                    naive_parts, self.scenario, out, self.reference, chunk, self.mode, self.stop
                ),
            )
            for i, chunk in enumerate(chunks)
            if chunk
        ]
        parts: list[list[Judged]] = parallel.run_steps(steps, jobs=jobs, advance=progress)
        outcomes: dict[str, Judged] = {}
        for k, schedule in enumerate(own):
            if k // jobs < len(parts[k % jobs]):  # a stopping worker ends at its first failure
                outcomes[schedule.text()] = parts[k % jobs][k // jobs]

        def outcome_of(text: str) -> Judged:
            if text not in twin_of:
                return outcomes[text]
            if progress:
                progress(1)
            return self.inherited(outcomes.get(twin_of[text]), text)

        return self.listed(texts, outcome_of)

    def inherited(self, twin: Judged | None, text: str) -> Judged:
        """The outcome of a schedule whose future is the same as ``twin``'s: a pass is inherited
        as it is. A failure is run and judged again as the naive sweep would: its report must
        show *its* crash, timeline and witnesses (boundary numbers differ between the two), and
        I10 must say if it reproduces. An error is inherited too: re-running the harness's own
        failure here could raise or hang again. Without ``twin`` (a stopping sweep skipped it)
        it is run and judged on its own."""
        if twin is not None and twin.verdict in (Verdict.PASS, Verdict.ERROR):
            return twin
        schedule = parse_schedule(text)
        return run_judged(self.scenario, self.out, self.reference, self.mode, schedule)[1]

    def forked(
        self, traced: RunResult, base: Schedule, kinds: list[CrashKind]
    ) -> tuple[list[Violation], list[Listed]]:
        """The forking run (``sim.explore.forking``) and, unless I10 is off, its fingerprint
        compared with the traced run's: the prefix check."""
        out, mode = self.out, self.mode
        workdir = tempdirs.make("fork")
        plan = forking.ForkPlan(
            twin_of=self.twin_of,
            base=base,
            kinds=tuple(kinds),
            reference=self.reference,
            reruns=lambda text: wants_rerun(mode, out.seed, text),
            tears=traced.trace.tear_counts,
            jobs=self.jobs,
            workdir=workdir,
            progress=self.progress,
            owns=self.owns,
            stop_at_first_failure=self.stop,
        )
        try:
            store = StoreKind(out.store)
            parent = run_scenario(
                self.scenario, seed=out.seed, store=store, schedule=base, fork=plan
            )
            plan.wait_all()
            prefix: list[Violation] = []
            if mode != "off" and parent.trace.fingerprint != traced.trace.fingerprint:
                prefix = check_determinism(traced, parent)
            return prefix, self.listed(plan.ordered(), self.children(plan))
        finally:
            plan.kill_running()
            shutil.rmtree(workdir, ignore_errors=True)

    def children(self, plan: forking.ForkPlan) -> Callable[[str], Judged]:
        """Each listed schedule's outcome, from its forked children's files (or inherited)."""
        children: dict[str, list[dict[str, object]]] = {}
        for text, path in plan.done:
            children.setdefault(text, []).append(outcome_doc(path))
        equivalent = dict(plan.equivalent)

        @cache
        def forked_outcome(text: str) -> Judged | None:
            """A forked schedule's outcome (None: a stopping sweep skipped it)."""
            docs = children.get(text)
            if docs is None:
                return None
            judged = merged(docs)
            failed = judged.verdict not in (Verdict.PASS, Verdict.ERROR)
            if self.mode == "sample" and len(docs) == 1 and failed:
                judged = self._late_rerun(judged, _fingerprint(docs[0]), text)
            return judged

        def outcome_of(text: str) -> Judged:
            if text in equivalent:
                return self.inherited(forked_outcome(equivalent[text]), text)
            judged = forked_outcome(text)
            assert judged is not None, f"{text} was listed, never forked"
            return judged

        return outcome_of

    def _late_rerun(self, judged: Judged, fingerprint: str, text: str) -> Judged:
        """I10 for a failing schedule the sample did not re-run: run it again here, compare."""
        out = self.out
        again = run_scenario(
            self.scenario, seed=out.seed, store=out.store, schedule=parse_schedule(text)
        )
        differs = compare_fingerprints(fingerprint, again.trace.fingerprint)
        return judged.with_violations(differs) if differs else judged


def outcome_doc(path: str) -> dict[str, object]:
    """A child's outcome file; one that cannot be read is the harness's error, not a verdict."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"unreadable outcome {path}: {exc}"}
    return doc if isinstance(doc, dict) else {"error": f"malformed outcome {path}"}


def merged(docs: list[dict[str, object]]) -> Judged:
    """One schedule's outcome from its child (or its two children: I10 compares their
    fingerprints)."""
    for doc in docs:
        if "error" in doc:
            return Judged.harness_error(f"harness error in a forked child: {doc['error']}")
    judged = Judged.from_json(docs[0])
    if len(docs) > 1:
        differs = compare_fingerprints(_fingerprint(docs[0]), _fingerprint(docs[1]))
        judged = judged.with_violations(differs) if differs else judged
    return judged


def _fingerprint(doc: dict[str, object]) -> str:
    """A passing or failing child's fingerprint (``ForkPlan.finish_child`` writes it with the
    verdict; only an ``error`` outcome has none, and ``merged`` reads that one first)."""
    fingerprint = doc["fingerprint"]
    assert isinstance(fingerprint, str), f"a child's fingerprint is text, not {fingerprint!r}"
    return fingerprint
