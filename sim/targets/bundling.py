"""Repro bundles (``durable-sim target bundle``): one point of a target, written as a folder that
reproduces it without durable-sim, in the form upstream bug reports of this class are filed in
-- a small standalone program and "reproduced N of N runs".

The folder holds ``repro.py`` (the target's agent or workflow on the framework's public API, the
kill at the point's instant, a ledger outside the process and the check: exit 1 when reproduced,
0 when not), ``requirements.txt`` (the framework's distributions at the versions installed
here), anything the program needs beside it (a user's app, copied) and ``ISSUE.md``. What the
program is comes from the target (``Target.bundle``: each target's ``bundle`` module and
template); what the issue says comes from the harness's own verdict at that point, and from
running the program ``runs`` times here after writing it, its count recorded as it came out.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sim.targets import environments
from sim.targets.host import Crash, PointRun, run_point
from sim.targets.judge import PointVerdict, judge_point
from sim.targets.kit.bundle import KILL_COMMENT
from sim.targets.ledger import LedgerRow
from sim.targets.protocol import (
    Bundle,
    BundleCase,
    Target,
    TargetError,
    TargetOptions,
    TargetTool,
)
from sim.targets.sweep import crash_at, reference_run, replay_line, warm

#: The files a bundle writes (besides its ``Bundle.files``).
PROGRAM, REQUIREMENTS, ISSUE = "repro.py", "requirements.txt", "ISSUE.md"
#: How many lines of the program the issue shows before pointing at the file.
SHOWN_LINES = 30
#: repro.py's exit status when it reproduced the finding.
REPRODUCED = 1
_APPLIED = re.compile(r"^(?P<tool>\S+) applied (?P<n>\d+) times? \(expected (?P<bound>[^)]+)\)$")


@dataclass
class ReproRun:
    """One run of the written program: its exit status (None: it did not finish in time)."""

    status: int | None
    seconds: float
    output: str

    @property
    def reproduced(self) -> bool:
        return self.status == REPRODUCED


@dataclass
class BundleReport:
    """What ``write_bundle`` made and measured."""

    out: Path
    crash: Crash
    verdict: PointVerdict
    bundle: Bundle
    runs: list[ReproRun] = field(default_factory=list)
    harness_s: float = 0.0  # the harness's fault-free run and point, judged
    written_s: float = 0.0  # until the folder was written (before its runs)

    @property
    def reproduced(self) -> int:
        return sum(run.reproduced for run in self.runs)


def case_of(reference: PointRun, crash: Crash, tools: tuple[TargetTool, ...]) -> BundleCase:
    """The point as a bundle counts it: the label's kind, and which crossing of that kind it is
    in the fault-free trace; the fault-free run's applied effects, per tool."""
    kind = crash.label.split("#", 1)[0]
    earlier = reference.labels[: crash.index + 1]
    n = sum(1 for label in earlier if label.split("#", 1)[0] == kind)
    expected = {tool.name: (_applied(reference.ledger, tool.name), tool.policy) for tool in tools}
    return BundleCase(label=crash.label, when=str(crash.when), kind=kind, n=n, expected=expected)


def _applied(ledger: list[LedgerRow], tool: str) -> int:
    return sum(1 for row in ledger if row.tool == tool and row.applied)


def write_bundle(
    target: Target,
    options: TargetOptions,
    point: tuple[int, str],
    out: Path,
    *,
    runs: int = 3,
    timeout_s: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> BundleReport:
    """The harness's verdict at ``point``, the bundle written to ``out``, run ``runs`` times
    here, and its ``ISSUE.md`` saying what came out. Options and points the target's bundle does
    not cover are refused in one line, before the point runs."""
    say = progress or (lambda text: None)
    started = time.perf_counter()
    if options.preempt_s:
        raise TargetError(f"{target.name}: a repro bundle kills with SIGKILL; --preempt has none")
    maker = target.bundle(options)
    tools = target.tools(options)
    # One service (if any) for both runs, and their three children forked from one warm zygote
    # (one import of the framework instead of three), as a sweep's are.
    with target.service(options), warm(target, options) as (zygote, _):
        reference = reference_run(target, options, timeout_s=timeout_s, zygote=zygote)
        crash = crash_at(reference, *point)
        bundle = maker(case_of(reference, crash, tools))
        say(f"harness: running {crash.text()} ({crash.label})")
        run = run_point(target, options, crash, timeout_s=timeout_s, zygote=zygote)
    verdict = judge_point(run, reference, tools)
    report = BundleReport(out, crash, verdict, bundle, harness_s=time.perf_counter() - started)
    _write_files(out, bundle)
    report.written_s = time.perf_counter() - started
    for number in range(1, runs + 1):
        report.runs.append(run_repro(out, bundle.run_s))
        last = report.runs[-1]
        say(f"run {number}/{runs}: exit {last.status} in {last.seconds:.1f} s")
    (out / ISSUE).write_text(issue_text(target, options, report), encoding="utf-8")
    return report


def _write_files(out: Path, bundle: Bundle) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in {PROGRAM: bundle.program, **bundle.files}.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (out / REQUIREMENTS).write_text(requirements(bundle), encoding="utf-8")


def requirements(bundle: Bundle) -> str:
    """The framework's distributions at the versions installed here (``name==version``); a
    program of the standard library only gets a comment (``pip install -r`` takes it)."""
    versions = environments.versions(None, bundle.distributions)
    pinned = "".join(f"{name}=={version}\n" for name, version in versions.items())
    return pinned or "# repro.py needs the Python standard library only\n"


def run_repro(folder: Path, timeout_s: float, python: str = sys.executable) -> ReproRun:
    """``python repro.py`` in ``folder``, bounded by ``timeout_s`` (its children are bounded by
    the program itself)."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, PROGRAM], cwd=folder, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout if isinstance(exc.stdout, str) else ""
        return ReproRun(None, time.perf_counter() - started, output)
    return ReproRun(proc.returncode, time.perf_counter() - started, proc.stdout + proc.stderr)


def headline(report: BundleReport) -> str:
    """The issue's title after the framework's name: the first wrong count a reproducing run
    printed (the tools its ``REPRODUCED:`` line names), or that it did not reproduce."""
    for run in (r for r in report.runs if r.reproduced):
        lines = [line.strip() for line in run.output.splitlines()]
        wrong = next((ln for ln in lines if ln.startswith("REPRODUCED: ")), "")
        tools = wrong.removeprefix("REPRODUCED: ").split(", ")
        for line in lines:
            match = _APPLIED.fullmatch(line)
            if match and match["tool"] in tools:
                return f"{line} after a SIGKILL and a resume"
    return f"killed {report.bundle.kill}: not reproduced"


def issue_text(target: Target, options: TargetOptions, report: BundleReport) -> str:
    """``ISSUE.md``: title, versions, what happens, the expected behaviour, the count of
    reproducing runs, the program's first lines and how to run it."""
    bundle = report.bundle
    versions = "".join(
        f", {n} {v}" for n, v in environments.versions(None, bundle.distributions).items()
    )
    python = f"{platform.python_version()} ({platform.python_implementation()})"
    lines = bundle.program.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(KILL_COMMENT)), 0)
    shown = lines[start : start + SHOWN_LINES]
    install = "venv/bin/pip install -r requirements.txt\n" if bundle.distributions else ""
    uses = f"{bundle.framework}'s public API" if bundle.distributions else "the copied app (`app/`)"
    parts = [
        f"# {bundle.framework}: {headline(report)}",
        f"**Versions:** Python {python} on {platform.system()} {platform.machine()}{versions}.",
        "## What happens",
        f"{bundle.setup}. A process running it is killed with SIGKILL {bundle.kill}; a fresh "
        f"process {bundle.resume}.",
        *_observed(report),
        *_finding(target, options, report),
        "## Expected behaviour",
        bundle.expected,
        "## Reproduction",
        _count_line(report),
        f"The program uses the standard library and {uses} only (a model, where there is one, "
        f"is scripted: no network). Lines {start + 1}-{start + len(shown)} of "
        f"[`{PROGRAM}`]({PROGRAM}) ({len(lines)} lines: above them the imports, below them the "
        "rest of the agent, then the kill switch, the ledger and the driver):",
        "```python\n" + "\n".join(shown) + "\n```",
        "## How to run",
        f"```sh\npython3 -m venv venv\n{install}venv/bin/python {PROGRAM}"
        "   # exit 1: reproduced; 0: not reproduced; 3: did not run\n```",
        *bundle.notes,
    ]
    return "\n\n".join(parts) + "\n"


def _observed(report: BundleReport) -> list[str]:
    """What ``repro.py`` printed (its first reproducing run, else its first run)."""
    runs = [r for r in report.runs if r.reproduced] or report.runs
    if not runs:
        return []
    lines = runs[0].output.strip().splitlines()
    return [f"`python {PROGRAM}` prints:", "```text\n" + "\n".join(lines) + "\n```"]


def _finding(target: Target, options: TargetOptions, report: BundleReport) -> list[str]:
    """The harness's verdict at the point: each violation, its explanation and witness."""
    line = replay_line(target, options, report.crash)
    if not report.verdict.violations:
        return [f"The crash sweep that chose this point found nothing there (`{line}`: pass)."]
    out = [f"Found by a crash sweep (durable-sim; `{line}`: {report.verdict.verdict}):"]
    for violation in report.verdict.violations:
        out.append(f"- **{violation.invariant}**: {violation.explanation}")
        if violation.witness:
            out.append("  ```text\n" + "\n".join(f"  {row}" for row in violation.witness))
            out[-1] += "\n  ```"
    return out


def _count_line(report: BundleReport) -> str:
    statuses = ", ".join(
        "timed out" if run.status is None else f"exit {run.status}" for run in report.runs
    )
    return (
        f"Reproduced {report.reproduced} of {len(report.runs)} runs (`python {PROGRAM}` on the "
        f"machine that wrote this report: {statuses})."
    )
