"""A zombie's append, stopped between its fence check and its write while another worker takes
the lease over: the interleaving a fence checked outside the append's transaction lets through.

A random ``SIGSTOP`` from the parent almost never lands in the microseconds between an append's
fence check and its write, so the fleet places one there on purpose (docs/architecture.md, 2.9):

- **the zombie** (the first worker to reach its seeded k-th append of work, while the fleet's
  ``--fenced-pauses`` tokens last; an append of work is a batch without ``lease_acquired``: a
  visit to a conversation already answered appends only that, and nobody would come to take
  such a conversation over): on that append, right
  after the store's fence check passed (a wrapper of the store object's ``_fence``, installed in
  the worker only), it notes ``fenced-pause`` in its trace and stops itself. In a correct store
  that instant is inside the append's critical section -- ``FileStore``'s OS lock, SQLite's
  ``BEGIN IMMEDIATE``, Postgres's locked lease row -- so no other worker can take the lease until
  the zombie has written; in a store that checks the fence outside it, nothing stops a takeover;
- **the parent** (``TakeoverDirector``) sees the stop (``/proc/PID/stat`` state ``T``), posts a
  hold file for the conversation and waits up to ``wait_s`` for a new owner;
- **the new owner**: a worker granted that conversation's lease at a newer epoch reads the log
  (its recovery), then, at its first append, finds the hold file, notes ``held`` and stops
  itself: the zombie's write is now due in the new owner's window (after its grant and recovery,
  before its first write: its own append would otherwise refuse the zombie's by sequence);
- the parent continues the zombie, waits for its ``fenced-append-done`` note (accepted or
  refused), then continues the new owner. With no new owner within ``wait_s`` (a correct store:
  every acquirer waits for the zombie's lock) the zombie is continued and writes under a lease
  that is still its own.

The judge's I8 check is then the new owner's view: a record of an older epoch beyond what the
new owner's recovery read was accepted after the newer epoch was granted
(``judge._appends_after_a_grant``).
"""

from __future__ import annotations

import contextvars
import json
import os
import random
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable.events import EventRecord, LeaseAcquired
from sim.targets.boundaries import Boundaries, read_trace

#: How long a worker waits for another's lock before it gives up with an error: FileStore's
#: ``OsFileSystem.lock_wait_s``, SQLite's busy timeout and Postgres's ``lock_timeout`` are 5 s.
LOCK_WAIT_S = 5.0
#: What a planned fence pause counts: the worker's appends of work (``work.append#k``).
WORK_APPEND = "work.append"
#: The appends of work a worker's planned fence pause is drawn from: each within its first
#: visit that serves an input (a conversation nobody has settled, so another worker will come
#: to take it over; such a visit appends far more than five batches of work).
FENCED_APPENDS = (2, 3, 4, 5)
#: The pause of the append this task is running, if it is the planned one (a worker thread
#: running the store's transaction inherits it: trio copies the context into the thread).
_PAUSE_AT_FENCE: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "pause_at_fence", default=None
)


def hold_path(fleet_dir: Path, conversation_id: str) -> Path:
    return fleet_dir / f"hold-{conversation_id}.json"


def stop_self() -> None:
    """``SIGSTOP`` to this process: every thread stops until the parent's ``SIGCONT``, and the
    calling thread before it runs one more instruction.

    Sent to this *thread* (``pthread_kill``), not the process: a process-directed stop is taken
    by whichever thread the kernel picks (the main thread, asleep in trio's ``epoll_wait``), and
    the caller -- a worker thread inside the append's transaction -- runs on until that thread
    has been scheduled and stops it in turn. On a loaded machine it ran the INSERT and the COMMIT
    first: the "zombie" wrote before it was stopped, a new owner took the lease while it stood
    still, and a correct Postgres store looked taken over. A thread-directed stop is taken by the
    caller itself on its way out of the system call, and stops the whole process from there."""
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def install_fence_hook(store: Any) -> None:
    """Wrap the store object's ``_fence`` (each store class has one, and the mutants call it
    too): when it returns -- the fence passed -- inside the planned append, stop there."""
    original = store._fence

    def fence(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        pause = _PAUSE_AT_FENCE.get()
        if pause is not None:
            pause()

    store._fence = fence


class WorkerPauses:
    """The worker's side: the planned pause at an append's fence, and the hold of a new owner."""

    def __init__(
        self, boundaries: Boundaries, fleet_dir: Path, *, process: str, seed: int, tokens: int
    ) -> None:
        self._boundaries = boundaries
        self._fleet_dir = fleet_dir
        self._tokens = tokens
        # k of this process's planned pause: a local generator, seeded by the fleet and process.
        self._k = random.Random(f"fenced:{seed}:{process}").choice(FENCED_APPENDS)
        self._paused = False
        self._work_appends = 0

    def pause_for(
        self, records: list[EventRecord], conversation_id: str, epoch: int
    ) -> Callable[[], None] | None:
        """The pause to run after this append's fence passed (None: not the planned one)."""
        if any(isinstance(r.event, LeaseAcquired) for r in records):
            return None
        self._work_appends += 1
        label = f"{WORK_APPEND}#{self._work_appends}"
        if self._work_appends != self._k or self._paused:
            return None

        def pause() -> None:
            """The fence passed: take a token (none left: another worker is the zombie)."""
            if not self._claim_token():
                return
            self._paused = True
            self._boundaries.note(
                kind="fenced-pause", label=label, conversation=conversation_id, epoch=epoch
            )
            stop_self()

        return pause

    def _claim_token(self) -> bool:
        """One of the fleet's ``tokens`` pauses, taken by whichever worker gets there first (an
        exclusive create: the race is the kernel's, the count is the plan's)."""
        for n in range(self._tokens):
            try:
                os.close(os.open(self._fleet_dir / f"fenced-{n}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            return True
        return False

    def armed(self, pause: Callable[[], None] | None) -> contextvars.Token[Any]:
        return _PAUSE_AT_FENCE.set(pause)

    def disarm(self, token: contextvars.Token[Any]) -> None:
        _PAUSE_AT_FENCE.reset(token)

    @property
    def paused(self) -> bool:
        return self._paused

    def hold_if_posted(self, conversation_id: str, epoch: int) -> None:
        """At a new owner's first append: if a zombie of an older epoch of this conversation is
        stopped at its fence, stop here until the parent has let the zombie write."""
        path = hold_path(self._fleet_dir, conversation_id)
        try:
            posted = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        if int(posted["epoch"]) >= epoch:
            return
        self._boundaries.note(
            kind="held", conversation=conversation_id, epoch=epoch, zombie=posted["process"]
        )
        stop_self()


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (Linux ``/proc``: state ``T``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError):
        return False  # exited: the parent's reaping deals with it
    return stat[stat.rindex(")") + 2] == "T"


def _notes(fleet_dir: Path, trace_name: str) -> list[dict[str, Any]]:
    return [r for r in read_trace(fleet_dir / trace_name) if r.get("t") == "note"]


@dataclass
class _Zombie:
    process: str
    pid: int
    conversation: str
    epoch: int
    since_s: float
    taker: str | None = None
    continued_s: float | None = None


@dataclass
class TakeoverDirector:
    """The parent's side: notices self-stopped workers and continues them in the order that
    puts the zombie's write into the new owner's window (module docstring)."""

    fleet_dir: Path
    wait_s: float
    trace_name: Callable[[str], str]
    say: Callable[[str], None]
    zombies: dict[str, _Zombie] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)  # stopped new owner -> pid
    record: list[dict[str, Any]] = field(default_factory=list)

    def self_stopped(self) -> set[str]:
        """The workers this director is ordering (the parent's own pauses leave them alone): a
        zombie until its append is over -- a second stop inside its critical section would keep
        the other workers waiting on its lock past their 5 s -- and the held new owners."""
        return {z.process for z in self.zombies.values()} | set(self.held)

    def quiet(self, now_s: float) -> bool:
        """Whether the parent's own pauses must wait: a worker may have queued on the zombie's
        lock since the zombie stopped, and a second stop in a row (of the zombie, or of the
        next holder of that lock) could make it wait past ``LOCK_WAIT_S``."""
        return bool(self.zombies) or any(now_s < r["at_s"] + LOCK_WAIT_S for r in self.record)

    def poll(self, live: list[Any], parent_stopped: set[str], now_s: float) -> None:
        """One look at every live worker, then whatever continuing is due."""
        known = {z.process for z in self.zombies.values() if z.continued_s is None}
        known |= set(self.held)
        for incarnation in live:
            if incarnation.name in parent_stopped or incarnation.name in known:
                continue
            if incarnation.popen is not None and _stopped(incarnation.popen.pid):
                self._noticed(incarnation.name, incarnation.popen.pid, now_s)
        for zombie in list(self.zombies.values()):
            self._advance(zombie, {i.name for i in live}, now_s)

    def _noticed(self, process: str, pid: int, now_s: float) -> None:
        notes = _notes(self.fleet_dir, self.trace_name(process))
        note = notes[-1] if notes else {}
        conversation = str(note.get("conversation", ""))
        if note.get("kind") == "fenced-pause":
            self.zombies[conversation] = _Zombie(
                process, pid, conversation, int(note["epoch"]), now_s
            )
            posted = {"process": process, "epoch": int(note["epoch"])}
            hold_path(self.fleet_dir, conversation).write_text(json.dumps(posted), "utf-8")
            self.say(f"{process} stopped itself between its fence check and its write")
            return
        zombie = self.zombies.get(conversation)
        if note.get("kind") == "held" and zombie is not None and zombie.continued_s is None:
            self.held[process] = pid
            zombie.taker = process
            self.say(f"{process} took {conversation} over (epoch {note['epoch']}); held")
            self._continue_zombie(zombie, now_s)
            return
        # A hold read just before it was withdrawn, or a stop nobody planned: nothing to order.
        self.say(f"{process} found stopped ({note.get('kind', 'no note')}); continued")
        os.kill(pid, signal.SIGCONT)

    def _continue_zombie(self, zombie: _Zombie, now_s: float) -> None:
        hold_path(self.fleet_dir, zombie.conversation).unlink(missing_ok=True)
        zombie.continued_s = now_s
        os.kill(zombie.pid, signal.SIGCONT)
        self.say(f"continue {zombie.process} (its write under epoch {zombie.epoch})")

    def _advance(self, zombie: _Zombie, live: set[str], now_s: float) -> None:
        if zombie.continued_s is None:
            if now_s - zombie.since_s > self.wait_s:
                self._continue_zombie(zombie, now_s)  # nobody could take over: a correct lock
            return
        notes = _notes(self.fleet_dir, self.trace_name(zombie.process))
        wrote = zombie.process not in live or any(
            n.get("kind") == "fenced-append-done" for n in notes
        )
        if not wrote and now_s - zombie.continued_s <= self.wait_s:
            return
        for process, pid in sorted(self.held.items()):
            os.kill(pid, signal.SIGCONT)
            self.say(f"continue {process} (the new owner)")
        self.held.clear()
        self.record.append(
            {
                "process": zombie.process,
                "conversation": zombie.conversation,
                "epoch": zombie.epoch,
                "taken_over_by": zombie.taker,
                "at_s": round(zombie.since_s, 3),
            }
        )
        del self.zombies[zombie.conversation]

    def release_all(self) -> None:
        """At the end (the deadline, or the parent interrupted): no worker is left stopped."""
        for zombie in self.zombies.values():
            if zombie.continued_s is None:
                hold_path(self.fleet_dir, zombie.conversation).unlink(missing_ok=True)
        self.zombies.clear()
        self.held.clear()
