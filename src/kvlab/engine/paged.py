"""A paged KV cache: fixed-size blocks in one preallocated pool per layer.

The contiguous :class:`kvlab.engine.cache.KVCache` reserves ``max_len`` cells per
sequence up front, whether the sequence uses them or not. Here memory is handed out
as it is needed, one block of ``block_size`` tokens at a time (vLLM's PagedAttention):

- each layer owns one pool of ``n_blocks * block_size`` cells, shaped
  (cells, kvh, hd), allocated once;
- layers with the same window (all full-attention layers; all 512-token sliding
  layers of Gemma 3) form a *group* that shares one free list and one block table
  per sequence: block ``i`` of a sequence holds its positions ``i*bs .. i*bs+bs-1``;
- a sliding group gives a block back as soon as no later query can see any of its
  positions, so a long sequence holds about ``window / block_size`` blocks there;
- :meth:`BlockPool.release` returns every block of a finished sequence.

:class:`PagedBatch` is the cache a model's forward sees for a batch of sequences at
different lengths: it writes each row's new K/V into that row's blocks, gathers
each row's keys back in position order, pads the rows to one length and masks the
padding. The gather is a copy (the price of paging without a custom kernel; vLLM's
kernel reads the blocks in place).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvlab.engine.cache import CacheLayout
from kvlab.engine.masks import position_mask
from kvlab.errors import CacheOverflowError, EngineError, PromptTooLongError

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


class BlockPool:
    """K/V pools for every layer, free lists and block tables for every sequence."""

    def __init__(
        self, config: CacheLayout, n_blocks: int, block_size: int = DEFAULT_BLOCK_SIZE,
        dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
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
        cells = n_blocks * block_size
        self.k = [torch.zeros((cells, config.n_kv_heads, config.head_dim), dtype=dtype,
                              device=device) for _ in windows]  # (cells, kvh, hd)
        self.v = [torch.zeros_like(k) for k in self.k]  # (cells, kvh, hd)
        # Free block ids per group; popped from the end, so block 0 goes first.
        self.free = [list(range(n_blocks - 1, -1, -1)) for _ in self.windows]
        self.seqs: dict[int, _Seq] = {}

    @property
    def nbytes(self) -> int:
        """Bytes of every pool (all blocks, used or not)."""
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block on one layer, K and V."""
        return 2 * self.block_size * self.k[0][0].numel() * self.k[0].element_size()

    def used(self, group: int = 0) -> int:
        """Blocks in use on ``group`` (0: full attention, or the only group)."""
        return self.n_blocks - len(self.free[group])

    def length(self, seq_id: int) -> int:
        """Tokens held for ``seq_id``."""
        return self.seqs[seq_id].length

    def add(self, seq_id: int) -> None:
        """Register an empty sequence."""
        if seq_id in self.seqs:
            raise EngineError(f"sequence {seq_id} is already in the pool")
        self.seqs[seq_id] = _Seq(tables=[[] for _ in self.windows])

    def _missing(self, seq_id: int, n_new: int) -> list[int]:
        """New blocks per group for ``n_new`` more tokens."""
        seq = self.seqs[seq_id]
        wanted = ceil_div(seq.length + n_new, self.block_size)
        return [max(0, wanted - len(table)) for table in seq.tables]

    def can_grow(self, seq_id: int, n_new: int) -> bool:
        """Whether the free lists hold the blocks ``n_new`` more tokens need."""
        missing = self._missing(seq_id, n_new)
        return all(m <= len(free) for m, free in zip(missing, self.free, strict=True))

    def grow(self, seq_id: int, n_new: int) -> None:
        """Give ``seq_id`` the blocks for ``n_new`` more tokens (CacheOverflowError if
        the pool lacks them; nothing is taken then)."""
        missing = self._missing(seq_id, n_new)
        if not self.can_grow(seq_id, n_new):
            raise CacheOverflowError(
                f"the KV pool has {[len(f) for f in self.free]} free blocks per group, "
                f"sequence {seq_id} needs {missing} more"
            )
        for table, free, m in zip(self.seqs[seq_id].tables, self.free, missing, strict=True):
            table.extend(free.pop() for _ in range(m))

    def advance(self, seq_id: int, n: int) -> None:
        """Commit ``n`` tokens written by every layer; sliding groups free what fell out
        of their window."""
        seq = self.seqs[seq_id]
        seq.length += n
        if seq.length > len(seq.tables[0]) * self.block_size:
            raise EngineError(f"sequence {seq_id} advanced past its blocks; grow() first")
        for window, table, free in zip(self.windows, seq.tables, self.free, strict=True):
            for i in range(first_kept_block(seq.length, window, self.block_size)):
                block = table[i]
                if block is not None:
                    free.append(block)
                    table[i] = None

    def release(self, seq_id: int) -> None:
        """Return every block of ``seq_id`` and forget it."""
        seq = self.seqs.pop(seq_id)
        for table, free in zip(seq.tables, self.free, strict=True):
            free.extend(b for b in table if b is not None)

    def cells(self, seq_id: int, group: int, start: int, end: int) -> torch.Tensor:
        """Pool cell indices (end - start,) of positions start..end-1 of ``seq_id``."""
        table = self.seqs[seq_id].tables[group]
        bs = self.block_size
        first, last = start // bs, ceil_div(end, bs)
        if any(b is None for b in table[first:last]):
            raise EngineError(f"positions {start}..{end - 1} of sequence {seq_id} were "
                              "freed (out of the window)")
        blocks = torch.tensor(table[first:last], dtype=torch.long)  # physical ids
        positions = torch.arange(start, end)  # (end - start,)
        return blocks[positions // bs - first] * bs + positions % bs


class PagedBatch:
    """The cache of one forward over ``seq_ids``, each adding ``n_new`` tokens.

    Keeps the contiguous cache's interface (positions, update, attn_mask, advance);
    rows have their own lengths, so positions are (B, T) and masks (B, 1, T, S). The
    blocks for the new tokens must be taken first (:meth:`BlockPool.grow`).
    """

    def __init__(self, pool: BlockPool, seq_ids: list[int], n_new: int) -> None:
        self.pool = pool
        self.seq_ids = seq_ids
        self.n_new = n_new
        starts = torch.tensor([pool.length(s) for s in seq_ids])  # (B,)
        self.query_pos = starts[:, None] + torch.arange(n_new)  # (B, T)
        self._write: list[torch.Tensor] = []  # per group: cells (B*T,) of the new tokens
        self._read: list[torch.Tensor] = []  # per group: cells (B, S) to gather
        self._masks: list[torch.Tensor] = []  # per group: (B, 1, T, S)
        for group, window in enumerate(pool.windows):
            self._plan(group, window, [int(s) for s in starts])

    def _plan(self, group: int, window: int | None, starts: list[int]) -> None:
        """Cells to write and to read for ``group``, and its mask, for every row."""
        pool = self.pool
        bs = pool.block_size
        tables = [pool.seqs[s].tables[group] for s in self.seq_ids]
        lows = torch.tensor([first_kept_block(s, window, bs) * bs for s in starts])  # (B,)
        ends = self.query_pos[:, -1] + 1  # (B,)
        width = int((ends - lows).max())  # S: the most keys a row attends over
        # One row per sequence: its physical block ids (freed ones, never read, as 0).
        n_cols = max(len(t) for t in tables)
        table = torch.tensor([[b or 0 for b in t] + [0] * (n_cols - len(t)) for t in tables])
        key_pos = lows[:, None] + torch.arange(width)  # (B, S)
        valid = key_pos < ends[:, None]  # (B, S): False on padding
        key_pos = torch.where(valid, key_pos, -1)
        read = self._cells(table, key_pos.clamp(min=0))  # (B, S)
        self._read.append(torch.where(valid, read, 0))  # padding reads cell 0
        self._write.append(self._cells(table, self.query_pos).reshape(-1))  # (B*T,)
        self._masks.append(position_mask(self.query_pos, key_pos, window))

    def _cells(self, table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Pool cells (B, n) of positions (B, n), through each row's block table."""
        bs = self.pool.block_size
        return table.gather(1, positions // bs) * bs + positions % bs

    def positions(self, n_new: int, start_pos: int | None = None) -> torch.Tensor:
        """Positions (B, T) of the new tokens (each row follows its own sequence)."""
        if start_pos is not None or n_new != self.n_new:
            raise EngineError(
                f"a paged batch was planned for {self.n_new} new tokens per row at each "
                f"row's own position; got n_new={n_new}, start_pos={start_pos}"
            )
        end = int(self.query_pos[:, -1].max()) + 1
        if end > self.pool.config.max_len:
            raise PromptTooLongError(
                f"positions up to {end} exceed the model's max_len "
                f"{self.pool.config.max_len}; shorten the input"
            )
        return self.query_pos

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v (B, kvh, T, hd) into the rows' blocks; return every row's kept
        keys and values (B, kvh, S, hd), in position order, padded at the end."""
        group = self.pool.layer_group[layer]
        pool_k, pool_v = self.pool.k[layer], self.pool.v[layer]  # (cells, kvh, hd)
        B, kvh, T, hd = k.shape
        cells = self._write[group]  # (B*T,)
        pool_k[cells] = k.transpose(1, 2).reshape(B * T, kvh, hd)
        pool_v[cells] = v.transpose(1, 2).reshape(B * T, kvh, hd)
        read = self._read[group]  # (B, S)
        return pool_k[read].transpose(1, 2), pool_v[read].transpose(1, 2)  # (B, kvh, S, hd)

    def attn_mask(self, layer: int, n_new: int, n_keys: int) -> torch.Tensor:
        """(B, 1, T, S): causal per row, within the layer's window, padding hidden."""
        return self._masks[self.pool.layer_group[layer]]

    def advance(self, n: int) -> None:
        """Commit the new tokens of every row."""
        for seq_id in self.seq_ids:
            self.pool.advance(seq_id, n)
