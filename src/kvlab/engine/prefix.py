"""Prefix caching: full KV blocks found again by what they hold.

Block ``i`` of a sequence holds the K/V of its positions ``i*bs .. i*bs+bs-1``. Those
depend on the block's tokens *and on every token before them*, so a full block is
named by a hash of its tokens and of the previous block's name (vLLM's position
chain): two sequences whose first ``(i+1)*bs`` tokens are equal have blocks ``0..i``
of the same names, and one can read the other's K/V instead of computing it.

:class:`PrefixIndex` keeps, per window group of the pool, which block holds which
name, and the blocks that no sequence holds any more but whose K/V is still there,
least recently used first: they are free to be taken (then their name is forgotten),
but until then a new prompt with the same prefix finds them. Reference counts and
free lists live in :class:`kvlab.engine.paged.BlockPool`, which uses this index.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence

ROOT = b""  # the name before block 0


def block_names(tokens: Sequence[int], block_size: int, end: int, first: int = 0,
                parent: bytes = ROOT) -> list[bytes]:
    """Names of the full blocks ``first, first+1, ...`` of ``tokens[:end]`` (a
    sequence's ids from position 0); ``parent`` names block ``first - 1`` (ROOT: none)."""
    names = []
    for start in range(first * block_size, end - block_size + 1, block_size):
        body = array("q", tokens[start:start + block_size]).tobytes()
        parent = hashlib.blake2b(parent + body, digest_size=16).digest()
        names.append(parent)
    return names


class PrefixIndex:
    """Per group: name -> block, block -> name, and the LRU of cached blocks nobody
    holds (``parked``). Counts the blocks it had to evict."""

    def __init__(self, n_groups: int) -> None:
        self.block_of: list[dict[bytes, int]] = [{} for _ in range(n_groups)]
        self.name_of: list[dict[int, bytes]] = [{} for _ in range(n_groups)]
        self.parked: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(n_groups)]
        self.evictions = 0

    def find(self, group: int, name: bytes) -> int | None:
        """The block of ``group`` that holds ``name`` (None: not cached)."""
        return self.block_of[group].get(name)

    def register(self, group: int, block: int, name: bytes) -> None:
        """``block`` (full, held) now holds ``name``; a name already cached keeps its
        first block (the duplicate is never found and goes back free)."""
        if name not in self.block_of[group] and block not in self.name_of[group]:
            self.block_of[group][name] = block
            self.name_of[group][block] = name

    def park(self, group: int, block: int) -> bool:
        """A block nobody holds: keep it findable (True) if it has a name."""
        if block not in self.name_of[group]:
            return False
        self.parked[group][block] = None  # the most recently used end
        return True

    def unpark(self, group: int, block: int) -> None:
        """A parked block is held again (a prefix hit)."""
        self.parked[group].pop(block, None)

    def evict(self, group: int) -> int | None:
        """Take the least recently used parked block and forget its name; None: none."""
        if not self.parked[group]:
            return None
        block, _ = self.parked[group].popitem(last=False)
        del self.block_of[group][self.name_of[group].pop(block)]
        self.evictions += 1
        return block

    def n_parked(self, group: int) -> int:
        """Blocks of ``group`` nobody holds whose K/V is kept for a later hit."""
        return len(self.parked[group])
