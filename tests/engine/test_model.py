from __future__ import annotations

import pytest
import torch

from kvlab.engine import KVCache, ModelConfig, build_model, causal_mask
from kvlab.errors import EngineError, PromptTooLongError
from tests.rounding import assert_close_up_to_rounding

TINY = ModelConfig(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_len=64)


def test_mask_two_new_tokens_after_a_cache_of_four() -> None:
    mask = causal_mask(2, 4)
    assert mask.dtype == torch.bool and mask.shape == (2, 6)
    assert mask.tolist() == [
        [True, True, True, True, True, False],  # the first new query misses the second
        [True, True, True, True, True, True],  # the second sees everything before it
    ]


def test_mask_without_past_is_lower_triangular() -> None:
    assert torch.equal(causal_mask(4, 0), torch.ones(4, 4, dtype=torch.bool).tril())


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    a, b, c = build_model(TINY, seed=7), build_model(TINY, seed=7), build_model(TINY, seed=8)
    ids = torch.randint(0, 256, (1, 10))
    assert torch.equal(a(ids), b(ids))
    assert not torch.equal(a(ids), c(ids))
    assert not a.training and not any(p.requires_grad for p in a.parameters())


def test_build_model_leaves_global_rng_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    build_model(TINY, seed=1)
    assert torch.equal(torch.rand(3), expected)


def test_cached_chunks_match_one_full_pass() -> None:
    model = build_model(TINY)
    ids = torch.randint(0, 256, (2, 11))  # batch of 2
    full = model(ids)  # (2, 11, vocab)
    cache = KVCache(TINY, batch=2, max_len=11)
    parts = []
    for start, end in ((0, 4), (4, 5), (5, 11)):  # prefill, one token, several after past
        parts.append(model(ids[:, start:end], cache, start_pos=cache.length))
        cache.advance(end - start)
    assert_close_up_to_rounding(torch.cat(parts, dim=1), full, TINY, 11)
    assert cache.length == 11


def test_start_pos_must_follow_the_cache_and_fit_max_len() -> None:
    model = build_model(TINY)
    cache = KVCache(TINY, max_len=8)
    with pytest.raises(EngineError, match="start_pos"):
        model(torch.zeros(1, 2, dtype=torch.long), cache, start_pos=3)
    with pytest.raises(PromptTooLongError, match="max_len 64"):
        model(torch.zeros(1, 65, dtype=torch.long))
