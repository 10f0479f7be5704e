"""SimFS: an in-memory filesystem with a page cache, so a simulated power loss can lose things.

It implements ``durable.ports.FileSystem`` exactly and keeps two states side by side:

- the **current** state, what every process sees (the page cache), and
- the **durable** state, what is on disk and survives a power loss.

Files are inodes. Each inode holds its current bytes and its durable bytes (the content at its last
``fsync``). Directories map names to nodes twice: the *current entries* and the *durable entries*
(as of the directory's last ``fsync_dir``). So ``write``/``append``/``truncate`` change only an
inode's current bytes until ``fsync(file)``, and a create, ``rename`` or ``unlink`` changes only the
current entries of a directory until ``fsync_dir(directory)``.

Crashes:

- ``process_crash()`` (kill -9) loses nothing: the page cache belongs to the kernel. A no-op.
- ``power_loss(rng)`` first reverts every directory's entries to its durable entries (an
  un-fsynced create disappears, an un-fsynced rename or unlink is undone: the old inode is back
  under the old name), then gives every reachable inode with pending changes a seeded content:
  (a) its durable bytes, (b) its durable bytes plus a prefix of the pending bytes ending on a block
  boundary (an absolute offset that is a multiple of ``block_size_bytes``, strictly between the
  durable and the current length) -- only when the pending change is a pure extension, i.e. the
  current bytes start with the durable bytes -- or (c) all its current bytes. Afterwards the
  current state equals the durable state.

Modelling choices (simplifications, on purpose):

- Directories are durable as soon as ``makedirs`` creates them (as if the parent were fsynced for
  that one entry); they are never removed or renamed (the port has no ``rmdir``), and renaming a
  directory raises ``IsADirectoryError``.
- Renaming a file across directories is supported; each directory becomes durable on its own
  ``fsync_dir``, so a power loss may leave the file under both names or under neither (POSIX allows
  this; ext4 happens to journal both sides together). Fsync both directories.
- Overwriting a file (``write``, or ``truncate`` to zero and appends) and losing power before its
  ``fsync`` yields the old content, the new content, an empty file (ext4's "zero-length file after
  truncate-and-rewrite": the truncate reached the disk, the delayed data did not) or a block-wise
  mix of old and new (each block from either, the length of either; with the old length, a
  block past the new content's end is the old one, never zeros), or a torn extension when
  the new content extends the old one. A shrinking ``truncate`` to a non-zero size yields the old
  or the new content. (Under the simulator a process's ``write`` is ``open(O_TRUNC)`` plus
  chunked appends, each a crash point: see ``sim.world.process.ProcessFS.write``.)
- Paths are ``/``-separated; empty and ``.`` components are ignored and ``..`` is rejected, so
  ``"a/b"`` and ``"/a/b"`` name the same file. Snapshots report paths with a leading ``/``.

Determinism: no clocks, no global random, no iteration over sets of strings; the only randomness is
the ``random.Random`` handed to ``power_loss``, consumed in sorted path order and only for inodes
whose content actually differs from their durable content.

Speed: appends extend a ``bytearray`` in place and an fsync only records the durable length, so a
pure append-only log is never copied; the durable bytes are materialised only when a ``write`` or a
shrinking ``truncate`` would destroy them. Directory fsyncs and power losses touch only the names
changed since the last directory fsync.
"""

from __future__ import annotations

import errno
import random
from collections.abc import Iterator
from contextlib import contextmanager

from sim.world.fs_nodes import Dir, Inode, settle

__all__ = ["SimFS"]

_OPS = (
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
    "read_at",
    "write_at",
    "process_crash",
    "power_loss",
)

_SPLIT_CACHE_MAX = 8192


def _display(key: str) -> str:
    return "/" + key


def _join(parent_key: str, name: str) -> str:
    return f"{parent_key}/{name}" if parent_key else name


def _not_found(path: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, "No such file or directory", path)


def _is_dir(path: str) -> IsADirectoryError:
    return IsADirectoryError(errno.EISDIR, "Is a directory", path)


def _not_dir(path: str) -> NotADirectoryError:
    return NotADirectoryError(errno.ENOTDIR, "Not a directory", path)


class SimFS:
    """A simulated filesystem with page-cache crash semantics; see the module docstring.

    ``block_size_bytes`` is the granularity at which an unsynced append can be torn by
    ``power_loss``. ``stats`` counts calls per operation (including ``process_crash`` and
    ``power_loss``), failed calls too.
    """

    def __init__(self, block_size_bytes: int = 512) -> None:
        if block_size_bytes <= 0:
            raise ValueError("block_size_bytes must be positive")
        self.block_size_bytes = block_size_bytes
        self.stats: dict[str, int] = dict.fromkeys(_OPS, 0)
        self._root = Dir("")
        # Every directory by key ("" is the root, "a/b" is /a/b). Directories never move or vanish.
        self._dirs: dict[str, Dir] = {"": self._root}
        # Inodes whose current data may differ from their durable data, by inode number.
        self._dirty: dict[int, Inode] = {}
        self._next_ino = 1
        self._split_cache: dict[str, tuple[str, str]] = {}
        # Paths locked by ``exclusive`` right now (kernel state: never on disk, never synced).
        self._locks: set[str] = set()

    # -- paths --------------------------------------------------------------------------------

    def _split(self, path: str) -> tuple[str, str]:
        """``(parent key, name)``; the root is ``("", "")``."""
        hit = self._split_cache.get(path)
        if hit is not None:
            return hit
        parts = [p for p in path.split("/") if p and p != "."]
        if ".." in parts:
            raise ValueError(f"SimFS does not resolve '..': {path!r}")
        result = ("/".join(parts[:-1]), parts[-1]) if parts else ("", "")
        if len(self._split_cache) >= _SPLIT_CACHE_MAX:
            self._split_cache.clear()
        self._split_cache[path] = result
        return result

    def _parent(self, parent_key: str, path: str) -> Dir:
        d = self._dirs.get(parent_key)
        if d is not None:
            return d
        # Say why, like the OS would: a missing component, or a file used as a directory.
        node: Inode | Dir = self._root
        for part in parent_key.split("/"):
            if isinstance(node, Inode):
                raise _not_dir(path)
            child = node.entries.get(part)
            if child is None:
                raise _not_found(path)
            node = child
        raise _not_dir(path)

    def _file(self, path: str) -> tuple[Dir, str, Inode]:
        parent_key, name = self._split(path)
        if not name:
            raise _is_dir(path)
        d = self._parent(parent_key, path)
        node = d.entries.get(name)
        if node is None:
            raise _not_found(path)
        if isinstance(node, Dir):
            raise _is_dir(path)
        return d, name, node

    def _dir(self, path: str) -> Dir:
        parent_key, name = self._split(path)
        d = self._dirs.get(_join(parent_key, name))
        if d is not None:
            return d
        parent = self._parent(parent_key, path)
        if name in parent.entries:
            raise _not_dir(path)
        raise _not_found(path)

    def _create(self, d: Dir, name: str) -> Inode:
        node = Inode(self._next_ino)
        self._next_ino += 1
        d.entries[name] = node
        d.pending[name] = None
        return node

    def _open_for_write(self, path: str) -> Inode:
        parent_key, name = self._split(path)
        if not name:
            raise _is_dir(path)
        d = self._parent(parent_key, path)
        node = d.entries.get(name)
        if node is None:
            node = self._create(d, name)
        elif isinstance(node, Dir):
            raise _is_dir(path)
        self._dirty[node.ino] = node
        return node

    # -- the FileSystem port ------------------------------------------------------------------

    def makedirs(self, path: str) -> None:
        """Create the directory and any missing parents (exist_ok); durable at once (see module)."""
        self.stats["makedirs"] += 1
        parent_key, name = self._split(path)
        key = _join(parent_key, name)
        if key in self._dirs:
            return
        d = self._root
        for part in key.split("/"):
            child = d.entries.get(part)
            if child is None:
                child = Dir(_join(d.key, part))
                self._dirs[child.key] = child
                d.entries[part] = child
                d.durable[part] = child
                d.pending.pop(part, None)
            elif isinstance(child, Inode):
                raise FileExistsError(errno.EEXIST, "File exists", path)
            d = child

    def exists(self, path: str) -> bool:
        self.stats["exists"] += 1
        parent_key, name = self._split(path)
        d = self._dirs.get(parent_key)
        if d is None:
            return False
        return not name or name in d.entries

    def read(self, path: str) -> bytes:
        self.stats["read"] += 1
        return bytes(self._file(path)[2].data)

    def size(self, path: str) -> int:
        self.stats["size"] += 1
        return len(self._file(path)[2].data)

    def write(self, path: str, data: bytes) -> None:
        """Create or truncate, then write: ``open(path, "wb").write(data)``."""
        self.stats["write"] += 1
        node = self._open_for_write(path)
        node.preserve_durable(0)
        node.data = bytearray(data)
        node.rewritten = True
        node.appended = False

    def append(self, path: str, data: bytes) -> None:
        """Extend (creating the file if missing): ``open(path, "ab").write(data)``."""
        self.stats["append"] += 1
        node = self._open_for_write(path)
        node.data += data
        node.appended = True

    def write_more(self, path: str, data: bytes) -> None:
        """A later ``write(2)`` of a rewrite started by ``write``: extends the file like
        ``append``, but the file stays one written whole (not a log grown by appends)."""
        self.stats["write"] += 1
        node = self._open_for_write(path)
        node.data += data

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        """``pread(2)``: at most ``size`` bytes from ``offset`` (fewer at the end of the file)."""
        self.stats["read_at"] += 1
        if offset < 0 or size < 0:
            raise OSError(errno.EINVAL, "Invalid argument", path)
        return bytes(self._file(path)[2].data[offset : offset + size])

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        """``pwrite(2)`` (creating the file if missing), as a database writes its pages. At or
        past the end it extends the file (a gap reads as zeros), and a power loss treats it like
        an append: lost, torn at a block boundary, or kept. Below the end it overwrites in
        place: the durable content is kept aside, and a power loss leaves each block old or
        new (the disk may have written any of the cached blocks)."""
        self.stats["write_at"] += 1
        if offset < 0:
            raise OSError(errno.EINVAL, "Invalid argument", path)
        node = self._open_for_write(path)
        current = len(node.data)
        if offset >= current:
            node.data += bytes(offset - current)
            node.data += data
            return
        node.preserve_durable(offset)
        node.data[offset : offset + len(data)] = data
        node.overwritten = True

    def write_more_at(self, path: str, offset: int, data: bytes) -> None:
        """``write_at`` (a later write of a batch: the difference is only a crash point's,
        which SimFS does not have; see ``sim.world.sqlite_vfs``)."""
        self.write_at(path, offset, data)

    def truncate(self, path: str, size: int) -> None:
        """Cut to ``size`` bytes, or extend with zero bytes (POSIX ``truncate``)."""
        self.stats["truncate"] += 1
        if size < 0:
            raise OSError(errno.EINVAL, "Invalid argument", path)
        node = self._file(path)[2]
        self._dirty[node.ino] = node
        current = len(node.data)
        if size < current:
            node.preserve_durable(size)
            del node.data[size:]
        elif size > current:
            node.data += bytes(size - current)
        if size == 0:
            node.rewritten = True

    def fsync(self, path: str) -> None:
        """Make the file's content durable (not its directory entry). On a directory: fsync_dir."""
        self.stats["fsync"] += 1
        parent_key, name = self._split(path)
        d = self._parent(parent_key, path)
        node = d.entries.get(name) if name else d
        if node is None:
            raise _not_found(path)
        if isinstance(node, Dir):
            self._sync_dir(node)
            return
        node.mark_synced()
        self._dirty.pop(node.ino, None)

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` by ``src`` in the current view; durable after fsync_dir."""
        self.stats["rename"] += 1
        sd, sname, node = self._file(src)
        dparent_key, dname = self._split(dst)
        if not dname:
            raise _is_dir(dst)
        dd = self._parent(dparent_key, dst)
        target = dd.entries.get(dname)
        if isinstance(target, Dir):
            raise _is_dir(dst)
        if target is node:
            return  # POSIX: renaming a file onto itself (or a hard link of it) does nothing.
        del sd.entries[sname]
        sd.pending[sname] = None
        dd.entries[dname] = node
        dd.pending[dname] = None

    def fsync_dir(self, path: str) -> None:
        """Make the directory's current entries durable (creates, renames, unlinks in it)."""
        self.stats["fsync_dir"] += 1
        self._sync_dir(self._dir(path))

    def listdir(self, path: str) -> list[str]:
        self.stats["listdir"] += 1
        return sorted(self._dir(path).entries)

    @contextmanager
    def exclusive(self, path: str) -> Iterator[None]:
        """An exclusive lock on ``path`` (``flock``), as the kernel keeps it: in memory, never on
        disk, dropped when its holder leaves the block -- normally or by dying, since a killed
        process's locks go with it. A store takes it only around a read-modify-write with no
        ``await`` inside, and simulated processes interleave only at awaits, so finding it held
        is a harness or runtime bug: it fails loudly instead of waiting."""
        key = "/".join(p for p in path.split("/") if p)
        if key in self._locks:
            raise AssertionError(f"{path}: locked by a process that is still inside its block")
        self._locks.add(key)
        try:
            yield
        finally:
            self._locks.discard(key)

    def unlink(self, path: str) -> None:
        """Remove the name from the current view; durable after fsync_dir."""
        self.stats["unlink"] += 1
        d, name, _ = self._file(path)
        del d.entries[name]
        d.pending[name] = None

    @staticmethod
    def _sync_dir(d: Dir) -> None:
        if d.pending:
            SimFS._settle_pending(d, d.entries, d.durable)

    @staticmethod
    def _settle_pending(
        d: Dir, source: dict[str, Inode | Dir], target: dict[str, Inode | Dir]
    ) -> None:
        """Make ``target`` agree with ``source`` on every name with a pending change: a directory
        fsync makes the live entries durable; a power loss puts the durable ones back."""
        for name in d.pending:
            node = source.get(name)
            if node is None:
                target.pop(name, None)
            else:
                target[name] = node
        d.pending.clear()

    # -- crashes ------------------------------------------------------------------------------

    def process_crash(self) -> None:
        """A kill -9: the page cache survives, so nothing is lost. Exists for symmetry."""
        self.stats["process_crash"] += 1

    def tear_points(self, *, limit_per_file: int = 8) -> list[tuple[str, int]]:
        """The interesting places a power loss can cut each pending *extension* (sorted by
        path, then offset): the durable end (nothing of it kept), every record end -- a
        newline -- in the pending bytes (a batch end, or a record end inside a batch, where a
        lenient reader would keep part of an unacknowledged batch), and the middle of the last
        record. At most ``limit_per_file`` per file, the latest ones (a never-synced log
        would otherwise offer every record of its history). Files whose pending change is a
        rewrite, files not grown by ``append`` (a database's write-ahead log has no newline
        records: its power losses tear it by the seeded draw), and files a power loss would
        unlink anyway, have none."""
        out: list[tuple[str, int]] = []
        if not self._dirty:
            return out
        for key in sorted(self._dirs):
            d = self._dirs[key]
            for name in sorted(d.durable):
                node = d.durable[name]
                if (
                    not isinstance(node, Inode)
                    or node.ino not in self._dirty
                    or d.entries.get(name) is not node
                    or node.rewritten
                    or not node.appended  # a text log: record ends are newlines (not SQLite's)
                    or node.durable_bytes is not None
                    or len(node.data) <= node.durable_len
                ):
                    continue
                data, start = node.data, node.durable_len
                cuts: list[int] = []
                end = len(data)
                last_newline = data.rfind(b"\n", start, end - 1) if end - 1 > start else -1
                last_line_start = last_newline + 1 if last_newline >= 0 else start
                if end - last_line_start >= 2:
                    cuts.append(last_line_start + (end - last_line_start) // 2)
                pos = end
                while len(cuts) < limit_per_file:
                    newline = data.rfind(b"\n", start, pos)
                    if newline < 0:
                        break
                    cuts.append(newline + 1)
                    pos = newline
                if len(cuts) < limit_per_file:
                    cuts.append(start)
                path = _display(_join(key, name))
                out += [(path, cut) for cut in sorted(set(cuts))]
        return out

    def power_loss(
        self, rng: random.Random, *, tear: tuple[str, int] | None = None
    ) -> dict[str, str]:
        """Lose everything not durable, tearing pending content by a seeded choice.

        Returns, sorted by path, what happened to each surviving file that had pending content:
        ``"durable"`` (pending bytes lost), ``"torn:<length>"`` (kept up to a block boundary),
        ``"all"`` (every pending byte made it), ``"damaged:<offset>"`` (all, one letter changed),
        ``"empty"`` or ``"mixed"`` (a rewrite in place: see the module docstring). Files without
        pending content are not listed. ``tear`` (one of ``tear_points()``) cuts that file there
        instead of drawing its outcome (``"tear:<length>"``).
        """
        torn_ino = -1
        if tear is not None:
            tear_key = "/".join(p for p in tear[0].split("/") if p)
            parent_key, name = self._split(tear_key)
            node = self._dirs[parent_key].durable[name]
            assert isinstance(node, Inode) and node.durable_len <= tear[1] <= len(node.data)
            torn_ino = node.ino
        self.stats["power_loss"] += 1
        for d in self._dirs.values():
            if d.pending:
                self._settle_pending(d, d.durable, d.entries)
        outcomes: dict[str, str] = {}
        dirty = self._dirty
        if dirty:
            # An inode reachable under two names (a half-durable cross-directory rename) is settled
            # once, under its first name in sorted order, and reported under both.
            settled: dict[int, str | None] = {}
            for key in sorted(self._dirs):
                entries = self._dirs[key].entries
                for name in sorted(entries):
                    node = entries[name]
                    if not isinstance(node, Inode):
                        continue
                    ino = node.ino
                    if ino in settled:
                        outcome = settled[ino]
                    elif dirty.pop(ino, None) is not None:
                        if ino == torn_ino and tear is not None:
                            del node.data[tear[1] :]
                            node.mark_synced()
                            outcome = settled[ino] = f"tear:{tear[1]}"
                        else:
                            outcome = settled[ino] = settle(node, rng, self.block_size_bytes)
                    else:
                        continue
                    if outcome is not None:
                        outcomes[_display(_join(key, name))] = outcome
            # Whatever is left is unreachable (created or renamed away, never dir-fsynced): gone.
            dirty.clear()
        return dict(sorted(outcomes.items()))

    def damage_synced(self, rng: random.Random, *, under: str = "") -> dict[str, str]:
        """A storage fault: damage one file's *synced* content, by a seeded choice.

        Real disks return damaged data that was written and synced long ago: a flipped bit (bit
        rot), a block that reads back as zeros (a lost write, a latent sector error), a block
        holding another block's content (a misdirected write), a file cut short or gone (a lost
        metadata update). The fault is bounded to what a single-copy store can tell apart from
        a crash (see docs/crash-model.md, "Storage faults"):

        - a file grown by appends (a log) is damaged only *below its latest synced extension*:
          later synced data proves those bytes were complete. Damage inside the last synced
          write reads exactly like a torn write, which no single copy can tell from a crash;
          truncating or deleting such a file is not drawn for the same reason (a log cut at
          a record boundary, or gone, looks like a shorter log). Those are aimed instead, by
          ``sim.world.storage_faults``, which knows where a checkpoint proves the loss;
        - a file written whole (e.g. by the atomic-write protocol) and synced can suffer any of
          the five kinds.

        Returns ``{path: "<kind>:<detail>"}`` for the damaged file, or ``{}`` when nothing
        under ``under`` is eligible (no synced data yet). Only the page cache's copy and the
        disk's copy of the same bytes change; nothing pending is touched.
        """
        candidates: list[tuple[str, Dir, str, Inode, int, bool]] = []
        for key, d, name, node in self._durable_files(under):
            whole = not node.appended
            window = node.durable_len if whole else node.proven_len
            if window > 0:
                candidates.append((_join(key, name), d, name, node, window, whole))
        if not candidates:
            return {}
        key, d, name, node, window, whole = candidates[rng.randrange(len(candidates))]
        bs = self.block_size_bytes
        kinds = ["bitflip", "zeroed-block"]
        if window // bs >= 2:
            kinds.append("misdirected-block")
        if whole:
            kinds += ["truncated", "deleted"]
        kind = kinds[rng.randrange(len(kinds))]
        data = node.data
        if kind == "bitflip":
            offset, bit = rng.randrange(window), rng.randrange(8)
            data[offset] ^= 1 << bit
            detail = f"{offset}.{bit}"
        elif kind == "zeroed-block":
            start = rng.randrange(max(1, window // bs)) * bs
            end = min(start + bs, window)
            data[start:end] = bytes(end - start)
            detail = f"{start}+{end - start}"
        elif kind == "misdirected-block":
            blocks = window // bs
            dst = rng.randrange(blocks)
            src = (dst + 1 + rng.randrange(blocks - 1)) % blocks
            data[dst * bs : (dst + 1) * bs] = bytes(data[src * bs : (src + 1) * bs])
            detail = f"{src * bs}->{dst * bs}"
        elif kind == "truncated":
            cut = rng.randrange(window)
            del data[cut:]
            node.durable_len = min(node.durable_len, cut)
            detail = str(cut)
        else:
            del d.entries[name]
            del d.durable[name]
            d.pending.pop(name, None)
            self._dirty.pop(node.ino, None)
            detail = "gone"
        return {_display(key): f"{kind}:{detail}"}

    def synced_logs(self, *, under: str = "") -> list[tuple[str, bytes, int]]:
        """Every file grown by appends under ``under`` whose whole content is synced and named
        durably: (path, its bytes, where its last synced extension begins). What the aimed
        storage faults (``sim.world.storage_faults``) may cut, delete or damage; a file with
        pending changes is left alone, as every storage fault leaves pending data."""
        return [
            (_display(_join(key, name)), bytes(node.data), node.proven_len)
            for key, _, name, node in self._durable_files(under)
            if node.appended
            and node.ino not in self._dirty
            and 0 < node.durable_len == len(node.data)
        ]

    def _durable_files(self, under: str) -> Iterator[tuple[str, Dir, str, Inode]]:
        """Every file under ``under`` whose name is durable and whose synced content is in
        ``data`` (no rewrite in flight), in sorted order: what a storage fault may damage."""
        prefix = "/".join(p for p in under.split("/") if p)
        for key in sorted(self._dirs):
            if prefix and key != prefix and not key.startswith(prefix + "/"):
                continue
            d = self._dirs[key]
            for name in sorted(d.durable):
                node = d.durable[name]
                if not isinstance(node, Inode) or d.entries.get(name) is not node:
                    continue  # a directory, or a name whose rename/unlink is not durable yet
                if node.rewritten or node.durable_bytes is not None:
                    continue  # a rewrite in flight: its synced content is not in ``data``
                yield key, d, name, node

    def synced_prefix(self, path: str) -> tuple[bytes, int] | None:
        """A file's bytes and how many of them are synced, for a file whose name is durable and
        whose synced content is the start of its current content (no rewrite in flight): what
        the aimed storage faults on SQLite's files may damage -- bytes below the synced length
        only (``sim.world.storage_faults``). None: no such file."""
        parent_key, name = self._split(path)
        d = self._dirs.get(parent_key)
        node = None if d is None else d.entries.get(name)
        if d is None or not isinstance(node, Inode) or d.durable.get(name) is not node:
            return None
        if node.rewritten or node.durable_bytes is not None:
            return None
        return bytes(node.data), node.durable_len

    def damage_log(
        self, path: str, *, cut: int | None = None, flip: tuple[int, int] | None = None
    ) -> None:
        """Damage one of ``synced_logs`` (or a file ``synced_prefix`` returns), in both the page
        cache and the disk: cut it to ``cut`` bytes, flip a bit (``flip``: byte offset, bit), or
        (neither given) delete it. The aimed storage faults (``sim.world.storage_faults``)
        decide where, below the synced length; this only performs it."""
        d, name, node = self._file(path)
        if cut is not None:
            del node.data[cut:]
            node.durable_len = cut
            node.proven_len = min(node.proven_len, cut)
        elif flip is not None:
            node.data[flip[0]] ^= 1 << flip[1]
        else:
            del d.entries[name]
            del d.durable[name]
            d.pending.pop(name, None)
            self._dirty.pop(node.ino, None)

    def clone(self, *, deep: bool = False) -> SimFS:
        """An independent copy of both states (an inode under two names stays one inode).

        A sweep applies ``power_loss`` to a clone to learn what a power loss *here* would leave
        (``sim.world.process.Machine.state_digests``) without causing it. Only the inodes a power
        loss can change (pending ones) are copied byte for byte; a clean inode's bytes are
        shared, which is safe as long as the clone is only crashed and read, never written,
        and the original's clean bytes never change in place. ``deep`` copies every inode's
        bytes: the disk as it was before a storage fault damages the original in place."""
        cloned = SimFS(self.block_size_bytes)
        cloned.stats = dict(self.stats)
        cloned._next_ino = self._next_ino
        dirs = {key: Dir(key) for key in self._dirs}
        inodes: dict[int, Inode] = {}

        def copy_of(node: Inode | Dir) -> Inode | Dir:
            return dirs[node.key] if isinstance(node, Dir) else copy_inode(node)

        def copy_inode(node: Inode) -> Inode:
            copy = inodes.get(node.ino)
            if copy is None:
                copy = inodes[node.ino] = Inode(node.ino)
                pending = node.ino in self._dirty
                copy.data = bytearray(node.data) if pending or deep else node.data
                copy.durable_len = node.durable_len
                copy.durable_bytes = node.durable_bytes
                copy.rewritten = node.rewritten
                copy.proven_len = node.proven_len
                copy.appended = node.appended
                copy.overwritten = node.overwritten
            return copy

        for key, d in self._dirs.items():
            copy_dir = dirs[key]
            copy_dir.entries = {name: copy_of(node) for name, node in d.entries.items()}
            copy_dir.durable = {name: copy_of(node) for name, node in d.durable.items()}
            copy_dir.pending = dict(d.pending)
        cloned._root = dirs[""]
        cloned._dirs = dirs
        cloned._dirty = {ino: copy_inode(node) for ino, node in self._dirty.items()}
        return cloned

    # -- inspection ---------------------------------------------------------------------------

    def has_pending(self) -> bool:
        """Whether a power loss might differ from a process crash (conservative: may say True)."""
        return bool(self._dirty) or any(d.pending for d in self._dirs.values())

    def snapshot(self) -> dict[str, bytes]:
        """The current view: every file's path (with a leading ``/``) and content, sorted."""
        out = {
            _display(_join(key, name)): bytes(node.data)
            for key, d in self._dirs.items()
            for name, node in d.entries.items()
            if isinstance(node, Inode)
        }
        return dict(sorted(out.items()))

    def inode_numbers(self) -> dict[str, int]:
        """Every file's inode number (the current view): a rename over a path replaces it."""
        return {
            _display(_join(key, name)): node.ino
            for key, d in self._dirs.items()
            for name, node in d.entries.items()
            if isinstance(node, Inode)
        }

    def rewritten_paths(self) -> list[str]:
        """Files truncated to zero since their last fsync (their power-loss outcomes differ)."""
        return sorted(
            _display(_join(key, name))
            for key, d in self._dirs.items()
            for name, node in d.entries.items()
            if isinstance(node, Inode) and node.rewritten
        )

    def durable_snapshot(self) -> dict[str, bytes]:
        """What is on disk: durable entries with durable content, sorted by path.

        This is what ``power_loss`` leaves when it chooses "durable" for every file.
        """
        out = {
            _display(_join(key, name)): node.durable_content()
            for key, d in self._dirs.items()
            for name, node in d.durable.items()
            if isinstance(node, Inode)
        }
        return dict(sorted(out.items()))
