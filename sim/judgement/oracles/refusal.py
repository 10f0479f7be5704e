"""I13, damaged storage detected: a process that stopped with ``CorruptStore`` did so only after
a storage fault damaged something, names a damaged file, and left every file it found as it
found it.

Only a refused world is judged here (``check`` runs nothing else but I8 then); a recovery that
goes on after damage is judged by every other family.
"""

from __future__ import annotations

from sim.judgement.violation import Violation
from sim.run.runner import RunResult


def check_refusal(result: RunResult) -> list[Violation]:
    """I13, when a process stopped on corrupt storage: only after a storage fault that damaged
    something, naming a damaged file, and leaving everything it found as it found it (the
    evidence an operator needs). When the runtime goes on instead, every other oracle applies
    as usual: it recovered everything acknowledged, or they say what it lost or acted on."""
    assert result.storage.refusal is not None
    if not result.storage.damage:
        return [
            Violation(
                "I13",
                "the runtime reported corrupt storage, but nothing was damaged",
                (result.storage.refusal[:300],),
            )
        ]
    out: list[Violation] = []
    names = [path.rsplit("/", 1)[-1] for path in result.storage.damage]
    if not any(name in result.storage.refusal for name in names):
        out.append(
            Violation(
                "I13",
                "the corruption error does not name what is damaged",
                (
                    result.storage.refusal[:300],
                    *(f"{p}: {d}" for p, d in result.storage.damage.items()),
                ),
                expected=f"an error naming {', '.join(names)}",
                actual=result.storage.refusal[:120],
            )
        )
    if result.storage.evidence_changes:
        out.append(
            Violation(
                "I13",
                "a recovery that stopped on corrupt storage destroyed what it found",
                (
                    *result.storage.evidence_changes,
                    *(f"{p}: {d}" for p, d in result.storage.damage.items()),
                ),
            )
        )
    return out
