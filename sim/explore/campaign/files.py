"""The campaign directory: ``plan.json`` and one file per finished unit, ``units/<address>.json``.

Every file is written with the atomic-write protocol (a temporary file in the same directory,
fsync, rename over the target, fsync the directory), so a driver killed at any instant leaves
each unit file whole or absent, never half written. A unit file is trusted only when it verifies
(``document.verified``: its checksum over its own content, its address over its unit): one that
does not -- truncated, corrupted, another unit's -- is reported by name and its unit is run
again, never merged. Two verified results of one unit that differ beyond their wall times (a
re-run that disagrees, two shard directories) are nondeterminism: the first stays, the other is
kept beside it as ``<address>.conflict-<digest>.json`` for whoever investigates.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.errors import UserError
from sim.explore.campaign.address import digest
from sim.explore.campaign.document import UnitFileError, timings_aside, verified
from sim.explore.campaign.plan import Plan, PlanError

PLAN_FILE = "plan.json"
UNITS_DIR = "units"
_UNIT_NAME = re.compile(r"^([0-9a-f]{64})\.json$")
_TMP_NAME = re.compile(r"^\..+\.(\d+)\.tmp$")


class CampaignError(UserError, ValueError):
    """A campaign directory that cannot be used as asked (another plan's, unreadable): one line
    for the user."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in one step: a temporary file beside it (named after this
    process, so a leftover's owner can be told), fsynced, renamed over ``path``, and the
    directory fsynced. An interrupted write removes its temporary file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    done = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        done = True
    finally:
        if not done:
            with contextlib.suppress(OSError):
                tmp.unlink()
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_unit(path: Path, *, address: str) -> dict[str, Any]:
    """The verified unit document in ``path``; ``UnitFileError`` saying why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnitFileError(f"unreadable ({exc})") from exc
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UnitFileError(f"truncated or not JSON ({exc})") from exc
    return verified(doc, address=address)


@dataclass
class Scan:
    """What a campaign directory holds of a plan: each verified result by address, and the
    files found bad (path, why), whose units are to be run again."""

    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class CampaignDir:
    root: Path

    @property
    def units(self) -> Path:
        return self.root / UNITS_DIR

    def unit_path(self, address: str) -> Path:
        return self.units / f"{address}.json"

    def prepare(self, plan: Plan) -> None:
        """Make the directory hold ``plan``: a new one gets it; one that holds this same plan is
        resumed; one that holds another plan is refused (its results would be mixed with
        these). Temporary files whose writer is gone are removed."""
        try:
            self.units.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CampaignError(f"cannot write to {self.root}: {exc.strerror}") from exc
        existing = self.plan()
        if existing is not None and existing.identity != plan.identity:
            raise CampaignError(
                f"{self.root} holds another campaign's plan (another scenario, option or code "
                "version): give a new --out directory, or remove it"
            )
        if existing is None:
            write_atomic(self.root / PLAN_FILE, json.dumps(plan.to_json(), indent=1) + "\n")
        _remove_stale_tmp(self.units)

    def plan(self) -> Plan | None:
        path = self.root / PLAN_FILE
        if not path.exists():
            return None
        try:
            return Plan.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CampaignError(f"{path}: not a readable campaign plan ({exc})") from exc

    def scan(self, plan: Plan) -> Scan:
        """The verified results of ``plan``'s units in this directory, and the bad files."""
        scan = Scan()
        for unit in plan.units:
            path = self.unit_path(unit.address)
            if not path.exists():
                continue
            try:
                scan.done[unit.address] = read_unit(path, address=unit.address)
            except UnitFileError as exc:
                scan.bad.append((str(path), str(exc)))
        return scan

    def save(self, doc: dict[str, Any]) -> str | None:
        """File a unit's verified result; a conflict (an existing verified result of the same
        unit that differs beyond wall times) is kept beside it and described in the return."""
        address = doc["address"]
        path = self.unit_path(address)
        try:
            existing = read_unit(path, address=address) if path.exists() else None
        except UnitFileError:
            existing = None  # a bad file is replaced by the good result
        text = json.dumps(doc) + "\n"
        if existing is None:
            write_atomic(path, text)
            return None
        return self.conflict(existing, doc)

    def conflict(self, kept: dict[str, Any], other: dict[str, Any]) -> str | None:
        """None if ``other`` agrees with ``kept`` (timings aside); else keep it as a conflict
        file and describe the disagreement."""
        if timings_aside(kept["result"]) == timings_aside(other["result"]):
            return None
        address = kept["address"]
        name = f"{address}.conflict-{digest(timings_aside(other['result']))[:12]}.json"
        write_atomic(self.units / name, json.dumps(other) + "\n")
        return f"{self.unit_path(address)}: two runs of one unit disagree (the other: {name})"


def _remove_stale_tmp(directory: Path) -> None:
    """Temporary files of writers that no longer run (a driver killed mid-write)."""
    for entry in _entries(directory):
        match = _TMP_NAME.match(entry.name)
        if match is not None and not _alive(int(match.group(1))):
            with contextlib.suppress(OSError):
                entry.unlink()


def _entries(directory: Path) -> Iterable[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def open_directories(paths: Iterable[Path]) -> tuple[Plan, list[CampaignDir]]:
    """Campaign directories that must hold one plan (shards of one campaign): the plan and the
    directories, or ``CampaignError`` naming the one that differs."""
    dirs = [CampaignDir(Path(p)) for p in paths]
    plan: Plan | None = None
    for one in dirs:
        try:
            found = one.plan()
        except PlanError as exc:
            raise CampaignError(f"{one.root}: {exc}") from exc
        if found is None:
            raise CampaignError(f"{one.root}: no {PLAN_FILE} (not a campaign directory)")
        if plan is not None and found.identity != plan.identity:
            raise CampaignError(f"{one.root} holds another campaign's plan than {dirs[0].root}")
        plan = plan or found
    if plan is None:
        raise CampaignError("merge needs at least one campaign directory")
    return plan, dirs
