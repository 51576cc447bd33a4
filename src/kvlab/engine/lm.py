"""What the generate loop needs from a model: the contract both architectures keep.

The toy (:class:`kvlab.engine.model.TinyLM`) and Gemma 3
(:class:`kvlab.engine.gemma.Gemma3`) are called the same way and describe themselves
with the same few config fields, so one cache and one decode loop serve both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch

from kvlab.engine.cache import CacheLayout, KVCache, KVStore, check_positions


class LMConfig(CacheLayout, Protocol):
    """The config fields the loop reads (besides the cache layout), and the widths the
    rounding bound of :mod:`kvlab.engine.rounding` reads."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def d_model(self) -> int: ...

    @property
    def n_heads(self) -> int: ...

    @property
    def attention_kind(self) -> str:
        """How its layers attend, in words (for proofs and tables)."""
        ...

    @property
    def mlp_width(self) -> int:
        """Width of the MLP's hidden layer."""
        ...

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Token ids that end a generation when EOS is not ignored."""
        ...


class LanguageModel(Protocol):
    """A causal LM called as ``model(ids, cache, start_pos=..., last_only=...)`` (or
    ``logits_at=...``)."""

    @property
    def config(self) -> LMConfig:
        """Its shape."""
        ...

    def __call__(
        self, ids: torch.Tensor, cache: KVStore | None = None, start_pos: int | None = None,
        last_only: bool = False, logits_at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, vocab) for ids (B, T) at the positions the cache gives (or
        start_pos.. without one); (B, 1, vocab) of the last position with
        ``last_only``; (B, K, vocab) of the token indices ``logits_at`` (K,). Writes
        K/V into ``cache``, never advances it."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """Its weights (their dtype is the cache's)."""
        ...


def model_dtype(model: LanguageModel) -> torch.dtype:
    """The dtype of the model's weights, which its KV cache uses too."""
    return next(iter(model.parameters())).dtype


def new_cache(model: LanguageModel, max_len: int, batch: int = 1) -> KVCache:
    """A cache for ``model`` of ``max_len`` tokens, in the model's dtype."""
    return KVCache(model.config, batch=batch, max_len=max_len, dtype=model_dtype(model))


def new_positions(cache: KVStore | None, start_pos: int | None, n_tokens: int,
                  table: torch.Tensor) -> torch.Tensor:
    """Positions of ``n_tokens`` new tokens: the cache's, or ``table[start_pos:...]``
    (``table`` holds 0..max_len-1) without a cache. Both models call it first."""
    if cache is not None:
        return cache.positions(n_tokens, start_pos)
    start = 0 if start_pos is None else start_pos
    end = check_positions(None, start, n_tokens, len(table))
    return table[start:end]


__all__ = ["LMConfig", "LanguageModel", "check_positions", "model_dtype", "new_cache",
           "new_positions"]
