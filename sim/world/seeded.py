"""The simulated world: seed, RNG streams, deterministic ids, trace and fingerprint.

Determinism is the product. Every source of variation in a simulated run is drawn from here:
one ``random.Random`` per subsystem, seeded from ``sha256(seed, label)`` so a new draw in one
subsystem never shifts another; ids from counters; time from trio's ``MockClock``; and trio's own
task scheduling made deterministic and seeded (``seed_trio_scheduler``). The trace records every
boundary, effect, crash and commit with its virtual time; its hash is the run's fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

import trio

FINGERPRINT_VERSION = 1
SEED_MAX = 2**64 - 1  # seeds are unsigned 64-bit integers, as in the repro lines


def derive_seed(seed: int, label: str) -> int:
    digest = hashlib.sha256(f"{seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def seed_trio_scheduler(seed: int) -> None:
    """Make trio's run-queue order a function of ``seed`` (docs/architecture.md, 2.1).

    trio shuffles each batch of runnable tasks with the module-level ``_r``; with
    ``_ALLOW_DETERMINISTIC_SCHEDULING`` it first sorts the batch by task creation order, so the
    shuffle is reproducible once ``_r`` is seeded. This is the flag the Hypothesis plugin sets.
    """
    run_module: Any = trio._core._run
    run_module._ALLOW_DETERMINISTIC_SCHEDULING = True
    run_module._r.seed(derive_seed(seed, "trio.scheduler"))


def seed_process_scheduler(seed: int, number: int) -> None:
    """Reseed trio's run-queue order as process ``number`` of a world starts *after a crash*
    (both machines call it only then: a fault-free run, standby workers included, keeps
    ``seed_trio_scheduler``'s one stream, and its fingerprint).

    A restarted process's scheduling then depends on the seed and its position in the world,
    not on how much randomness the processes before it consumed (which differs with every crash
    point). That is what lets a real child (``durable-sim realcrash``), which starts a fresh
    interpreter per process, schedule its tasks as the simulator does: timers that tie at a
    restart (a client's abort due while the new process waits for the lease) fall the same way
    in both worlds (docs/architecture.md, 2.1).
    """
    if number == 1:
        return
    reseed_trio_scheduler(seed, f"trio.scheduler.p{number}")


def seed_commit_scheduler(seed: int, content: tuple[tuple[int, ...], ...]) -> None:
    """Reseed trio's run-queue order at the end of a commit from ``seed`` and ``content``, the
    sizes of the committing process's conversations (``sim.world.process.commit_content``):
    counts the renaming of ``sim.explore.rejoin`` leaves as they are, so two runs whose
    canonical views are equal at a commit's end draw the same interleaving from there on.

    Without it the scheduler's draws count from the process's start: a process that replaced a
    crashed one, back in the fault-free run's durable state, still interleaved its tasks as no
    process of the fault-free run did, and a pruned sweep (``sim.explore.pruning``) could not
    take its rest for the fault-free run's (docs/architecture.md, 2.1 and 2.5). Both hosts call
    it (``Machine.after``), so realcrash's processes draw as the simulator's do."""
    reseed_trio_scheduler(seed, f"trio.scheduler.commit:{content}")


def reseed_trio_scheduler(seed: int, label: str) -> None:
    """Reseed trio's run-queue order from ``seed`` and ``label`` in the middle of a run: at a
    commit's end (``seed_commit_scheduler``) and in a process started after a crash
    (``seed_process_scheduler``)."""
    run_module: Any = trio._core._run
    assert run_module._ALLOW_DETERMINISTIC_SCHEDULING, "seed_trio_scheduler first"
    run_module._r.seed(derive_seed(seed, label))


def digest_of(parts: list[Any]) -> str:
    """sha256 over the ``repr`` of each part: a digest of a world state (see
    ``Machine.state_digests``)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def trio_rng_state() -> Any:
    """The state of trio's scheduling RNG: part of what decides a world's future."""
    run_module: Any = trio._core._run
    return run_module._r.getstate()


class Ids:
    """Deterministic ids: ``{kind}-{n}`` with one counter per kind, shared by every process of the
    world so ids stay unique across restarts."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def kinds(self) -> list[str]:
        """The kinds drawn so far (``call``, ``task``, ...)."""
        return sorted(self._next)

    def new(self, kind: str) -> str:
        n = self._next.get(kind, 0) + 1
        self._next[kind] = n
        return f"{kind}-{n}"


class World:
    def __init__(self, seed: int) -> None:
        assert 0 <= seed <= SEED_MAX, f"seed {seed} outside 0..{SEED_MAX}"
        self.seed = seed
        self.ids = Ids()
        self.trace: list[tuple[Any, ...]] = []
        self._rngs: dict[str, random.Random] = {}

    def rng(self, label: str) -> random.Random:
        """The RNG stream of one subsystem (created on first use, then reused)."""
        stream = self._rngs.get(label)
        if stream is None:
            stream = random.Random(derive_seed(self.seed, label))
            self._rngs[label] = stream
        return stream

    def streams(self) -> list[tuple[str, random.Random]]:
        """The RNG streams created so far, by label (part of what decides the future)."""
        return sorted(self._rngs.items())

    def fresh_rng(self, label: str) -> random.Random:
        """A copy of stream ``label`` as ``rng(label)`` first creates it, without creating it:
        to see what a draw would give (a sweep's crash digests) without spending it."""
        return random.Random(derive_seed(self.seed, label))

    def now(self) -> float:
        return trio.current_time()

    def record(self, kind: str, *fields: Any) -> None:
        self.trace.append((kind, round(self.now(), 9), *fields))

    def fingerprint(self) -> str:
        text = json.dumps(
            [FINGERPRINT_VERSION, self.trace], sort_keys=True, separators=(",", ":"), default=str
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# ``fake_workspace``'s memo: (generator seed, file count) -> files. A few entries per process
# (one per seed a sweep uses); Faker's own instance is built once, as building it costs about as
# much as a whole small run (it loads every provider).
_WORKSPACES: dict[tuple[int, int], dict[str, str]] = {}
_FAKERS: list[Any] = []


def fake_workspace(seed: int, count: int, factory: Callable[[], Any]) -> dict[str, str]:
    """``count`` generated ``.cfg`` files, a pure function of ``seed``: the same files every call,
    built once per process. ``factory`` makes a Faker instance (passed in so this module does not
    import faker); it is built on first use and re-seeded per miss, and a re-seeded instance draws
    exactly what a fresh one seeded alike would (its output depends on the seed only)."""
    key = (seed, count)
    files = _WORKSPACES.get(key)
    if files is None:
        if not _FAKERS:
            _FAKERS.append(factory())
        fake = _FAKERS[0]
        fake.seed_instance(seed)
        files = {
            f"{fake.word()}-{n}.cfg": "\n".join(f"{fake.word()} = {fake.pyint()}" for _ in range(3))
            for n in range(count)
        }
        _WORKSPACES[key] = files
    return dict(files)
