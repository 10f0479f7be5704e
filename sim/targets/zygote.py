"""A warm zygote per target sweep: one helper process imports the framework (and the user's
app's libraries) once, then ``fork()``s every child of every crash point (AFL's fork server;
``multiprocessing``'s forkserver preload is the standard library's form of it).

Why: a real-process crash point costs two fresh interpreters, each importing the framework
before it does anything (about half of a LangGraph point). A forked child starts with the
imports done, so a point costs what the runtime does, not what Python's import system does.

Forking is sound only from a quiet process, so the zygote refuses (``unforkable``) when its
preload left a thread running or a descriptor open beyond stdin, stdout and stderr (a started
runtime, an open database connection, an event loop's self-pipe): a fork copies those in a state
nobody can use. A refused zygote is not an error: the sweep falls back to a fresh interpreter
per child and the report says why, once (``reference_outcome["children"]``). A forked child gets
what a fresh interpreter would have: the environment it is given, its own stdio, a reseeded
``random`` and default signal handlers; ``PYTHONHASHSEED`` is the zygote's, fixed by its parent.

Protocol (JSON lines over the zygote's stdin/stdout): the parent writes ``{"preload": [...]}``
and reads ``{"ready": true}`` or ``{"refused": WHY}``; then per child it writes ``{"argv",
"env", "out", "err"}`` and reads ``{"pid": N}`` then ``{"status": S}`` (S as
``subprocess.Popen.returncode``: negative for a signal). The parent bounds every wait and kills
a child that overruns its time, or the zygote that stops answering.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: Seconds the zygote may take to import its preload (a framework's import tree, on a loaded
#: 2-core machine) and, later, to fork a child and say so.
READY_TIMEOUT_S = 120.0
FORK_TIMEOUT_S = 30.0
#: Bytes read from the zygote's answers at a time (an answer is one short JSON line).
READ_BYTES = 65536


@dataclass(frozen=True)
class ChildExit:
    """How a forked child ended: its status (negative: killed by that signal) and its stderr."""

    returncode: int
    stderr: bytes


class ZygoteRefused(Exception):
    """The zygote cannot fork safely (``unforkable``): run fresh interpreters instead."""


class Zygote:
    """The parent's handle on one zygote process: started (and its preload imported) when made,
    killed with any child of it by ``close`` or at the end of a ``with`` block. Raises
    ``ZygoteRefused`` when it cannot fork safely, ``TimeoutError`` when its preload overruns
    ``READY_TIMEOUT_S``."""

    def __init__(
        self,
        preload: tuple[str, ...],
        *,
        workdir: Path,
        env: dict[str, str],
        python: str = sys.executable,
    ) -> None:
        """``python``: the interpreter it runs under, and so its children (a target's own
        environment's, ``sim.targets.environments``)."""
        self.workdir = workdir
        self._children = 0
        self._in_flight: int | None = None
        self._unread = b""  # answer bytes read from the pipe and not yet returned (``_receive``)
        self._log = open(workdir / "zygote.err", "wb")  # noqa: SIM115 -- closed in close()
        self._proc = subprocess.Popen(
            [python, "-m", "sim.targets.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )
        try:
            self._send({"preload": list(preload)})
            reply = self._receive(READY_TIMEOUT_S)
            if "refused" in reply:
                raise ZygoteRefused(str(reply["refused"]))
            assert reply.get("ready") is True, reply
        except BaseException:  # an interrupt too: no zygote outlives a failed start
            self.close()
            raise

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, argv: list[str], *, env: dict[str, str], timeout_s: float) -> ChildExit:
        """Fork one child running ``python -m`` ``argv`` and wait for it; ``TimeoutError`` (the
        child killed) if it overruns ``timeout_s``."""
        if self._proc.poll() is not None or self._log.closed:
            raise ZygoteRefused(f"the zygote died: {self._stderr_tail()}")
        self._children += 1
        out = self.workdir / f"child-{self._children}.out"
        err = self.workdir / f"child-{self._children}.err"
        self._send({"argv": argv, "env": env, "out": str(out), "err": str(err)})
        try:
            pid = int(self._receive(FORK_TIMEOUT_S)["pid"])
        except TimeoutError:
            # Its answer may still come, and would be read as the next child's: no next child.
            self.close()
            raise ZygoteRefused(f"the zygote did not fork within {FORK_TIMEOUT_S:g} s") from None
        # In flight until its status comes back: an interrupt before then leaves it to
        # ``close``, which kills it (it is the zygote's child, not this process's: killing the
        # zygote alone would leave it running, writing into directories being removed).
        self._in_flight = pid
        try:
            reply = self._receive(timeout_s)
        except TimeoutError:
            _kill(pid)
            self._receive(FORK_TIMEOUT_S)  # the zygote reaps it and reports the kill
            self._in_flight = None
            raise
        self._in_flight = None
        stderr = err.read_bytes() if err.exists() else b""
        for path in (out, err):
            path.unlink(missing_ok=True)
        return ChildExit(int(reply["status"]), stderr)

    def close(self) -> None:
        """Kill a child still running and the zygote: nothing outlives the sweep."""
        if self._in_flight is not None:
            _kill(self._in_flight)
            _wait_gone(self._in_flight)
            self._in_flight = None
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                # A request the dead zygote never read is still buffered: closing flushes it.
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()
        self._log.close()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise ZygoteRefused(f"the zygote died: {self._stderr_tail()}") from None

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        """The zygote's next answer line, within ``timeout_s``. Read from the pipe's descriptor
        into this handle's own buffer: a buffered ``readline`` may take the next answer too
        (``{"pid"}`` and ``{"status"}`` of a child that ended at once arrive together), and a
        ``select`` on the descriptor would then wait for an answer already read."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._unread:
            left_s = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left_s, 0.0))
            if not ready:
                raise TimeoutError(f"the zygote did not answer within {timeout_s:g} s")
            chunk = os.read(fd, READ_BYTES)
            if not chunk:
                raise ZygoteRefused(f"the zygote died: {self._stderr_tail()}")
            self._unread += chunk
        line, _, self._unread = self._unread.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _stderr_tail(self) -> str:
        if not self._log.closed:
            self._log.flush()
        lines = (self.workdir / "zygote.err").read_text("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "no output"


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


#: Seconds ``close`` waits for a killed child to be gone (a SIGKILL takes effect at once; the
#: bound is for a machine too loaded to schedule the exit).
GONE_TIMEOUT_S = 5.0


def _wait_gone(pid: int) -> None:
    """Until the killed child ``pid`` (the zygote's, so not reapable here) runs no more: gone,
    or a zombie its parent has not reaped yet; at most ``GONE_TIMEOUT_S``."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return  # gone (or no /proc: nothing more to wait on)
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


# -- the zygote's side ------------------------------------------------------------------------


def unforkable() -> str | None:
    """Why this process must not fork (a thread other than this one, a descriptor open beyond
    0-2), or None. Checked after the preload and before every fork: an import that started a
    thread lazily is caught at the next child."""
    if threading.active_count() > 1:
        names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
        return f"the preload left {len(names)} thread(s) running ({', '.join(names)})"
    fd_dir = Path("/proc/self/fd")
    if fd_dir.is_dir():
        # The listing's own descriptor shows in it and is closed once it returns: keep only
        # the descriptors still open afterwards.
        extra = [fd for fd in sorted(int(n) for n in os.listdir(fd_dir)) if fd > 2 and _open(fd)]
        if extra:
            targets = ", ".join(_describe_fd(fd) for fd in extra[:3])
            return f"the preload left {len(extra)} descriptor(s) open ({targets})"
    return None


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _describe_fd(fd: int) -> str:
    try:
        return f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}"
    except OSError:
        return str(fd)


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """The zygote's loop: import the preload, say whether it can fork, then fork a child per
    request until the parent closes the pipe."""
    first = json.loads(stdin.readline() or b"{}")
    for module in first.get("preload", []):
        try:
            __import__(module)
        except Exception as exc:  # the user's library, say: a fresh interpreter will say it too
            return _answer(stdout, {"refused": f"importing {module} raised {exc!r}"[:300]})
    why = unforkable()
    if why is not None:
        return _answer(stdout, {"refused": why})
    _answer(stdout, {"ready": True})
    for line in stdin:
        request = json.loads(line)
        why = unforkable()
        if why is not None:  # the zygote never runs a child's code, but a lazy import might
            raise SystemExit(f"zygote: {why}")
        pid = os.fork()
        if pid == 0:
            _child(request)  # never returns
        _answer(stdout, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _answer(stdout, {"status": os.waitstatus_to_exitcode(status)})
    return 0


def _answer(stdout: IO[bytes], message: dict[str, Any]) -> int:
    stdout.write(json.dumps(message).encode() + b"\n")
    stdout.flush()
    return 0


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become what ``python -m ARGV`` in a fresh interpreter would be, run
    it, and leave with ``os._exit`` (never back into the zygote's loop)."""
    code = 70  # EX_SOFTWARE: the child's own code raised past its main
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()  # a fresh interpreter's draws, not the zygote's copied state
        argv: list[str] = request["argv"]
        sys.argv = [argv[0], *argv[1:]]
        code = _run_module(argv[0], argv[1:])
    except Exception:  # what a fresh interpreter prints on the way out, then status 70
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run_module(module: str, args: list[str]) -> int:
    """``main(args)`` of ``module`` (``sim.targets.child``'s, for a sweep), as its ``__main__``
    would run it: a ``SystemExit`` is the status it asked for."""
    main = importlib.import_module(module).main
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    return code if isinstance(code, int) else (0 if code is None else 1)


if __name__ == "__main__":
    sys.exit(serve(sys.stdin.buffer, sys.stdout.buffer))
