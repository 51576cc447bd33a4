"""A preallocated KV cache with an explicit length.

All layers' K and V live in two buffers shaped [layers, batch, kv_heads, max_len,
head_dim]; ``cache.k[layer]`` is that layer's [batch, kv_heads, max_len, head_dim]
view. A layer writes its new keys and values at the current length with
:meth:`KVCache.update` and attends over the returned views of the filled part; the
engine, not a layer, calls :meth:`KVCache.advance` once every layer has written. Nothing
is concatenated or copied as the sequence grows.
"""

from __future__ import annotations

import torch

from kvlab.engine.config import ModelConfig
from kvlab.errors import CacheOverflowError, ConfigError, EngineError


class KVCache:
    """Per-layer K and V buffers for ``batch`` sequences of up to ``max_len`` tokens.

    ``max_len`` None means the model's ``config.max_len``.
    """

    def __init__(
        self,
        config: ModelConfig,
        batch: int = 1,
        max_len: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        max_len = config.max_len if max_len is None else max_len
        if batch <= 0 or max_len <= 0:
            raise ConfigError(
                f"KV cache batch and max_len must be positive, got batch={batch}, "
                f"max_len={max_len}"
            )
        self.config = config
        self.batch = batch
        self.max_len = max_len
        shape = (config.n_layers, batch, config.n_kv_heads, max_len, config.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, kvh, T, hd)
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, kvh, T, hd)
        self.length = 0  # tokens every layer holds
        # End of what each layer has written; runs ahead of `length` between the
        # layers' writes and the engine's advance().
        self._written = [0] * config.n_layers

    @property
    def nbytes(self) -> int:
        """Bytes held by the allocated K and V buffers (all of max_len, not just the fill)."""
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def reset(self) -> None:
        """Forget every token; the buffers are kept and overwritten by the next writes."""
        self.length = 0
        self._written = [0] * self.config.n_layers

    def truncate(self, n: int) -> None:
        """Keep only the first ``n`` tokens (prefix reuse); their K/V stay in place."""
        if not 0 <= n <= self.length:
            raise EngineError(
                f"cannot truncate a cache of {self.length} tokens to {n}; "
                f"choose 0..{self.length}"
            )
        self.length = n
        self._written = [n] * self.config.n_layers

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``, ``v`` (B, kvh, n_new, hd) at positions length..length+n_new.

        Returns views (B, kvh, length+n_new, hd) of the layer's filled keys and values.
        """
        start = self.length
        end = start + k.shape[2]
        if end > self.max_len:
            raise CacheOverflowError(
                f"KV cache overflow: writing {k.shape[2]} token(s) at position {start} "
                f"needs {end} slots but the cache holds {self.max_len}; allocate a "
                f"larger cache (max_len) or shorten the prompt/generation"
            )
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        self._written[layer] = end
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, n: int) -> None:
        """Commit ``n`` new tokens after every layer has written them."""
        end = self.length + n
        if end > self.max_len:
            raise CacheOverflowError(
                f"KV cache overflow: advancing to {end} tokens past max_len {self.max_len}"
            )
        stale = [i for i, w in enumerate(self._written) if w < end]
        if stale:
            raise EngineError(
                f"KV cache advanced to {end} tokens but layer(s) {stale} wrote only up to "
                f"{[self._written[i] for i in stale]}; run every layer before advance()"
            )
        self.length = end

    def layer_lengths(self) -> list[int]:
        """Tokens written by each layer (equal to ``length`` after a completed step)."""
        return list(self._written)
