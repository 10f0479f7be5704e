"""The external services of the real-process host (``durable-sim realcrash``): the state of
``sim.world.services.Services`` in a SQLite file outside every process, so it outlives a process
killed by SIGKILL, and the same operations (``sim.world.tools.OPERATIONS``) act on it.

Each effect is committed in one transaction *with* its ledger row, inside the boundary
``tool.effect:{service}.{op}#{call_id}``: a kill before it leaves neither, a kill after it
leaves both, as a crash before or after the simulator's effect does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durable.tools import ToolContext, ToolError
from sim.world.process import SimProcess
from sim.world.services import Effect
from sim.world.tools import EffectOutcome, ServiceState

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, content TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY, amount INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS fence (conversation_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS outbox (n INTEGER PRIMARY KEY AUTOINCREMENT, line TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS compensated (key TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS refunds (key TEXT PRIMARY KEY, amount INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER)",
    """CREATE TABLE IF NOT EXISTS ledger (
        n INTEGER PRIMARY KEY AUTOINCREMENT,
        service TEXT NOT NULL, op TEXT NOT NULL, call_id TEXT NOT NULL, key TEXT NOT NULL,
        epoch INTEGER NOT NULL, time_s REAL NOT NULL, boundary INTEGER NOT NULL,
        applied INTEGER NOT NULL, note TEXT NOT NULL
    )""",
)
_LEDGER = ("service", "op", "call_id", "key", "epoch", "time_s", "boundary", "applied", "note")


class _State:
    """``ServiceState`` over a connection (inside the effect's transaction, or a read)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _one(self, sql: str, *args: Any) -> Any:
        row = self._conn.execute(sql, args).fetchone()
        return None if row is None else row[0]

    def _amount(self, sql: str, key: str) -> int | None:
        amount = self._one(sql, key)
        assert amount is None or isinstance(amount, int), "amounts are INTEGER"
        return amount

    def file_content(self, path: str) -> str | None:
        content = self._one("SELECT content FROM files WHERE path = ?", path)
        assert content is None or isinstance(content, str), "files.content is TEXT"
        return content

    def put_file(self, path: str, content: str) -> None:
        self._conn.execute(
            "INSERT INTO files (path, content) VALUES (?, ?) "
            "ON CONFLICT (path) DO UPDATE SET content = excluded.content",
            (path, content),
        )

    def delete_file(self, path: str) -> None:
        self._conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def compensated(self, key: str) -> bool:
        return self._one("SELECT 1 FROM compensated WHERE key = ?", key) is not None

    def put_compensated(self, key: str) -> None:
        self._conn.execute("INSERT INTO compensated (key) VALUES (?)", (key,))

    def charged(self, key: str) -> int | None:
        return self._amount("SELECT amount FROM charges WHERE key = ?", key)

    def put_charge(self, key: str, amount: int) -> None:
        self._conn.execute("INSERT INTO charges (key, amount) VALUES (?, ?)", (key, amount))

    def refunded(self, key: str) -> int | None:
        return self._amount("SELECT amount FROM refunds WHERE key = ?", key)

    def put_refund(self, key: str, amount: int) -> None:
        self._conn.execute("INSERT INTO refunds (key, amount) VALUES (?, ?)", (key, amount))

    def fence_of(self, conversation_id: str) -> int:
        epoch = self._one("SELECT epoch FROM fence WHERE conversation_id = ?", conversation_id)
        return 0 if epoch is None else int(epoch)

    def put_fence(self, conversation_id: str, epoch: int) -> None:
        self._conn.execute(
            "INSERT INTO fence (conversation_id, epoch) VALUES (?, ?) "
            "ON CONFLICT (conversation_id) DO UPDATE SET epoch = excluded.epoch",
            (conversation_id, epoch),
        )

    def send_line(self, line: str) -> None:
        self._conn.execute("INSERT INTO outbox (line) VALUES (?)", (line,))

    def increment_counter(self) -> int:
        self._conn.execute("UPDATE counter SET n = n + 1 WHERE id = 0")
        return int(self._one("SELECT n FROM counter WHERE id = 0"))


class SQLiteServices:
    """``sim.world.tools.ServiceLedger`` on a SQLite file (WAL, synchronous=FULL)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=10000")

    @classmethod
    def create(cls, path: Path, files: dict[str, str]) -> SQLiteServices:
        """A new services file holding the world's initial workspace ``files``."""
        services = cls(path)
        conn = services._conn
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.executemany("INSERT INTO files (path, content) VALUES (?, ?)", sorted(files.items()))
        conn.execute("INSERT INTO counter (id, n) VALUES (0, 0)")
        conn.execute("COMMIT")
        return services

    def close(self) -> None:
        self._conn.close()

    def view(self) -> ServiceState:
        return _State(self._conn)

    def ledger(self) -> list[Effect]:
        rows = self._conn.execute(f"SELECT {', '.join(_LEDGER)} FROM ledger ORDER BY n").fetchall()
        effects = [dict(zip(_LEDGER, row, strict=True)) for row in rows]
        return [Effect(**{**e, "applied": bool(e["applied"])}) for e in effects]

    def files(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT path, content FROM files ORDER BY path").fetchall())

    def effects_of(self, call_id: str) -> list[Effect]:
        return [e for e in self.ledger() if e.call_id == call_id and e.applied]

    def effect(
        self,
        process: SimProcess,
        service: str,
        op: str,
        ctx: ToolContext,
        apply: Callable[[ServiceState], EffectOutcome],
    ) -> str:
        machine = process.machine
        label = f"tool.effect:{service}.{op}#{ctx.call_id}"
        index = machine.before(process, label)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied, note, output = apply(_State(conn))
            row = (service, op, ctx.call_id, ctx.idempotency_key, ctx.epoch, process.now(), index)
            conn.execute(
                f"INSERT INTO ledger ({', '.join(_LEDGER)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, int(applied), note),
            )
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise
        machine.after(process, index, label)
        if isinstance(output, ToolError):
            raise output
        return str(output)
