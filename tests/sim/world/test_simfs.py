"""SimFS: the page-cache model, its power-loss semantics, and the atomic-write protocol."""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable

import pytest

from sim.world.fs import SimFS

SEEDS = range(64)
OLD = b"old content " * 10
NEW = b"NEW CONTENT " * 100  # longer than a block, so a torn copy would be visible


def durable_file(fs: SimFS, path: str, data: bytes) -> None:
    """Write a file and make both its content and its directory entry durable."""
    fs.write(path, data)
    fs.fsync(path)
    fs.fsync_dir(path.rsplit("/", 1)[0] or "/")


def new_fs() -> SimFS:
    fs = SimFS()
    fs.makedirs("/d")
    return fs


def after_power_loss(setup: Callable[[SimFS], None], seed: int) -> SimFS:
    fs = new_fs()
    setup(fs)
    fs.power_loss(random.Random(seed))
    return fs


# -- the port ------------------------------------------------------------------------------------


def test_implements_the_filesystem_port_exactly() -> None:
    from durable.ports import FileSystem, OsFileSystem  # here: collect the rest without durable

    names = [n for n in vars(FileSystem) if not n.startswith("_")]
    assert sorted(names) == sorted(
        [
            "makedirs",
            "exists",
            "read",
            "size",
            "write",
            "append",
            "truncate",
            "fsync",
            "rename",
            "fsync_dir",
            "listdir",
            "unlink",
            "exclusive",
        ]
    )
    for name in names:
        ours = inspect.signature(getattr(SimFS, name))
        theirs = inspect.signature(getattr(OsFileSystem, name))
        assert list(ours.parameters) == list(theirs.parameters), name
        assert not inspect.iscoroutinefunction(getattr(SimFS, name)), name
    port: FileSystem = SimFS()  # type-checks structurally
    assert port.exists("/")


def test_basic_operations_in_the_current_view() -> None:
    fs = SimFS()
    fs.makedirs("/a/b")
    assert fs.exists("/a") and fs.exists("/a/b") and fs.exists("/")
    assert not fs.exists("/a/c") and not fs.exists("/x/y")
    fs.write("/a/b/f", b"hello")
    fs.append("/a/b/f", b" world")
    assert fs.read("/a/b/f") == b"hello world"
    assert fs.size("/a/b/f") == 11
    fs.append("/a/b/g", b"new")  # append creates
    fs.write("/a/b/f", b"x")  # write truncates
    assert fs.read("/a/b/f") == b"x"
    fs.truncate("/a/b/g", 1)
    assert fs.read("/a/b/g") == b"n"
    fs.truncate("/a/b/g", 3)  # extending fills with zeros, like POSIX
    assert fs.read("/a/b/g") == b"n\x00\x00"
    assert fs.listdir("/a/b") == ["f", "g"]
    assert fs.listdir("/a") == ["b"]
    fs.rename("/a/b/g", "/a/b/f")
    assert fs.listdir("/a/b") == ["f"]
    assert fs.read("/a/b/f") == b"n\x00\x00"
    fs.unlink("/a/b/f")
    assert fs.listdir("/a/b") == []
    assert fs.snapshot() == {}


def test_relative_and_absolute_paths_name_the_same_file() -> None:
    fs = SimFS()
    fs.makedirs("data/x")
    fs.write("/data/x/f", b"1")
    assert fs.read("data/x/f") == b"1"
    assert fs.read("/data//x/./f") == b"1"
    assert fs.snapshot() == {"/data/x/f": b"1"}
    with pytest.raises(ValueError):
        fs.read("/data/../data/x/f")


def test_errors_match_the_os() -> None:
    fs = new_fs()
    fs.write("/d/f", b"1")
    with pytest.raises(FileNotFoundError):
        fs.read("/d/missing")
    with pytest.raises(FileNotFoundError):
        fs.size("/d/missing")
    with pytest.raises(FileNotFoundError):
        fs.fsync("/d/missing")
    with pytest.raises(FileNotFoundError):
        fs.unlink("/d/missing")
    with pytest.raises(FileNotFoundError):
        fs.rename("/d/missing", "/d/g")
    with pytest.raises(FileNotFoundError):
        fs.truncate("/d/missing", 0)
    with pytest.raises(FileNotFoundError):
        fs.write("/nodir/f", b"1")
    with pytest.raises(FileNotFoundError):
        fs.listdir("/nodir")
    with pytest.raises(FileNotFoundError):
        fs.fsync_dir("/nodir")
    with pytest.raises(NotADirectoryError):
        fs.write("/d/f/g", b"1")
    with pytest.raises(NotADirectoryError):
        fs.listdir("/d/f")
    with pytest.raises(NotADirectoryError):
        fs.fsync_dir("/d/f")
    with pytest.raises(IsADirectoryError):
        fs.read("/d")
    with pytest.raises(IsADirectoryError):
        fs.write("/d", b"1")
    with pytest.raises(IsADirectoryError):
        fs.unlink("/d")
    with pytest.raises(IsADirectoryError):
        fs.rename("/d/f", "/d")
    with pytest.raises(FileExistsError):
        fs.makedirs("/d/f")
    fs.makedirs("/d")  # exist_ok
    assert fs.read("/d/f") == b"1"  # nothing above changed anything


def test_stats_count_calls_per_kind() -> None:
    fs = new_fs()
    fs.write("/d/f", b"1")
    fs.append("/d/f", b"2")
    fs.append("/d/f", b"3")
    fs.fsync("/d/f")
    fs.fsync_dir("/d")
    with pytest.raises(FileNotFoundError):
        fs.read("/d/nope")
    fs.process_crash()
    fs.power_loss(random.Random(0))
    assert fs.stats["makedirs"] == 1
    assert fs.stats["write"] == 1
    assert fs.stats["append"] == 2
    assert fs.stats["fsync"] == 1
    assert fs.stats["fsync_dir"] == 1
    assert fs.stats["read"] == 1
    assert fs.stats["process_crash"] == 1
    assert fs.stats["power_loss"] == 1
    assert fs.stats["rename"] == 0


# -- power loss ----------------------------------------------------------------------------------


def test_power_loss_drops_unsynced_data() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", OLD)
        fs.write("/d/f", b"never synced")

    results = {after_power_loss(setup, seed).read("/d/f") for seed in SEEDS}
    new = b"never synced"
    # A rewrite in place: old, new, empty (ext4's zero-length file), or a block-wise mix with
    # the old or the new length (one block here: the old or new block cut or zero-padded).
    mixes = {OLD[: len(new)], new + bytes(len(OLD) - len(new))}
    assert {OLD, new, b""} <= results <= {OLD, new, b""} | mixes


def test_power_loss_after_a_multi_block_rewrite_can_mix_blocks() -> None:
    old, new = b"o" * 2048, b"n" * 2048

    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", old)
        fs.write("/d/f", new)

    results = {after_power_loss(setup, seed).read("/d/f") for seed in SEEDS}
    assert {old, new, b""} < results
    mixed = [r for r in results if r not in (old, new, b"")]
    assert mixed and all(len(r) == 2048 for r in mixed)
    for content in mixed:  # every 512-byte block is wholly old or wholly new
        blocks = {content[i : i + 512] for i in range(0, 2048, 512)}
        assert blocks <= {b"o" * 512, b"n" * 512} and len(blocks) == 2


def test_a_short_rewrite_never_zeroes_a_block_it_did_not_reach() -> None:
    """Truncated to zero and given one short block (SQLite's log restarted by a TRUNCATE
    checkpoint, then its new header): with the old length kept, every block past the new content
    is the old block -- the rewrite never wrote it, and a truncate lands whole or not at all. A
    zero block there once made an old log a valid prefix that recovery replayed over newer pages."""
    old, new = b"o" * 2048, b"h" * 32

    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", old)
        fs.truncate("/d/f", 0)
        fs.write_at("/d/f", 0, new)

    results = {after_power_loss(setup, seed).read("/d/f") for seed in range(200)}
    mixed = [r for r in results if len(r) == 2048 and r != old]
    assert mixed  # the new header over the old blocks
    for content in results:
        if len(content) == 2048:
            assert content[512:] == old[512:], content[:40]


def test_a_shrinking_truncate_is_never_emptied_by_power_loss() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", OLD)
        fs.truncate("/d/f", 10)

    results = {after_power_loss(setup, seed).read("/d/f") for seed in SEEDS}
    assert results == {OLD, OLD[:10]}

    def setup_append(fs: SimFS) -> None:
        durable_file(fs, "/d/log", b"")
        fs.append("/d/log", b"x" * 100)  # within the first block: nothing to tear at

    results = {after_power_loss(setup_append, seed).read("/d/log") for seed in SEEDS}
    damaged = {r for r in results if r.lower() == b"x" * 100 and r.count(b"X") == 1}
    assert results - damaged == {b"", b"x" * 100}  # plus, at times, one damaged character


def test_power_loss_keeps_fsynced_data() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", OLD)
        fs.append("/d/f", b"more")
        fs.fsync("/d/f")
        durable_file(fs, "/d/g", NEW)

    for seed in SEEDS:
        fs = after_power_loss(setup, seed)
        assert fs.snapshot() == {"/d/f": OLD + b"more", "/d/g": NEW}


def test_power_loss_undoes_an_unfsynced_rename() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/state", OLD)
        durable_file(fs, "/d/state.tmp", NEW)
        fs.rename("/d/state.tmp", "/d/state")
        assert fs.snapshot() == {"/d/state": NEW}

    for seed in SEEDS:
        fs = after_power_loss(setup, seed)
        assert fs.snapshot() == {"/d/state": OLD, "/d/state.tmp": NEW}
        assert fs.listdir("/d") == ["state", "state.tmp"]


def test_power_loss_keeps_a_rename_followed_by_fsync_dir() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/state", OLD)
        durable_file(fs, "/d/state.tmp", NEW)
        fs.rename("/d/state.tmp", "/d/state")
        fs.fsync_dir("/d")

    for seed in SEEDS:
        assert after_power_loss(setup, seed).snapshot() == {"/d/state": NEW}


def test_power_loss_undoes_an_unfsynced_unlink_and_keeps_a_synced_one() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/a", b"a")
        durable_file(fs, "/d/b", b"b")
        fs.unlink("/d/a")
        fs.unlink("/d/b")
        fs.fsync_dir("/d")
        durable_file(fs, "/d/c", b"c")
        fs.unlink("/d/c")

    for seed in SEEDS:
        assert after_power_loss(setup, seed).snapshot() == {"/d/c": b"c"}


def test_power_loss_tears_an_unsynced_append_at_a_block_boundary() -> None:
    head = b"h" * 100
    tail = bytes(range(256)) * 8  # 2048 bytes: boundaries at 512, 1024, 1536, 2048

    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/log", head)
        fs.append("/d/log", tail)

    full = head + tail
    seen: dict[str, list[int]] = {"durable": [], "torn": [], "all": [], "damaged": []}
    for seed in range(200):
        fs = new_fs()
        setup(fs)
        outcome = fs.power_loss(random.Random(seed))
        data = fs.read("/d/log")
        if len(data) == len(full) and data != full:
            kind = "damaged"
            diff = [i for i in range(len(full)) if data[i] != full[i]]
            assert len(diff) == 1 and diff[0] >= len(head)  # one byte, in the unsynced part
            assert data[diff[0]] ^ 0x20 == full[diff[0]] and chr(full[diff[0]]).isalpha()
            assert outcome == {"/d/log": f"damaged:{diff[0]}"}
            seen[kind].append(seed)
            continue
        assert full.startswith(data)
        if data == head:
            kind = "durable"
            assert outcome == {"/d/log": "durable"}
        elif data == full:
            kind = "all"
            assert outcome == {"/d/log": "all"}
        else:
            kind = "torn"
            assert len(data) % 512 == 0
            assert len(head) < len(data) < len(full)
            assert outcome == {"/d/log": f"torn:{len(data)}"}
        seen[kind].append(seed)
        # after power loss the current state is the durable state
        assert fs.durable_snapshot() == fs.snapshot()
    assert all(seen.values()), seen
    torn_lengths = set()
    for seed in seen["torn"]:
        fs = new_fs()
        setup(fs)
        fs.power_loss(random.Random(seed))
        torn_lengths.add(fs.size("/d/log"))
    assert torn_lengths == {512, 1024, 1536, 2048}


def test_block_size_is_a_constructor_parameter() -> None:
    lengths = set()
    for seed in range(200):
        fs = SimFS(block_size_bytes=4096)
        fs.makedirs("/d")
        durable_file(fs, "/d/log", b"")
        fs.append("/d/log", b"z" * 10_000)
        fs.power_loss(random.Random(seed))
        lengths.add(fs.size("/d/log"))
    assert lengths == {0, 4096, 8192, 10_000}
    with pytest.raises(ValueError):
        SimFS(block_size_bytes=0)


def test_a_file_created_but_never_dir_fsynced_disappears() -> None:
    def setup(fs: SimFS) -> None:
        fs.makedirs("/d/sub")
        fs.write("/d/sub/new", b"content")
        fs.fsync("/d/sub/new")  # content durable, entry not
        durable_file(fs, "/d/kept", b"k")

    for seed in SEEDS:
        fs = after_power_loss(setup, seed)
        assert not fs.exists("/d/sub/new")
        assert fs.exists("/d/sub")  # directories are durable once made
        assert fs.listdir("/d/sub") == []
        assert fs.snapshot() == {"/d/kept": b"k"}


def test_process_crash_keeps_everything() -> None:
    fs = new_fs()
    durable_file(fs, "/d/a", b"a")
    fs.append("/d/a", b"unsynced")
    fs.write("/d/new", b"never synced, never dir-synced")
    fs.write("/d/t", b"t")
    fs.rename("/d/t", "/d/a2")
    before = fs.snapshot()
    fs.process_crash()
    assert fs.snapshot() == before
    assert fs.has_pending()


def test_power_loss_is_deterministic_for_a_seed() -> None:
    def setup(fs: SimFS) -> None:
        fs.makedirs("/d/x")
        for i in range(10):
            durable_file(fs, f"/d/x/f{i}", b"s" * (i * 100))
            fs.append(f"/d/x/f{i}", bytes([i]) * 3000)
        fs.write("/d/x/unsynced-entry", b"u" * 2000)
        fs.rename("/d/x/f3", "/d/x/f3-moved")

    for seed in SEEDS:
        results = []
        for _ in range(2):
            fs = new_fs()
            setup(fs)
            outcome = fs.power_loss(random.Random(seed))
            results.append((outcome, fs.snapshot(), fs.durable_snapshot()))
        assert results[0] == results[1]
    distinct = {repr(after_power_loss(setup, seed).snapshot()) for seed in SEEDS}
    assert len(distinct) > 10  # the seed matters


def test_current_equals_durable_after_power_loss_for_random_programs() -> None:
    """Random op sequences: names revert exactly to the durable names; contents are sound."""
    names = ["a", "b", "c", "sub/a", "sub/b"]
    for seed in range(300):
        r = random.Random(seed)
        fs = SimFS(block_size_bytes=16)
        fs.makedirs("/d/sub")
        for _ in range(r.randrange(1, 30)):
            op = r.choice(["write", "append", "truncate", "fsync", "rename", "fsync_dir", "unlink"])
            path = "/d/" + r.choice(names)
            try:
                if op == "write":
                    fs.write(path, bytes([r.randrange(256)]) * r.randrange(60))
                elif op == "append":
                    fs.append(path, bytes([r.randrange(256)]) * r.randrange(60))
                elif op == "truncate":
                    fs.truncate(path, r.randrange(80))
                elif op == "fsync":
                    fs.fsync(path)
                elif op == "rename":
                    fs.rename(path, "/d/" + r.choice(names))
                elif op == "fsync_dir":
                    fs.fsync_dir(r.choice(["/d", "/d/sub"]))
                else:
                    fs.unlink(path)
            except FileNotFoundError:
                pass
        durable_before = fs.durable_snapshot()
        outcome = fs.power_loss(r)
        after = fs.snapshot()
        assert after == fs.durable_snapshot()
        assert not fs.has_pending()
        assert list(after) == list(durable_before)  # the same names survive, nothing else
        for path, content in after.items():
            kind = outcome.get(path)
            if kind is None or kind == "durable":
                assert content == durable_before[path]
            if kind is not None and kind.startswith("torn:"):
                assert len(content) % 16 == 0
                assert content.startswith(durable_before[path])
        # a second power loss with nothing pending changes nothing
        assert fs.power_loss(r) == {}
        assert fs.snapshot() == after


def test_fsynced_files_survive_after_content_was_rewritten_and_synced_again() -> None:
    """The durable-prefix shortcut must not leak: fsync, overwrite, shrink, lose power."""
    for seed in SEEDS:
        fs = new_fs()
        durable_file(fs, "/d/f", b"0123456789" * 100)
        fs.append("/d/f", b"tail")
        fs.fsync("/d/f")
        fs.truncate("/d/f", 5)
        fs.append("/d/f", b"X" * 2000)
        fs.power_loss(random.Random(seed))
        assert fs.read("/d/f") in {b"0123456789" * 100 + b"tail", b"01234" + b"X" * 2000}


def test_durable_snapshot_reports_what_is_on_disk() -> None:
    fs = new_fs()
    durable_file(fs, "/d/a", b"a1")
    fs.append("/d/a", b"a2")
    fs.write("/d/b", b"b")
    fs.fsync("/d/b")
    assert fs.snapshot() == {"/d/a": b"a1a2", "/d/b": b"b"}
    assert fs.durable_snapshot() == {"/d/a": b"a1"}
    fs.fsync_dir("/d")
    assert fs.durable_snapshot() == {"/d/a": b"a1", "/d/b": b"b"}


def test_cross_directory_rename_is_durable_per_directory() -> None:
    fs = SimFS()
    fs.makedirs("/x")
    fs.makedirs("/y")
    durable_file(fs, "/x/f", b"f")
    fs.rename("/x/f", "/y/f")
    fs.fsync_dir("/y")  # only the destination: the source name is still durable
    fs.power_loss(random.Random(0))
    assert fs.snapshot() == {"/x/f": b"f", "/y/f": b"f"}

    fs = SimFS()
    fs.makedirs("/x")
    fs.makedirs("/y")
    durable_file(fs, "/x/f", b"f")
    fs.rename("/x/f", "/y/f")
    fs.fsync_dir("/x")
    fs.fsync_dir("/y")
    fs.power_loss(random.Random(0))
    assert fs.snapshot() == {"/y/f": b"f"}


# -- the atomic-write protocol ---------------------------------------------------------------------


ATOMIC_STEPS: list[Callable[[SimFS], None]] = [
    lambda fs: fs.write("/d/state.tmp", NEW),
    lambda fs: fs.fsync("/d/state.tmp"),
    lambda fs: fs.rename("/d/state.tmp", "/d/state"),
    lambda fs: fs.fsync_dir("/d"),
]


@pytest.mark.parametrize("prefix", range(len(ATOMIC_STEPS) + 1))
@pytest.mark.parametrize("existed", [True, False])
def test_atomic_write_protocol_survives_power_loss_after_every_step(
    prefix: int, existed: bool
) -> None:
    outcomes = set()
    for seed in SEEDS:
        fs = new_fs()
        if existed:
            durable_file(fs, "/d/state", OLD)
        for step in ATOMIC_STEPS[:prefix]:
            step(fs)
        fs.power_loss(random.Random(seed))
        content = fs.read("/d/state") if fs.exists("/d/state") else None
        allowed = {OLD, NEW} if existed else {None, NEW}
        assert content in allowed, (prefix, seed, content)
        outcomes.add(content)
    if prefix == len(ATOMIC_STEPS):
        assert outcomes == {NEW}  # the protocol finished: the new content is durable
    elif prefix < 3:
        assert outcomes == {OLD if existed else None}  # the target was never touched


def test_skipping_the_fsync_of_the_temp_file_is_caught() -> None:
    """Without ``fsync(tmp)`` the rename can be durable before the data: a torn or empty target."""
    contents = set()
    for seed in SEEDS:
        fs = new_fs()
        durable_file(fs, "/d/state", OLD)
        fs.write("/d/state.tmp", NEW)
        fs.rename("/d/state.tmp", "/d/state")
        fs.fsync_dir("/d")
        fs.power_loss(random.Random(seed))
        contents.add(fs.read("/d/state"))
    assert NEW in contents
    assert any(c not in (OLD, NEW) for c in contents)  # the bug the simulator must expose


def test_a_truncate_to_zero_alone_leaves_the_old_content_or_nothing() -> None:
    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", OLD)
        fs.truncate("/d/f", 0)

    assert {after_power_loss(setup, seed).read("/d/f") for seed in SEEDS} == {OLD, b""}


def test_a_rewrite_that_extends_the_old_content_is_still_a_rewrite() -> None:
    """open(O_TRUNC) then the old bytes and more: the truncate came first, so empty is possible
    (the extension rules would never empty the file)."""

    def setup(fs: SimFS) -> None:
        durable_file(fs, "/d/f", OLD)
        fs.write("/d/f", OLD + b"more")

    results = {after_power_loss(setup, seed).read("/d/f") for seed in SEEDS}
    assert {OLD, OLD + b"more", b""} <= results


# -- enumerated tears ----------------------------------------------------------------------------


def _log_with_pending_batch() -> tuple[SimFS, bytes, bytes]:
    """A durable log of two records, then a batch of three records appended, not synced."""
    fs = new_fs()
    synced = b'{"r":1}\n{"r":2}\n'
    fs.append("/d/log", synced)
    fs.fsync("/d/log")
    fs.fsync_dir("/d")
    pending = b'{"r":3}\n{"r":4}\n{"r":55555}\n'
    fs.append("/d/log", pending)
    return fs, synced, pending


def test_tear_points_are_the_durable_end_record_ends_and_inside_the_last_record() -> None:
    fs, synced, pending = _log_with_pending_batch()
    start = len(synced)
    record_ends = [start + 8, start + 16, start + len(pending)]
    inside_last = start + 16 + (len(pending) - 16) // 2
    assert fs.tear_points() == [("/d/log", c) for c in sorted([start, *record_ends, inside_last])]
    assert fs.tear_points(limit_per_file=2) == [("/d/log", inside_last), ("/d/log", start + 28)]


@pytest.mark.parametrize("k", range(5))
def test_power_loss_cuts_at_the_chosen_tear(k: int) -> None:
    fs, synced, pending = _log_with_pending_batch()
    path, cut = fs.tear_points()[k]
    outcome = fs.power_loss(random.Random(0), tear=(path, cut))
    assert outcome == {"/d/log": f"tear:{cut}"}
    assert fs.read("/d/log") == (synced + pending)[:cut]
    assert not fs.has_pending()


def test_no_tears_for_a_rewrite_or_an_undurable_name() -> None:
    fs = new_fs()
    durable_file(fs, "/d/lease", OLD)
    fs.write("/d/lease", NEW)  # a rewrite in place: its outcomes are old/new/empty/mixed
    fs.append("/d/new-log", b"x\n")  # its directory entry is not durable: a power loss drops it
    assert fs.tear_points() == []


# -- storage faults ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_storage_faults_spare_a_logs_last_synced_write(seed: int) -> None:
    """Damage to a log stays below its latest synced extension and never cuts or deletes it;
    a file written whole may get any of the five faults."""
    fs = new_fs()
    first = b"".join(b'{"r":%d,"pad":"%s"}\n' % (i, b"x" * 60) for i in range(40))
    fs.append("/d/log", first)
    fs.fsync("/d/log")
    fs.fsync_dir("/d")
    last = b'{"r":40}\n'
    fs.append("/d/log", last)
    fs.fsync("/d/log")
    durable_file(fs, "/d/lease", OLD)
    (path, what), *_ = fs.damage_synced(random.Random(seed)).items()
    kind = what.split(":", 1)[0]
    if path == "/d/log":
        assert kind in ("bitflip", "zeroed-block", "misdirected-block")
        data = fs.read("/d/log")
        assert data.endswith(last) and len(data) == len(first) + len(last)
        assert data != first + last
    else:
        assert path == "/d/lease"
        assert fs.exists("/d/lease") == (kind != "deleted")


def test_storage_faults_reach_every_kind_and_nothing_unsynced() -> None:
    kinds: set[str] = set()
    for seed in range(200):
        fs = new_fs()
        durable_file(fs, "/d/checkpoint", NEW)
        fs.append("/d/pending", b"never synced\n")
        damage = fs.damage_synced(random.Random(seed))
        assert list(damage) == ["/d/checkpoint"]
        kinds.add(damage["/d/checkpoint"].split(":", 1)[0])
        assert fs.read("/d/pending") == b"never synced\n"
    assert kinds == {"bitflip", "zeroed-block", "misdirected-block", "truncated", "deleted"}


def test_storage_faults_need_synced_data() -> None:
    fs = new_fs()
    fs.append("/d/log", b"one batch, synced once\n")
    fs.fsync("/d/log")  # a log's only synced write is its last one: nothing is eligible
    durable_file(fs, "/elsewhere", OLD)
    assert fs.damage_synced(random.Random(0), under="/d") == {}
