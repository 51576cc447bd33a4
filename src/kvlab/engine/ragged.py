"""One forward over many sequences: decode rows and prefill chunks flattened together.

A scheduling step gives each running sequence some new tokens: one while it decodes,
a chunk of its prompt while it prefills. As in vLLM and nano-vllm, they all go
through the model in one forward: the tokens are concatenated into one row (1, N),
each with its own position, so every matrix product, which reads the weights (the
bytes a decode step costs), runs once over all N tokens. Only attention is per
sequence. :class:`RaggedBatch` is the cache that forward sees (the
:class:`~kvlab.engine.cache.KVStore` interface):

- every new token's K/V is written into the cells of its sequence's blocks (block ids
  from the :class:`~kvlab.engine.paged.BlockPool`, tensors of the
  :class:`~kvlab.engine.paged_kv.PagedKV`);
- the one-token segments (decode rows) attend together, in one call: each row's keys
  are gathered from its blocks in position order, padded to the longest row, and the
  padding masked;
- each longer segment (a prefill chunk) attends alone over its sequence's kept keys,
  causal within the chunk and cut by the layer's window.

The gather is a copy, the price of paging without a custom kernel (vLLM's
paged-attention kernel reads the blocks in place). Nothing is padded but the keys of
decode rows: a chunk of 256 tokens next to 8 decode rows costs 264 tokens of matrix
products, not 9 x 256.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.engine.attention import attend
from kvlab.engine.masks import contiguous_mask, position_mask
from kvlab.engine.paged import BlockPool, first_kept_block
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.phases import NO_CLOCK, NoClock, StepClock
from kvlab.errors import EngineError, PromptTooLongError


@dataclass(frozen=True)
class Segment:
    """One sequence's new tokens in the flattened row: positions ``start ..
    start+n_new-1``, at indices ``offset .. offset+n_new-1`` of the row."""

    seq_id: int
    start: int
    n_new: int
    offset: int

    @property
    def last(self) -> int:
        """Index in the row of its last new token (the one whose logits sample)."""
        return self.offset + self.n_new - 1


@dataclass
class _Group:
    """What one window group's layers write and read in this step."""

    write: torch.Tensor  # (N,) pool cells of the N new tokens, in row order
    rows_read: torch.Tensor | None  # (R, S) cells each decode row attends over
    rows_mask: torch.Tensor | None  # (R, 1, 1, S): its keys, padding hidden
    chunks: list[tuple[torch.Tensor, torch.Tensor | None]]  # per chunk: cells, mask


class RaggedBatch:
    """The cache of one forward over ``work``: (sequence id, new tokens) pairs, in the
    order of the flattened ids, over the blocks of ``pool`` and the tensors of ``kv``.
    The blocks for the new tokens must be taken first (:meth:`BlockPool.grow`);
    :meth:`advance` commits them after the forward."""

    def __init__(self, pool: BlockPool, kv: PagedKV, work: list[tuple[int, int]],
                 clock: StepClock | None = None) -> None:
        if not work or any(n < 1 for _, n in work):
            raise EngineError(f"a ragged batch needs at least one token per sequence: {work}")
        kv.check_fits(pool)
        self.pool = pool
        self.kv = kv
        self.clock: StepClock | NoClock = clock or NO_CLOCK  # the step's phases, if timed
        self.segments: list[Segment] = []
        offset = 0
        for seq_id, n_new in work:
            self.segments.append(Segment(seq_id, pool.length(seq_id), n_new, offset))
            offset += n_new
        self.n_tokens = offset
        self.query_pos = torch.cat([torch.arange(s.start, s.start + s.n_new)
                                    for s in self.segments])[None]  # (1, N)
        self.rows = [s for s in self.segments if s.n_new == 1]
        self.row_index = torch.tensor([s.offset for s in self.rows])  # (R,) in the row
        self.chunks = [s for s in self.segments if s.n_new > 1]
        self._groups = [self._plan(g, w) for g, w in enumerate(pool.windows)]

    def _plan(self, group: int, window: int | None) -> _Group:
        """Cells to write and to read for ``group``, and its masks."""
        pool, bs = self.pool, self.pool.block_size
        write = torch.cat([pool.cells(s.seq_id, group, s.start, s.start + s.n_new)
                           for s in self.segments])  # (N,)
        chunks = []
        for s in self.chunks:
            low = first_kept_block(s.start, window, bs) * bs  # its first query's oldest key
            end = s.start + s.n_new
            chunks.append((pool.cells(s.seq_id, group, low, end),  # (S,)
                           contiguous_mask(s.n_new, s.start, window, end - low)))  # (T, S)
        if not self.rows:
            return _Group(write, None, None, chunks)
        tables = [pool.table(s.seq_id, group) for s in self.rows]
        n_cols = max(len(t) for t in tables)
        # One row per sequence: its physical block ids (freed ones, never read, as 0).
        table = torch.tensor([[b or 0 for b in t] + [0] * (n_cols - len(t)) for t in tables])
        lows = torch.tensor([first_kept_block(s.start, window, bs) * bs for s in self.rows])
        ends = torch.tensor([s.start + 1 for s in self.rows])  # (R,)
        width = int((ends - lows).max())  # S: the most keys a row attends over
        key_pos = lows[:, None] + torch.arange(width)  # (R, S)
        valid = key_pos < ends[:, None]  # (R, S): False on padding
        key_pos = torch.where(valid, key_pos, -1)
        safe = key_pos.clamp(min=0)
        read = table.gather(1, safe // bs) * bs + safe % bs  # (R, S)
        mask = position_mask(ends[:, None] - 1, key_pos, window)  # (R, 1, 1, S)
        return _Group(write, torch.where(valid, read, 0), mask, chunks)  # padding: cell 0

    def positions(self, n_new: int, start_pos: int | None = None) -> torch.Tensor:
        """Positions (1, N) of the flattened new tokens (each its sequence's own)."""
        if start_pos is not None or n_new != self.n_tokens:
            raise EngineError(
                f"a ragged batch was planned for {self.n_tokens} tokens at each sequence's "
                f"own position; got n_new={n_new}, start_pos={start_pos}"
            )
        end = int(self.query_pos.max()) + 1
        if end > self.pool.config.max_len:
            raise PromptTooLongError(
                f"positions up to {end} exceed the model's max_len "
                f"{self.pool.config.max_len}; shorten the input"
            )
        return self.query_pos

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        scale: float | None = None,
    ) -> torch.Tensor:
        """Write k, v (1, kvh, N, hd) into the sequences' blocks; attention (1, nh, N, hd)
        of q (1, nh, N, hd): decode rows together, each chunk alone."""
        plan = self._groups[self.pool.layer_group[layer]]
        pool_k, pool_v = self.kv.k[layer], self.kv.v[layer]  # (cells, kvh, hd)
        pool_k.index_copy_(0, plan.write, k[0].transpose(0, 1))  # (N, kvh, hd)
        pool_v.index_copy_(0, plan.write, v[0].transpose(0, 1))
        if not self.chunks:  # decode rows only, row r is token r: no scatter back
            assert plan.rows_read is not None and plan.rows_mask is not None
            out = self._attend_rows(pool_k, pool_v, q[0].transpose(0, 1)[:, :, None],
                                    plan.rows_read, plan.rows_mask, scale)  # (R,nh,1,hd)
            return out.transpose(0, 2)  # (1, nh, N, hd)
        y = torch.empty_like(q)  # (1, nh, N, hd)
        if plan.rows_read is not None and plan.rows_mask is not None:
            q_rows = q[0, :, self.row_index].transpose(0, 1)[:, :, None]  # (R, nh, 1, hd)
            out = self._attend_rows(pool_k, pool_v, q_rows, plan.rows_read, plan.rows_mask,
                                    scale)  # (R, nh, 1, hd)
            y[0, :, self.row_index] = out[:, :, 0].transpose(0, 1)  # (nh, R, hd)
        for s, (cells, mask) in zip(self.chunks, plan.chunks, strict=True):
            running = self.clock.phase("gather")
            keys = pool_k.index_select(0, cells).transpose(0, 1)[None]  # (1, kvh, S, hd)
            values = pool_v.index_select(0, cells).transpose(0, 1)[None]  # (1, kvh, S, hd)
            self.clock.phase(running)
            part = q[:, :, s.offset:s.offset + s.n_new]  # (1, nh, T, hd)
            y[:, :, s.offset:s.offset + s.n_new] = attend(part, keys, values, mask, scale)
        return y

    def _attend_rows(self, pool_k: torch.Tensor, pool_v: torch.Tensor, q_rows: torch.Tensor,
                     read: torch.Tensor, mask: torch.Tensor, scale: float | None
                     ) -> torch.Tensor:
        """Attention (R, nh, 1, hd) of the decode rows' queries q_rows (R, nh, 1, hd) over
        the cells ``read`` (R, S) of the pool, padding hidden by ``mask``."""
        R, S = read.shape
        cells = read.view(-1)  # (R*S,)
        running = self.clock.phase("gather")  # the copy out of the paged pool
        keys = pool_k.index_select(0, cells).view(R, S, *pool_k.shape[1:])  # (R,S,kvh,hd)
        values = pool_v.index_select(0, cells).view(R, S, *pool_v.shape[1:])
        self.clock.phase(running)
        return attend(q_rows, keys.transpose(1, 2), values.transpose(1, 2), mask, scale)

    def advance(self) -> None:
        """Commit every sequence's new tokens (after the forward)."""
        for s in self.segments:
            self.pool.advance(s.seq_id, s.n_new)
