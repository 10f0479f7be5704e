"""One unit run: its part of a sweep computed (``sim.explore.sweep.sweep_part``), or its fuzzing
search (``fuzz_unit``), and returned as a unit document (``document``).

``python -m sim.explore.campaign.unit --task FILE --out FILE`` runs one unit in a fresh
interpreter: what a Dask worker does (``run_in_subprocess``), because the sweep forks, and
forking a process that runs threads -- a Dask worker does -- can leave the child waiting for a
lock that a thread of the parent held. A unit refuses to run on code other than the plan's
(``address.project_version``): its result would be filed under an address it does not belong to.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.errors import UserError
from sim.explore import interrupts
from sim.explore.campaign.address import digest, project_version
from sim.explore.campaign.document import part_json, unit_document
from sim.explore.campaign.fuzz_unit import run_fuzz
from sim.explore.sweep import SweepPlan, sweep_part
from sim.world import tempdirs

#: The unit's exit statuses (as the command line's: 2 bad input, 5 harness error, 130 stopped).
EXIT_REFUSED = 2
EXIT_ERROR = 5
EXIT_INTERRUPTED = 130
STDERR_SHOWN = 2000  # characters of a failed unit's stderr kept in the error


class UnitRefused(UserError, RuntimeError):
    """A task this process must not run: another code version, or a malformed task."""


class UnitFailed(RuntimeError):
    """A unit's interpreter failed (its status and the end of its stderr say how)."""


def run_unit(
    task: dict[str, Any], *, progress: Callable[[int], None] | None = None, jobs: int = 1
) -> dict[str, Any]:
    """Run the unit of ``task`` (``plan.Plan.task``) here; its unit document."""
    spec = task.get("spec")
    if not isinstance(spec, dict) or spec.get("kind") not in ("sweep", "fuzz"):
        raise UnitRefused("not a campaign unit's task")
    here = project_version()
    if spec.get("version") != here:
        raise UnitRefused(
            f"the unit was planned for durable-sim {spec.get('version')}, this process runs {here}"
        )
    started = time.perf_counter()
    if spec["kind"] == "fuzz":
        content = task.get("scenario")
        if spec.get("scenario_sha256") is not None and digest(content) != spec["scenario_sha256"]:
            raise UnitRefused("the task's scenario is not the one the unit was planned with")
        result = run_fuzz(spec, content, progress or _ignore)
        interrupts.stop_if_requested()  # as below: a stopped unit finds nothing
        result["wall_s"] = round(time.perf_counter() - started, 3)
        return unit_document(digest(spec), spec, result)
    try:
        plan = SweepPlan.from_json(spec["plan"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UnitRefused(f"the task's sweep plan is malformed: {exc}") from None
    # The sweep's first unit (its range starts at boundary 0) records the fault-free run.
    first = plan.roots.first == 0
    part = sweep_part(plan, reference=first, progress=progress, jobs=jobs)
    # A unit told to stop files nothing: an interrupt one of its runs could not raise
    # (``interrupts.record_dropped``) may have changed that run's outcome.
    interrupts.stop_if_requested()
    result = part_json(part, wall_s=time.perf_counter() - started)
    return unit_document(digest(spec), spec, result)


def _ignore(n: int) -> None:
    del n


def run_in_subprocess(task_text: str, *, timeout_s: float | None = None) -> str:
    """Run a unit in a fresh interpreter of this Python; its document's text. Raises
    ``UnitFailed`` if the interpreter fails (a Dask task that raises is retried elsewhere)."""
    workdir = Path(tempdirs.make("unit"))
    try:
        task_path, out_path = workdir / "task.json", workdir / "unit.json"
        task_path.write_text(task_text, encoding="utf-8")
        command = [sys.executable, "-m", "sim.explore.campaign.unit"]
        command += ["--task", str(task_path), "--out", str(out_path)]
        command += ["--parent", str(os.getpid())]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if done.returncode != 0:
            tail = done.stderr[-STDERR_SHOWN:].strip()
            raise UnitFailed(f"the unit's interpreter exited with status {done.returncode}: {tail}")
        return out_path.read_text(encoding="utf-8")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _die_with_parent(parent: int) -> None:
    """Be sent SIGTERM when the thread that started this interpreter ends (Linux's
    ``PR_SET_PDEATHSIG``): a Dask worker that dies or is closed does not leave its unit running
    on. SIGTERM stops the unit as it stops the command line: its forked children are killed and
    its temporary directories removed. A parent already gone: stop at once."""
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:
        raise KeyboardInterrupt("the unit's parent is gone")


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.explore.campaign.unit")
    parser.add_argument("--task", required=True, help="the task's JSON file (plan.Plan.task)")
    parser.add_argument("--out", required=True, help="where the unit document is written")
    parser.add_argument("--parent", type=int, default=None, help="stop when this process ends")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, interrupts.sigterm_as_sigint)
    try:
        if args.parent is not None:
            _die_with_parent(args.parent)
        task = json.loads(Path(args.task).read_text(encoding="utf-8"))
        with interrupts.record_dropped():
            doc = run_unit(task)
        _write(Path(args.out), json.dumps(doc))
    except UnitRefused as exc:
        print(f"durable-sim unit: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("durable-sim unit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:  # reported to the driver through the status and stderr
        traceback.print_exc()
        return EXIT_ERROR
    except BaseExceptionGroup as exc:  # trio's nurseries wrap an interrupt
        if not interrupts.interrupt_only(exc):
            raise
        print("durable-sim unit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
