"""Prompt reuse on a cache with sliding-window layers (Gemma 3's ring of W cells)."""

from __future__ import annotations

import torch

from kvlab.engine.cache import KVCache
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.serve.prompt_cache import keep_prefix, reusable_prefix

WINDOW = 4
CONFIG = GemmaConfig(vocab_size=32, d_model=8, n_layers=2, n_heads=2, n_kv_heads=1,
                     head_dim=4, ffn_dim=16, max_len=64, window=WINDOW,
                     sliding=(True, False))


def _filled(n: int) -> KVCache:
    """A cache of 16 tokens' room holding ``n`` tokens (its ring wrapped past W)."""
    cache = KVCache(CONFIG, max_len=16)
    for _ in range(n):
        for layer in range(CONFIG.n_layers):
            kv = torch.zeros(1, 1, 1, CONFIG.head_dim)  # (B, kvh, 1, hd)
            cache.update(layer, kv, kv)
        cache.advance(1)
    return cache


def test_reusable_prefix_keeps_one_prompt_token_to_compute() -> None:
    assert reusable_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert reusable_prefix([1, 2, 3], [1, 2, 3]) == 2
    assert reusable_prefix([], [5]) == 0


def test_a_prefix_still_inside_the_window_is_kept() -> None:
    cache = _filled(10)  # the ring holds positions 6..9
    assert keep_prefix(cache, 9) == 9 and cache.length == 9


def test_a_prefix_the_ring_overwrote_is_recomputed_from_the_start() -> None:
    cache = _filled(10)
    assert keep_prefix(cache, 3) == 0 and cache.length == 0


def test_no_reuse_empties_a_wrapped_cache() -> None:
    cache = _filled(10)
    assert keep_prefix(cache, 0) == 0 and cache.length == 0
