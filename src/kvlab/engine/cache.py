"""A preallocated KV cache with an explicit length, full or sliding-window per layer.

Each layer has its own K and V buffers shaped [batch, kv_heads, cells, head_dim];
``cache.k[layer]`` is one of them. A layer of full attention has ``max_len`` cells and
keeps token ``p`` in cell ``p``. A sliding-window layer (window W, Gemma 3's local
layers) has only W cells, used as a ring: token ``p`` goes to cell ``p % W`` and
overwrites the token W positions earlier, which no later query can see any more.

The interface both caches keep (:class:`KVStore`: this one and the flattened paged
batch of :mod:`kvlab.engine.ragged`): the model asks :meth:`KVCache.positions` where
its new tokens sit; each layer hands its new queries, keys and values to
:meth:`KVCache.attend`, which stores the keys and values (:meth:`KVCache.update`)
and attends over what each query may see (:meth:`KVCache.attn_mask`); the engine,
not a layer, calls :meth:`KVCache.advance` once every layer has written. Nothing grows
as the sequence grows.
"""

from __future__ import annotations

from typing import Protocol

import torch

from kvlab.engine.attention import attend
from kvlab.engine.masks import contiguous_mask
from kvlab.errors import CacheOverflowError, ConfigError, EngineError, PromptTooLongError


class CacheLayout(Protocol):
    """What a cache needs from a model config (both architectures provide it; read-only,
    so a frozen dataclass is one)."""

    @property
    def n_layers(self) -> int: ...

    @property
    def n_kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def max_len(self) -> int: ...

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """Per layer: its sliding window in tokens, or None for full attention."""
        ...


class KVStore(Protocol):
    """What a model's forward needs from a cache (contiguous or a flattened paged
    batch)."""

    def positions(self, n_new: int, start_pos: int | None = None) -> torch.Tensor:
        """Positions of the new tokens: (T,) for one sequence (or a batch of equal
        ones), (1, T) for a flattened batch of sequences."""
        ...

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        scale: float | None = None,
    ) -> torch.Tensor:
        """Store the new K/V (B, kvh, T, hd) of ``layer``; return attention (B, nh, T, hd)
        of the queries q (B, nh, T, hd) over the keys each may see, the new ones
        included. ``scale`` None is 1/sqrt(hd)."""
        ...


def check_positions(cache: KVCache | None, start_pos: int, n_tokens: int, max_len: int
                    ) -> int:
    """Refuse a forward that does not follow the cache or runs past ``max_len``; return
    the end position (exclusive)."""
    if cache is not None and start_pos != cache.length:
        raise EngineError(
            f"start_pos {start_pos} does not follow the cache, which holds "
            f"{cache.length} tokens; pass start_pos=cache.length"
        )
    end = start_pos + n_tokens
    if end > max_len:
        raise PromptTooLongError(
            f"positions up to {end} exceed the model's max_len {max_len}; shorten the input"
        )
    return end


class KVCache:
    """Per-layer K and V buffers for ``batch`` sequences of up to ``max_len`` tokens.

    ``max_len`` None means the model's ``config.max_len``. A window at least as long
    as ``max_len`` never slides, so that layer gets a plain buffer of ``max_len`` cells.
    """

    def __init__(
        self,
        config: CacheLayout,
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
        # None where the layer keeps every token; W where it keeps a ring of W cells.
        self.windows: list[int | None] = [
            w if w is not None and w < max_len else None for w in config.layer_windows
        ]
        self.cells = [max_len if w is None else w for w in self.windows]
        self.k = [
            torch.zeros((batch, config.n_kv_heads, cells, config.head_dim),
                        dtype=dtype, device=device)  # (B, kvh, cells, hd)
            for cells in self.cells
        ]
        self.v = [torch.zeros_like(k) for k in self.k]  # (B, kvh, cells, hd)
        self.length = 0  # tokens every layer holds
        # End of what each layer has written; runs ahead of `length` between the
        # layers' writes and the engine's advance().
        self._written = [0] * config.n_layers
        # Positions are sliced from one buffer: no new tensor per decoded token.
        self._positions = torch.arange(config.max_len, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes held by the allocated K and V buffers (every cell, not just the fill)."""
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    def reset(self) -> None:
        """Forget every token; the buffers are kept and overwritten by the next writes."""
        self.length = 0
        self._written = [0] * self.config.n_layers

    def truncate(self, n: int) -> None:
        """Keep only the first ``n`` tokens (prefix reuse); their K/V stay in place.

        A ring may already have overwritten tokens the kept prefix still needs (the
        last W - 1 before position ``n``); then EngineError says so.
        """
        if not 0 <= n <= self.length:
            raise EngineError(
                f"cannot truncate a cache of {self.length} tokens to {n}; "
                f"choose 0..{self.length}"
            )
        for layer, window in enumerate(self.windows):
            # Keeping nothing (n = 0) needs no cell, whatever the ring overwrote.
            if window is not None and n > 0 and max(0, n - window + 1) < self.length - window:
                raise EngineError(
                    f"cannot truncate to {n} tokens: sliding-window layer {layer} keeps "
                    f"only the last {window} of {self.length} and has overwritten some "
                    f"of the {window - 1} tokens before position {n}; recompute instead"
                )
        self.length = n
        self._written = [n] * self.config.n_layers

    def positions(self, n_new: int, start_pos: int | None = None) -> torch.Tensor:
        """Positions (T,) of ``n_new`` tokens that follow the cache. ``start_pos``, if
        given, must equal ``length`` (EngineError); past the model's max_len:
        PromptTooLongError."""
        start = self.length if start_pos is None else start_pos
        end = check_positions(self, start, n_new, self.config.max_len)
        return self._positions[start:end]

    def attn_mask(self, layer: int, n_new: int, n_keys: int) -> torch.Tensor | None:
        """Mask (T, n_keys) for the keys :meth:`update` just returned, or None (one
        token seeing all, or plain causal)."""
        return contiguous_mask(n_new, self.length, self.windows[layer], n_keys)

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        scale: float | None = None,
    ) -> torch.Tensor:
        """Store ``k``, ``v`` (B, kvh, T, hd), then attend: (B, nh, T, hd)."""
        keys, values = self.update(layer, k, v)  # (B, kvh, S, hd): cached + new
        mask = self.attn_mask(layer, q.shape[2], keys.shape[2])  # None or (T, S)
        return attend(q, keys, values, mask, scale=scale)  # (B, nh, T, hd)

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``, ``v`` (B, kvh, n_new, hd) at positions length..length+n_new-1.

        Returns the keys and values (B, kvh, n_keys, hd) the new queries may need,
        ending with the new ones. Full layer: views of positions 0..end-1. Sliding
        layer, several new tokens: a copy of positions end-n_new-W+1..end-1 in position
        order. Sliding layer, one new token: a view of the ring, in ring order once it
        has wrapped, which is harmless because the one query sees every cell.
        """
        start = self.length
        n_new = k.shape[2]
        end = start + n_new
        if end > self.max_len:
            raise CacheOverflowError(
                f"KV cache overflow: writing {n_new} token(s) at position {start} "
                f"needs {end} slots but the cache holds {self.max_len}; allocate a "
                f"larger cache (max_len) or shorten the prompt/generation"
            )
        self._written[layer] = end
        ck, cv = self.k[layer], self.v[layer]  # (B, kvh, cells, hd)
        window = self.windows[layer]
        if window is None:
            ck[:, :, start:end] = k
            cv[:, :, start:end] = v
            return ck[:, :, :end], cv[:, :, :end]
        if n_new == 1:
            ck[:, :, start % window] = k[:, :, 0]
            cv[:, :, start % window] = v[:, :, 0]
            return ck[:, :, :min(end, window)], cv[:, :, :min(end, window)]
        # Several new tokens: the first one looks back W - 1 positions.
        past = torch.arange(max(0, start - window + 1), start) % window  # cells, in order
        keys = torch.cat([ck[:, :, past], k], dim=2)  # (B, kvh, n_keys, hd)
        values = torch.cat([cv[:, :, past], v], dim=2)  # (B, kvh, n_keys, hd)
        kept = min(n_new, window)  # only the last W new tokens stay
        cells = torch.arange(end - kept, end) % window
        ck[:, :, cells] = k[:, :, n_new - kept:]
        cv[:, :, cells] = v[:, :, n_new - kept:]
        return keys, values

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
        """Tokens written by each layer (equal to ``length`` after a completed step);
        a sliding-window layer holds only the last ``min(length, W)`` of them."""
        return list(self._written)
