"""SimFS's nodes (``sim.world.fs``): an inode with its current and durable bytes, a directory
with its current and durable entries, and what a power loss leaves of an inode's pending content.

Kept apart from ``SimFS`` (paths, the ``FileSystem`` port, directory fsyncs, storage faults) so
each module stays readable; the crash model itself is described in ``sim.world.fs``'s docstring.
Determinism: the only randomness is the ``random.Random`` handed in, consumed in a fixed order.
"""

from __future__ import annotations

import random


class Inode:
    """A file. Durable content is ``durable_bytes`` if set, else ``data[:durable_len]``."""

    __slots__ = (
        "appended",
        "data",
        "durable_bytes",
        "durable_len",
        "ino",
        "overwritten",
        "proven_len",
        "rewritten",
    )

    def __init__(self, ino: int) -> None:
        self.ino = ino
        self.data = bytearray()
        self.durable_len = 0
        self.durable_bytes: bytes | None = None
        # Truncated to zero since the last fsync: the content is being rewritten in place.
        self.rewritten = False
        # For a file extended by more than one fsync (a log): the durable length before its
        # latest extending fsync. Bytes below it are proven complete by a later sync; the last
        # synced extension is not (storage faults leave it alone: see ``SimFS.damage_synced``).
        # 0: nothing proven (never extended by a second fsync).
        self.proven_len = 0
        # Grown by ``append`` (a log): a single copy cannot prove its own end, so its last
        # synced extension is never damaged, nor is the file cut or deleted (see damage_synced).
        self.appended = False
        # Written in place below its end by ``write_at`` since the last fsync (a database page,
        # a reused WAL frame): a power loss leaves each block of it old or new, in any mix.
        self.overwritten = False

    def durable_content(self) -> bytes:
        if self.durable_bytes is not None:
            return self.durable_bytes
        return bytes(self.data[: self.durable_len])

    def preserve_durable(self, keep: int) -> None:
        """Materialise the durable bytes before the current data loses its first ``keep`` bytes."""
        if self.durable_bytes is None and keep < self.durable_len:
            self.durable_bytes = bytes(self.data[: self.durable_len])

    def mark_synced(self) -> None:
        old_len = self.durable_len if self.durable_bytes is None else -1
        if 0 < old_len < len(self.data) and not self.rewritten:
            self.proven_len = old_len
        elif self.rewritten or self.durable_bytes is not None:
            self.proven_len = 0
        self.durable_len = len(self.data)
        self.durable_bytes = None
        self.rewritten = False
        self.overwritten = False


class Dir:
    """A directory: current entries, durable entries, and the names changed in between."""

    __slots__ = ("durable", "entries", "key", "pending")

    def __init__(self, key: str) -> None:
        self.key = key
        self.entries: dict[str, Inode | Dir] = {}
        self.durable: dict[str, Inode | Dir] = {}
        # Names whose current entry may differ from the durable one (a dict used as an ordered set).
        self.pending: dict[str, None] = {}


def settle(node: Inode, rng: random.Random, block_size_bytes: int) -> str | None:
    """Settle one inode's pending content: lost, torn at a block boundary, all kept, or (for
    an extension) kept with one damaged character: a partially programmed sector whose bytes
    still parse, the case only a checksum catches."""
    data = node.data
    current = len(data)
    kept = node.durable_bytes
    if kept is None:
        durable_len = node.durable_len
        extension = True
    else:
        durable_len = len(kept)
        extension = current >= durable_len and data.startswith(kept)
    rewrite = node.rewritten and kept is not None  # old content truncated away, unsynced
    if extension and current == durable_len and not rewrite:
        node.mark_synced()
        return None  # nothing pending after all; no randomness spent
    bs = block_size_bytes
    first = durable_len // bs + 1  # index of the first block boundary after the durable end
    # Block boundaries strictly between the durable end and the current end (a torn append).
    boundaries = max(0, (current - 1) // bs - first + 1) if extension else 0
    # Outcomes: 0 lost, 1 torn at a block boundary, 2 all kept, 3 all kept but one character
    # damaged (a partially programmed sector: only for extensions, where it is unacknowledged),
    # and for a file truncated to zero and rewritten in place: 4 empty (ext4's zero-length
    # file: the truncate reached the disk, the delayed data did not) and 5 a block-wise mix
    # of old and new content (the disk wrote some of the new blocks, in any order).
    if rewrite:
        # Even new content that happens to extend the old is a rewrite: the truncate came
        # first. A truncate to zero with nothing written after it: old or empty, nothing else.
        choice = (0, 4)[rng.randrange(2)] if current == 0 else (0, 2, 4, 5)[rng.randrange(4)]
    elif node.overwritten and kept is not None and not extension:
        choice = (0, 2, 5)[rng.randrange(3)]  # pages written in place: old, new or a mix
    elif extension:
        choice = rng.randrange(4) if boundaries else (0, 2, 3)[rng.randrange(3)]
    else:
        choice = 2 * rng.randrange(2)
    if choice == 4:
        node.data = bytearray()
        node.mark_synced()
        return "empty"
    if choice == 5:
        assert kept is not None  # not an extension: the old content was materialised
        node.data = mix_blocks(kept, bytes(data), bs, rng)
        node.mark_synced()
        return "mixed"
    if choice == 3:
        flipped = damage_one_letter(data, durable_len, rng)
        node.mark_synced()
        return f"damaged:{flipped}" if flipped is not None else "all"
    if choice == 0:
        if kept is None:
            del data[durable_len:]
        else:
            node.data = bytearray(kept)
        outcome = "durable"
    elif choice == 1:
        cut = (first + rng.randrange(boundaries)) * bs
        del data[cut:]
        outcome = f"torn:{cut}"
    else:
        outcome = "all"
    node.mark_synced()
    return outcome


def mix_blocks(old: bytes, new: bytes, block_size_bytes: int, rng: random.Random) -> bytearray:
    """The old or the new length (whichever the file's size reached the disk with), each block
    from the old or the new content; zeros where the new length reaches past the old content (the
    size reached the disk, the data did not).

    Where the old length is kept, a block past the end of the new content is the old block: the
    rewrite never wrote it, and a truncate reaches the disk whole or not at all (the size and the
    block map are one inode, committed together), so it cannot come back as zeros inside the old
    length. (It once did: SQLite's log, truncated and then given a 32-byte header, came back
    with its old frames and a zeroed block among them, a valid prefix that recovery replayed
    over newer database pages -- damage no real disk does there.)"""
    length = (len(old), len(new))[rng.randrange(2)]
    out = bytearray()
    for start in range(0, length, block_size_bytes):
        size = min(block_size_bytes, length - start)
        chosen = (old, new)[rng.randrange(2)]
        if chosen is new and start >= len(new):
            chosen = old  # never written by the rewrite: the old block is still there
        block = chosen[start : start + size]
        out += block + bytes(size - len(block))
    return out


def damage_one_letter(data: bytearray, start: int, rng: random.Random) -> int | None:
    """Change one ASCII letter at or after ``start`` into another letter; its offset, or None."""
    letters = [i for i in range(start, len(data)) if 65 <= data[i] <= 90 or 97 <= data[i] <= 122]
    if not letters:
        return None
    offset = letters[rng.randrange(len(letters))]
    data[offset] ^= 0x20  # swap case: still a letter, still valid UTF-8 and JSON
    return offset
