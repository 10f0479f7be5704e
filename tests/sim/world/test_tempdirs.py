"""The stale-directory cleaner (sim/world/tempdirs.py) removes a directory only when its owner is
provably gone, never one a user kept, never one it cannot tell about -- and a fleet's directory
(``durable-sim workers``) is one of its own, kept when asked."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from sim.targets.workers.fleet import keep_fleet_dir, make_fleet_dir
from sim.world import tempdirs


def _age(*directories: str | Path) -> None:
    """Make each directory look untouched for longer than the cleaner waits."""
    old_s = time.time() - tempdirs.STALE_AFTER_S - 1
    for directory in directories:
        os.utime(directory, (old_s, old_s))


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a process id that no longer exists
    return pid


def _owned_by(parent: Path, name: str, marker: str) -> Path:
    directory = parent / name
    directory.mkdir()
    (directory / tempdirs.OWNER_FILE).write_text(marker)
    return directory


def test_a_directory_records_its_owner_inside_not_in_its_name(tmp_path: Path) -> None:
    made = Path(tempdirs.make("fork", parent=str(tmp_path)))
    assert made.name.startswith("durable-sim-fork-") and str(os.getpid()) not in made.name
    pid, start = (made / tempdirs.OWNER_FILE).read_text().split()
    assert int(pid) == os.getpid() and int(start) == tempdirs.process_start(os.getpid())


def test_only_directories_whose_owner_is_provably_gone_are_removed(tmp_path: Path) -> None:
    me, my_start = os.getpid(), tempdirs.process_start(os.getpid())
    assert my_start is not None
    dead = _owned_by(tmp_path, "durable-sim-fork-dead", f"{_dead_pid()} 12345\n")
    reused = _owned_by(tmp_path, "durable-sim-fork-reused", f"{me} {my_start - 1}\n")
    live = _owned_by(tmp_path, "durable-sim-fork-live", f"{me} {my_start}\n")
    unknown = _owned_by(tmp_path, "durable-sim-fork-unknown", f"{_dead_pid()} -\n")
    garbage = _owned_by(tmp_path, "durable-sim-fork-garbage", "not a marker\n")
    unmarked = tmp_path / f"durable-sim-fork-{_dead_pid()}-old"  # an older version's name
    unmarked.mkdir()
    kept = _owned_by(tmp_path, "durable-sim-fleet-seed0-kept", f"{_dead_pid()} 12345\n")
    tempdirs.keep(kept)
    other = _owned_by(tmp_path, "someone-else", f"{_dead_pid()} 12345\n")
    fresh = _owned_by(tmp_path, "durable-sim-fork-fresh", f"{_dead_pid()} 12345\n")
    _age(dead, reused, live, unknown, garbage, unmarked, kept, other)
    removed = tempdirs.remove_stale(str(tmp_path))
    # The process id of ``reused`` is alive, but it is another process than the one that made
    # the directory (another start time): its owner is gone just the same.
    assert removed == [str(dead), str(reused)]
    for survivor in (live, unknown, garbage, unmarked, kept, other):
        assert survivor.exists(), survivor
    assert fresh.exists(), "a recently touched directory may belong to another pid namespace"


def test_a_number_in_a_name_is_never_read_as_an_owner(tmp_path: Path) -> None:
    """``durable-sim workers --seed 31337 --keep`` used to leave ``durable-sim-fleet-31337-…``,
    which the cleaner read as a dead owner's (and ``-0-`` as a live one's, for ever)."""
    for seed in (31337, 0):
        (tmp_path / f"durable-sim-fleet-{seed}-abc").mkdir()
    _age(*tmp_path.iterdir())
    assert tempdirs.remove_stale(str(tmp_path)) == []


def test_without_proc_nothing_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = _owned_by(tmp_path, "durable-sim-fork-dead", f"{_dead_pid()} 12345\n")
    _age(dead)
    monkeypatch.setattr(tempdirs, "_PROC", tmp_path / "no-proc")
    assert tempdirs.remove_stale(str(tmp_path)) == []
    assert dead.exists()


def test_the_start_time_is_read_after_the_process_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Field 22 of ``/proc/PID/stat``, counted after the name's last ``)``: a name may hold
    spaces and parentheses."""
    fields = " ".join(str(n) for n in range(3, 53))  # field n holds n
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "stat").write_text(f"7 (a (b) c) {fields}\n")
    monkeypatch.setattr(tempdirs, "_PROC", tmp_path)
    assert tempdirs.process_start(7) == 22
    assert tempdirs.process_start(8) is None


def test_a_fleet_directory_is_owned_and_a_kept_one_is_never_removed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fleet = make_fleet_dir(31337)
    assert fleet.parent == tmp_path and fleet.name.startswith("durable-sim-fleet-seed31337-")
    assert make_fleet_dir(-2).name.startswith("durable-sim-fleet-seedm2-")
    # The owner (this process) is gone, as after a kill: the cleaner may take it...
    (fleet / tempdirs.OWNER_FILE).write_text(f"{_dead_pid()} 12345\n")
    _age(fleet)
    assert tempdirs.owner_gone(fleet)
    # ...unless it was kept.
    keep_fleet_dir(fleet)
    _age(fleet)
    assert str(fleet) not in tempdirs.remove_stale(str(tmp_path))
    assert fleet.exists()


@pytest.mark.parametrize("other_thread", [False, True])
def test_an_interrupt_while_a_directory_is_made_leaves_no_unmarked_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other_thread: bool
) -> None:
    """A Ctrl-C between creating the directory and writing its marker left it empty and
    unmarked: the cleaner keeps such a directory for ever. The signal now waits until the
    directory is marked, and the interrupt it raises then removes it -- also when another
    thread of the process, which does not block the signal, is the one the kernel hands it to
    (a pytest-xdist worker with a thread an earlier test left)."""
    import signal
    import threading

    stop = threading.Event()
    if other_thread:
        helper = threading.Thread(target=stop.wait, daemon=True)
        helper.start()

    real = tempfile.mkdtemp

    def interrupted(**kwargs: Any) -> str:
        made = real(**kwargs)
        if other_thread:  # the kernel hands the Ctrl-C to a thread that does not block it
            signal.pthread_kill(helper.ident or 0, signal.SIGINT)
            time.sleep(0.2)  # time for it to arrive while the directory is still unmarked
        else:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, right after the directory exists
        return str(made)

    monkeypatch.setattr(tempfile, "mkdtemp", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            tempdirs.make("fork", parent=str(tmp_path))
    finally:
        if other_thread:
            stop.set()
    assert list(tmp_path.iterdir()) == []


def test_a_stopped_command_removes_what_it_made_and_did_not_keep(tmp_path: Path) -> None:
    """``remove_own`` (the command line calls it when it stops): a directory made just before
    its owner entered the ``try`` that removes it is gone too; a kept one stays."""
    made = Path(tempdirs.make("fork", parent=str(tmp_path)))
    kept = Path(tempdirs.make("fleet", parent=str(tmp_path), label="seed0"))
    tempdirs.keep(kept)
    foreign = _owned_by(tmp_path, "durable-sim-fork-foreign", f"{_dead_pid()} 12345\n")
    assert str(made) in tempdirs.remove_own()
    assert not made.exists() and kept.exists() and foreign.exists()
    assert tempdirs.remove_own() == []  # each directory once
