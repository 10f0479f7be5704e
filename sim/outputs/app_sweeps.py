"""``crash_sweep``: crash-test a user's app from their own test suite.

A team's regression check of its app belongs in its own tests, next to the code, not in a
separate CLI job::

    from sim.outputs.app_sweeps import crash_sweep

    def test_refunds_survive_crashes():
        result = crash_sweep(
            "python", app="jobs/refunds.py:main", effects=["payments:PAYMENTS.refund"]
        )
        assert result.ok, result.explain()

The options are the command line's (``durable-sim target sweep``), read by the same parser
(``sim.targets.kit.spec.AppArgs``, ``sim.targets.kit.options``): the same names with ``_`` for
``-``, the same checks, the same one-line ``TargetError`` for bad input. A JSON option
(``input``, ``model_script``, ``deps``, ``answers``, ``http_stub``) is a file's path, as on the
command line, or the value itself, which is written once to a content-addressed file so that
the replay line of a failure (``explain``) runs it again from a shell. Relative paths are the
current directory's, as for the command line.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.explore.recording import Failure, ScenarioSweep
from sim.targets.host import DEFAULT_TIMEOUT_S
from sim.targets.kit.options import app_spec, check_options
from sim.targets.kit.spec import AppArgs
from sim.targets.protocol import TargetOptions
from sim.targets.registry import get_target
from sim.targets.sweep import parse_point, sweep_target

#: Failures ``explain`` shows in full; the rest are counted.
EXPLAINED = 5
#: Where JSON values given inline are written (content-addressed: the same value, one file).
INLINE_DIR = "durable-sim-inputs"


@dataclass(frozen=True)
class AppSweepResult:
    """One target sweep of an app: its schedules, verdicts and failures (each with the replay
    line that reproduces it), and the sweep itself for anything more."""

    target: str
    sweep: ScenarioSweep

    @property
    def ok(self) -> bool:
        """Every schedule passed."""
        return not self.sweep.failures

    @property
    def failures(self) -> list[Failure]:
        return list(self.sweep.failures)

    def explain(self) -> str:
        """What failed, as ``durable-sim target sweep`` prints it: the verdict counts, then each
        failure's invariants, schedule and explanation, its witness and its replay line."""
        sweep = self.sweep
        lines = [
            f"{sweep.name}[{sweep.store}]: boundaries {sweep.reference.boundaries}, schedules "
            f"{sweep.schedules}, {sweep.verdict_counts()}"
        ]
        for failure in sweep.failures[:EXPLAINED]:
            lines.append(
                f"{failure.verdict} {'+'.join(failure.invariants or [failure.invariant])} "
                f"{failure.schedule} ({', '.join(failure.crash_labels)}): {failure.explanation}"
            )
            lines += [f"    {row}" for row in failure.witness]
            lines.append(f"  repro: {failure.repro}")
        if len(sweep.failures) > EXPLAINED:
            lines.append(f"... and {len(sweep.failures) - EXPLAINED} more failures")
        return "\n".join(lines)


def crash_sweep(
    target: str,
    *,
    app: str | None = None,
    effects: Sequence[str] = (),
    effect_http: Sequence[str] = (),
    http_stub: Any = None,
    input: Any = None,  # the command line's --input
    model_script: Any = None,
    deps: Any = None,
    answers: Any = None,
    thread: str = "",
    postgres: bool = False,
    durability: str = "",
    variant: str = "",
    saver: str = "",
    resume: str = "",
    points: Sequence[str] | None = None,
    preempt_s: float = 0.0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> AppSweepResult:
    """Sweep ``target`` (with the user's ``app``, or its bundled agent) as ``durable-sim target
    sweep`` does, and return the result; ``points`` (``["7:after", ...]``) sweeps only those."""
    found = get_target(target)
    words = AppArgs(
        app=app or "",
        effects=tuple(effects),
        http=tuple(effect_http),
        http_stub=_json_path(http_stub),
        input=_json_path(input),
        model_script=_json_path(model_script),
        deps=_json_path(deps),
        answers=_json_path(answers),
        thread=thread,
        postgres=postgres,
    )
    given = TargetOptions(
        durability=durability,
        variant=variant,
        saver=saver,
        resume=resume,
        app=app_spec(found, words),
        preempt_s=preempt_s,
    )
    options = check_options(found, given)
    chosen = None if points is None else [_point(point) for point in points]
    sweep = sweep_target(found, options, points=chosen, timeout_s=timeout_s)
    return AppSweepResult(target, sweep)


def _point(text: str) -> tuple[int, str]:
    index, when = parse_point(text)
    return index, str(when)


def _json_path(value: Any) -> str:
    """A JSON option as the command line takes it: a path as given; a value written to a file
    named by its content's digest (in the system's temporary directory), whose path a replay
    line can repeat."""
    if value is None:
        return ""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str) and value.endswith(".json"):
        return value
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    directory = Path(tempfile.gettempdir()) / INLINE_DIR
    directory.mkdir(exist_ok=True)
    path = directory / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return str(path)
