"""What the generate loop needs from a model: the contract both architectures keep.

The toy (:class:`kvlab.engine.model.TinyLM`) and Gemma 3
(:class:`kvlab.engine.gemma.Gemma3`) are called the same way and describe themselves
with the same few config fields, so one cache and one decode loop serve both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch

from kvlab.engine.cache import CacheLayout, KVCache
from kvlab.errors import EngineError, PromptTooLongError


class LMConfig(CacheLayout, Protocol):
    """The config fields the loop reads (besides the cache layout)."""

    vocab_size: int

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Token ids that end a generation when EOS is not ignored."""
        ...


class LanguageModel(Protocol):
    """A causal LM called as ``model(ids, cache, start_pos=..., last_only=...)``."""

    @property
    def config(self) -> LMConfig:
        """Its shape."""
        ...

    def __call__(
        self, ids: torch.Tensor, cache: KVCache | None = None, start_pos: int = 0,
        last_only: bool = False,
    ) -> torch.Tensor:
        """Logits (B, T, vocab) for ids (B, T) at positions start_pos..; (B, 1, vocab)
        of the last position with ``last_only``. Writes K/V into ``cache``, never
        advances it."""
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


def check_positions(cache: KVCache | None, start_pos: int, n_tokens: int, max_len: int
                    ) -> int:
    """Refuse a forward that does not follow the cache or runs past ``max_len``; return
    the end position (exclusive). Both models call it first."""
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
