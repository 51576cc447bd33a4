"""A paged KV cache's block allocator: block ids, reference counts, block tables.

The contiguous :class:`kvlab.engine.cache.KVCache` reserves ``max_len`` cells per
sequence up front, whether the sequence uses them or not. Here memory is handed out
as it is needed, one block of ``block_size`` tokens at a time (vLLM's PagedAttention):

- every layer has ``n_blocks * block_size`` cells; block ``b`` is cells
  ``b*bs .. b*bs+bs-1``. The cells themselves, the K/V tensors, are
  :class:`kvlab.engine.paged_kv.PagedKV`: this module hands out block ids and never
  touches a tensor;
- layers with the same window (all full-attention layers; all 512-token sliding
  layers of Gemma 3) form a *group* that shares one free list and one block table
  per sequence: block ``i`` of a sequence holds its positions ``i*bs .. i*bs+bs-1``;
- a sliding group gives a block back as soon as no later query can see any of its
  positions, so a long sequence holds about ``window / block_size`` blocks there;
- :meth:`BlockPool.release` returns every block of a finished sequence.

With ``prefix_caching``, a block is shared, not copied (:mod:`kvlab.engine.prefix`):
every full block is named by its tokens and position chain and carries a reference
count; a block nobody holds any more keeps its name (its K/V stays in its cells),
least recently used first in line to be taken, and :meth:`BlockPool.match` gives a new
sequence the blocks of its longest cached prefix. Sliding groups: the blocks a sliding
layer lets go while a sequence runs are kept the same way, and a hit of P tokens needs
every block below P in the full-attention group but only the blocks of the window
before P in a sliding group (the next query sees no further back); the longest P that
every group can serve wins.

:class:`kvlab.engine.ragged.RaggedBatch` is the cache a model's forward sees for a
step over several sequences: it writes each token's K/V into the cells of its
sequence's blocks and gathers each sequence's keys back in position order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kvlab.engine.cache import CacheLayout
from kvlab.engine.prefix import ROOT, PrefixIndex, block_names
from kvlab.errors import CacheOverflowError, EngineError

DEFAULT_BLOCK_SIZE = 16


def ceil_div(a: int, b: int) -> int:
    """⌈a / b⌉ for non-negative integers."""
    return -(-a // b)


def first_kept_block(length: int, window: int | None, block_size: int) -> int:
    """The first block a sequence of ``length`` tokens still needs on a layer with
    ``window`` (None: every block). The next query, at position ``length``, sees keys
    from ``length - window + 1`` on."""
    if window is None:
        return 0
    return max(0, length - window + 1) // block_size


def blocks_held(length: int, window: int | None, block_size: int) -> int:
    """Blocks a sequence of ``length`` tokens holds on one group between two steps."""
    return ceil_div(length, block_size) - first_kept_block(length, window, block_size)


def blocks_needed(n_tokens: int, window: int | None, block_size: int, chunk: int) -> int:
    """The most blocks a sequence growing to ``n_tokens`` holds at once on a group, when
    it is computed ``chunk`` tokens at a time at most (a bound; exact without window)."""
    full = ceil_div(n_tokens, block_size)
    if window is None:
        return full
    # During a step the blocks span from the first kept position to the last new one.
    return min(full, ceil_div(window - 1 + chunk, block_size) + 1)


@dataclass
class _Seq:
    """One sequence's place in the pool."""

    length: int = 0  # tokens whose K/V every layer holds
    tables: list[list[int | None]] = field(default_factory=list)  # per group; None: freed
    tokens: Sequence[int] = ()  # its token ids (prompt, then output), for block names
    names: list[bytes] = field(default_factory=list)  # names of its full blocks so far


class BlockPool:
    """Free lists and reference counts per window group, block tables per sequence.

    ``prefix_caching``: full blocks are named and shared (see the module docstring);
    off, a block goes back to the free list as soon as nobody holds it.
    """

    def __init__(
        self, config: CacheLayout, n_blocks: int, block_size: int = DEFAULT_BLOCK_SIZE,
        prefix_caching: bool = False,
    ) -> None:
        if n_blocks <= 0 or block_size <= 0:
            raise EngineError(
                f"a block pool needs n_blocks > 0 and block_size > 0, got {n_blocks} "
                f"and {block_size}"
            )
        self.config = config
        self.n_blocks = n_blocks
        self.block_size = block_size
        windows = [w if w is not None and w < config.max_len else None
                   for w in config.layer_windows]
        self.windows: list[int | None] = sorted(set(windows), key=lambda w: w or 0)
        self.layer_group = [self.windows.index(w) for w in windows]
        # Free block ids per group (no cached K/V); popped from the end, block 0 first.
        self.free = [list(range(n_blocks - 1, -1, -1)) for _ in self.windows]
        self.refs = [[0] * n_blocks for _ in self.windows]  # sequences holding each block
        self.index = PrefixIndex(len(self.windows)) if prefix_caching else None
        self.seqs: dict[int, _Seq] = {}

    @property
    def prefix_caching(self) -> bool:
        """Whether full blocks are named, shared and kept once free."""
        return self.index is not None

    def available(self, group: int = 0) -> int:
        """Blocks of ``group`` that can be taken: free, or cached and held by nobody."""
        parked = self.index.n_parked(group) if self.index is not None else 0
        return len(self.free[group]) + parked

    def used(self, group: int = 0) -> int:
        """Blocks held by sequences on ``group`` (0: full attention, or the only one)."""
        return self.n_blocks - self.available(group)

    def cached(self, group: int = 0) -> int:
        """Blocks of ``group`` nobody holds whose K/V is kept for a prefix hit."""
        return self.index.n_parked(group) if self.index is not None else 0

    def length(self, seq_id: int) -> int:
        """Tokens held for ``seq_id``."""
        return self.seqs[seq_id].length

    def table(self, seq_id: int, group: int) -> list[int | None]:
        """Block ids of ``seq_id`` on ``group`` in position order (None: freed, out of
        the window); read-only."""
        return self.seqs[seq_id].tables[group]

    def add(self, seq_id: int, tokens: Sequence[int] = ()) -> None:
        """Register an empty sequence; ``tokens`` is its token list (read, not copied,
        as it grows) when its full blocks are to be named for prefix caching."""
        if seq_id in self.seqs:
            raise EngineError(f"sequence {seq_id} is already in the pool")
        self.seqs[seq_id] = _Seq(tables=[[] for _ in self.windows], tokens=tokens)

    def match(self, seq_id: int) -> int:
        """Give the empty sequence ``seq_id`` the cached blocks of its longest prefix that
        every group can serve; the tokens found (a multiple of block_size, at most
        ``len(tokens) - 1``: one token is always computed). 0 without prefix caching."""
        seq = self.seqs[seq_id]
        if self.index is None or seq.length or not seq.tokens:
            return 0
        index, bs = self.index, self.block_size
        names = block_names(seq.tokens, bs, len(seq.tokens) - 1)
        n = len(names)
        for group, window in enumerate(self.windows):  # full groups bound the prefix
            if window is None:
                n = next((i for i, h in enumerate(names[:n]) if index.find(group, h) is None),
                         n)
        while n > 0 and not all(
                index.find(g, h) is not None
                for g, w in enumerate(self.windows)
                for h in names[first_kept_block(n * bs, w, bs):n]):
            n -= 1
        for group, window in enumerate(self.windows):
            first = first_kept_block(n * bs, window, bs)
            table: list[int | None] = [None] * first
            for name in names[first:n]:
                block = index.find(group, name)
                assert block is not None
                self._hold(group, block)
                table.append(block)
            seq.tables[group] = table
        seq.length, seq.names = n * bs, names[:n]
        return n * bs

    def _hold(self, group: int, block: int) -> None:
        if self.refs[group][block] == 0 and self.index is not None:
            self.index.unpark(group, block)
        self.refs[group][block] += 1

    def _take(self, group: int) -> int:
        """A block nobody holds: a free one, else the least recently used cached one."""
        if self.free[group]:
            block = self.free[group].pop()
        else:
            evicted = self.index.evict(group) if self.index is not None else None
            if evicted is None:
                raise CacheOverflowError(f"no block left in group {group}")
            block = evicted
        self.refs[group][block] = 1
        return block

    def _drop(self, group: int, block: int) -> None:
        """One holder fewer; at none, the block is kept cached (named) or freed."""
        self.refs[group][block] -= 1
        if self.refs[group][block] == 0 and not (
                self.index is not None and self.index.park(group, block)):
            self.free[group].append(block)

    def _missing(self, seq_id: int, n_new: int) -> list[int]:
        """New blocks per group for ``n_new`` more tokens."""
        seq = self.seqs[seq_id]
        wanted = ceil_div(seq.length + n_new, self.block_size)
        return [max(0, wanted - len(table)) for table in seq.tables]

    def can_grow(self, seq_id: int, n_new: int) -> bool:
        """Whether the pool can give the blocks ``n_new`` more tokens need."""
        missing = self._missing(seq_id, n_new)
        return all(m <= self.available(g) for g, m in enumerate(missing))

    def grow(self, seq_id: int, n_new: int) -> None:
        """Give ``seq_id`` the blocks for ``n_new`` more tokens (CacheOverflowError if
        the pool lacks them; nothing is taken then)."""
        missing = self._missing(seq_id, n_new)
        if not self.can_grow(seq_id, n_new):
            raise CacheOverflowError(
                f"the KV pool has {[self.available(g) for g in range(len(self.windows))]} "
                f"free blocks per group, sequence {seq_id} needs {missing} more"
            )
        for group, (table, m) in enumerate(zip(self.seqs[seq_id].tables, missing,
                                               strict=True)):
            table.extend(self._take(group) for _ in range(m))

    def advance(self, seq_id: int, n: int) -> None:
        """Commit ``n`` tokens written by every layer: name the blocks they filled (with
        prefix caching), then let sliding groups give back what left their window."""
        seq = self.seqs[seq_id]
        seq.length += n
        if seq.length > len(seq.tables[0]) * self.block_size:
            raise EngineError(f"sequence {seq_id} advanced past its blocks; grow() first")
        if self.index is not None and seq.tokens:
            first = len(seq.names)
            parent = seq.names[-1] if seq.names else ROOT
            new = block_names(seq.tokens, self.block_size, seq.length, first, parent)
            for i, name in enumerate(new, start=first):
                for group, table in enumerate(seq.tables):
                    block = table[i]
                    if block is not None:
                        self.index.register(group, block, name)
            seq.names += new
        for group, (window, table) in enumerate(zip(self.windows, seq.tables, strict=True)):
            for i in range(first_kept_block(seq.length, window, self.block_size)):
                block = table[i]
                if block is not None:
                    self._drop(group, block)
                    table[i] = None

    def release(self, seq_id: int) -> None:
        """Forget ``seq_id``; its blocks go back last first, so that a prefix's first
        blocks are the last of them to be evicted."""
        seq = self.seqs.pop(seq_id)
        for group, table in enumerate(seq.tables):
            for block in reversed(table):
                if block is not None:
                    self._drop(group, block)

    def release_all(self) -> None:
        """Forget every sequence, as :meth:`release` does one by one."""
        for seq_id in list(self.seqs):
            self.release(seq_id)

    def cells(self, seq_id: int, group: int, start: int, end: int) -> torch.Tensor:
        """Pool cell indices (end - start,) of positions start..end-1 of ``seq_id``."""
        table = self.table(seq_id, group)
        bs = self.block_size
        first, last = start // bs, ceil_div(end, bs)
        if any(b is None for b in table[first:last]):
            raise EngineError(f"positions {start}..{end - 1} of sequence {seq_id} were "
                              "freed (out of the window)")
        blocks = torch.tensor(table[first:last], dtype=torch.long)  # physical ids
        positions = torch.arange(start, end)  # (end - start,)
        return blocks[positions // bs - first] * bs + positions % bs
