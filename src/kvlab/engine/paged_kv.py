"""The K/V tensors of the paged cache, kept apart from the block allocator.

:class:`kvlab.engine.paged.BlockPool` decides *which* blocks a sequence holds: it hands
out block ids, counts who holds each, and names full blocks for prefix caching; it
touches no tensor. :class:`PagedKV` is *what* the blocks hold: per layer one K and one
V tensor of ``n_blocks * block_size`` cells, shaped (cells, kvh, hd), allocated once.
Block ``b`` is cells ``b*bs .. b*bs+bs-1`` of every layer, so the pool's cell indices
(:meth:`BlockPool.cells`) address these tensors directly; only
:class:`kvlab.engine.ragged.RaggedBatch` reads and writes them, during a forward.

The split is vLLM v1's (the scheduler's ``KVCacheManager`` and ``BlockPool`` deal in
block ids and reference counts; the worker's model runner allocates the per-layer KV
tensors) and nano-vllm's (``BlockManager`` beside ``ModelRunner.allocate_kv_cache``):
the allocator can be asked about, tested and sized without allocating a byte of K/V.
"""

from __future__ import annotations

import torch

from kvlab.engine.cache import CacheLayout
from kvlab.engine.paged import DEFAULT_BLOCK_SIZE, BlockPool
from kvlab.errors import EngineError


class PagedKV:
    """Per-layer K and V tensors (cells, kvh, hd) for a pool of ``n_blocks`` blocks of
    ``block_size`` tokens, in ``dtype`` (the model's) on ``device``."""

    def __init__(
        self, config: CacheLayout, n_blocks: int, block_size: int = DEFAULT_BLOCK_SIZE,
        dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
    ) -> None:
        if n_blocks <= 0 or block_size <= 0:
            raise EngineError(
                f"paged K/V needs n_blocks > 0 and block_size > 0, got {n_blocks} and "
                f"{block_size}"
            )
        self.n_blocks = n_blocks
        self.block_size = block_size
        self.n_cells = n_blocks * block_size
        self.k = [torch.zeros((self.n_cells, config.n_kv_heads, config.head_dim),
                              dtype=dtype, device=device)
                  for _ in range(config.n_layers)]  # (cells, kvh, hd)
        self.v = [torch.zeros_like(k) for k in self.k]  # (cells, kvh, hd)

    @classmethod
    def for_pool(cls, pool: BlockPool, dtype: torch.dtype = torch.float32,
                 device: str | torch.device = "cpu") -> PagedKV:
        """Tensors for every block ``pool`` can hand out, on every layer of its model."""
        return cls(pool.config, pool.n_blocks, pool.block_size, dtype, device)

    def check_fits(self, pool: BlockPool) -> None:
        """EngineError unless these tensors hold every cell of every layer of ``pool``."""
        c = pool.config
        ours = (self.n_blocks, self.block_size, len(self.k), *self.k[0].shape[1:])
        theirs = (pool.n_blocks, pool.block_size, c.n_layers, c.n_kv_heads, c.head_dim)
        if ours != theirs:
            raise EngineError(
                "paged K/V of {} blocks of {} on {} layers of ({}, {}) cells does not match "
                "a pool of {} blocks of {} on {} layers of ({}, {}); build it with "
                "PagedKV.for_pool".format(*ours, *theirs)
            )

    @property
    def nbytes(self) -> int:
        """Bytes of every layer's K and V (all blocks, used or not)."""
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block on one layer, K and V."""
        return 2 * self.block_size * self.k[0][0].numel() * self.k[0].element_size()
