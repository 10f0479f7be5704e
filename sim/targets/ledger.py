"""The external services a target's tools act on, with their effect ledger, in a SQLite file
outside every child process (so an effect survives the kill that follows it).

Each effect is one transaction holding both the service's change and its ledger row, inside the
boundary ``effect:{service}.{op}#{call_id}``: a kill before it leaves neither, a kill after it
leaves both, exactly what a real payment provider or mail relay does once it has accepted a
request. An effect may carry an idempotency key: a key the service has already applied is
recorded as ``deduplicated`` and changes nothing (what a provider with idempotency keys does).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sim.targets.boundaries import Boundaries

LEDGER_NAME = "services.sqlite"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ledger (n INTEGER PRIMARY KEY AUTOINCREMENT, service TEXT, "
    "op TEXT, tool TEXT, call_id TEXT, key TEXT, process TEXT, detail TEXT, applied INTEGER, "
    "note TEXT)",
)


@dataclass(frozen=True)
class LedgerRow:
    """One attempt at an effect, as the service recorded it."""

    n: int
    service: str
    op: str
    tool: str
    call_id: str
    key: str | None
    process: str
    detail: str
    applied: bool
    note: str

    def text(self) -> str:
        """The witness row: ``ledger#2 payments.charge tool=charge_card call=call_p2_1 ...``."""
        state = "applied" if self.applied else self.note
        key = self.key if self.key is not None else "-"
        return (
            f"ledger#{self.n} {self.service}.{self.op} tool={self.tool} call={self.call_id} "
            f"key={key} by {self.process}: {self.detail} [{state}]"
        )


def _row(
    n: int,
    service: str,
    op: str,
    tool: str,
    call_id: str,
    key: str | None,
    process: str,
    detail: str,
    applied: int,
    note: str,
) -> LedgerRow:
    """A ledger table's row as a ``LedgerRow`` (SQLite keeps ``applied`` as 0 or 1)."""
    return LedgerRow(n, service, op, tool, call_id, key, process, detail, bool(applied), note)


class Ledger:
    """The services' SQLite file (created by the parent, written by children, read by the
    parent after the last child)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=10000")

    @classmethod
    def create(cls, path: Path) -> Ledger:
        ledger = cls(path)
        for statement in _SCHEMA:
            ledger._conn.execute(statement)
        return ledger

    def close(self) -> None:
        self._conn.close()

    def rows(self) -> list[LedgerRow]:
        found = self._conn.execute(
            "SELECT n, service, op, tool, call_id, key, process, detail, applied, note "
            "FROM ledger ORDER BY n"
        ).fetchall()
        return [_row(*row) for row in found]

    def effect(
        self,
        boundaries: Boundaries,
        *,
        service: str,
        op: str,
        tool: str,
        call_id: str,
        key: str | None,
        process: str,
        detail: str,
    ) -> bool:
        """Apply one effect (unless ``key`` was applied before); True if it was applied."""
        label = f"effect:{service}.{op}#{call_id}"

        def apply() -> bool:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                known = key is not None and (
                    conn.execute(
                        "SELECT 1 FROM ledger WHERE key = ? AND applied = 1", (key,)
                    ).fetchone()
                    is not None
                )
                conn.execute(
                    "INSERT INTO ledger (service, op, tool, call_id, key, process, detail, "
                    "applied, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        service,
                        op,
                        tool,
                        call_id,
                        key,
                        process,
                        detail,
                        0 if known else 1,
                        "deduplicated" if known else "",
                    ),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return not known

        return boundaries.crossing(label, apply, tool=tool, key=key)
