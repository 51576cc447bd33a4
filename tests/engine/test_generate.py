from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.engine import EOS_ID, KVCache, ModelConfig, build_model, generate, iter_generate
from kvlab.engine.generate import greedy_tokens
from kvlab.errors import CacheOverflowError, EngineError, PromptTooLongError
from tests.rounding import assert_same_generation

# Tiny shapes of each attention kind, so every example runs in milliseconds.
CONFIGS = {
    kind: ModelConfig(d_model=32, n_heads=4, n_kv_heads=kv, n_layers=2, max_len=48)
    for kind, kv in (("MHA", 4), ("GQA", 2), ("MQA", 1))
}
MODELS = {kind: build_model(cfg, seed=3) for kind, cfg in CONFIGS.items()}


@pytest.mark.parametrize("kind", list(CONFIGS))
@given(
    prompt=st.lists(st.integers(0, 255), min_size=1, max_size=24),
    new=st.integers(1, 8),
    chunk=st.none() | st.integers(1, 7),
    temperature=st.sampled_from([0.0, 0.8]),
)
@settings(max_examples=12, deadline=None)
def test_cached_equals_naive(
    kind: str, prompt: list[int], new: int, chunk: int | None, temperature: float
) -> None:
    model = MODELS[kind]
    naive = generate(model, prompt, new, use_cache=False, temperature=temperature,
                     keep_logits=True)
    cached = generate(model, prompt, new, temperature=temperature, keep_logits=True,
                      prefill_chunk=chunk)
    assert len(cached.tokens) == new
    assert naive.logits is not None and cached.logits is not None
    assert_same_generation(cached.tokens, cached.logits, naive.tokens, naive.logits,
                           model.config, len(prompt) + new)
    assert cached.cache is not None
    assert cached.cache.layer_lengths() == [len(prompt) + new - 1] * 2
    assert cached.cache.length == len(prompt) + new - 1


def test_seeded_sampling_is_deterministic_and_seed_dependent() -> None:
    model = MODELS["GQA"]
    runs = [list(iter_generate(model, [1, 2, 3], 12, temperature=1.0, seed=s))
            for s in (5, 5, 6)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_prompt_too_long_says_the_numbers_before_any_work() -> None:
    model = MODELS["MHA"]  # max_len 48
    with pytest.raises(PromptTooLongError) as err:
        iter_generate(model, [1] * 40, 10)  # raised at the call, not at next()
    assert "40 tokens + 10 new tokens needs 49" in str(err.value)
    assert "max_len is 48" in str(err.value)
    assert len(list(iter_generate(model, [1] * 40, 9))) == 9  # 40 + 9 - 1 = 48 fits


def test_bad_requests_are_refused() -> None:
    model = MODELS["MHA"]
    with pytest.raises(EngineError, match="empty"):
        iter_generate(model, [], 3)
    with pytest.raises(EngineError, match=r"0\.\.255"):
        iter_generate(model, [300], 3)
    with pytest.raises(EngineError, match="temperature"):
        iter_generate(model, [1], 3, temperature=-1.0)
    assert list(iter_generate(model, [1], 0)) == []


def test_given_cache_is_reset_reused_and_checked() -> None:
    model = MODELS["MQA"]
    cache = KVCache(model.config, max_len=20)
    first = list(iter_generate(model, [4, 5, 6], 5, cache=cache))
    assert cache.length == 7
    again = list(iter_generate(model, [4, 5, 6], 5, cache=cache))
    assert again == first and cache.length == 7
    with pytest.raises(CacheOverflowError, match="holds 20"):
        iter_generate(model, [1] * 15, 10, cache=cache)


def test_stops_at_eos_unless_ignored() -> None:
    # A model whose head always prefers EOS.
    model = build_model(CONFIGS["MHA"], seed=3)
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.weight[EOS_ID] = 1.0
        model.norm.weight.fill_(1.0)
        model.norm.bias.fill_(10.0)  # all-positive features: EOS's logit wins
    assert list(iter_generate(model, [7, 8], 5, ignore_eos=False)) == []
    assert list(iter_generate(model, [7, 8], 5)) == [EOS_ID] * 5


def test_inference_mode_does_not_leak_between_tokens() -> None:
    model = MODELS["MHA"]
    for use_cache in (True, False):
        stream = iter_generate(model, [1, 2], 3, use_cache=use_cache)
        for _ in stream:
            assert not torch.is_inference_mode_enabled()


def test_first_token_arrives_before_the_rest_are_computed() -> None:
    # A lazy stream: asking for one token does one prefill, not the whole generation.
    model = MODELS["MHA"]
    cache = KVCache(model.config, max_len=20)
    stream = iter_generate(model, [1, 2, 3, 4], 6, cache=cache)
    next(stream)
    assert cache.length == 4  # only the prompt is in the cache so far


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_reusing_a_cached_prefix_gives_the_tokens_of_a_full_recompute(kind: str) -> None:
    model = MODELS[kind]
    cache = KVCache(model.config, max_len=40)
    first_prompt = [7, 8, 9, 10, 11, 12]
    first = list(iter_generate(model, first_prompt, 4, cache=cache, temperature=0.8, seed=5))
    held = first_prompt + first[:-1]  # what the cache holds now
    assert cache.length == len(held)
    prompt = [*held[:8], 3, 2, 1]  # shares 8 tokens with the cache
    reused = list(iter_generate(model, prompt, 5, cache=cache, reuse_prefix=8,
                                temperature=0.8, seed=5))
    assert cache.length == len(prompt) + 5 - 1
    full = list(iter_generate(model, prompt, 5, temperature=0.8, seed=5))
    assert reused == full


def test_a_reuse_prefix_the_cache_cannot_serve_is_refused() -> None:
    model = MODELS["MHA"]
    cache = KVCache(model.config, max_len=40)
    list(iter_generate(model, [1, 2, 3], 2, cache=cache))  # the cache holds 4 tokens
    with pytest.raises(EngineError, match="reuse_prefix 5"):
        iter_generate(model, [1, 2, 3, 4, 5, 6, 7], 2, cache=cache, reuse_prefix=5)
    with pytest.raises(EngineError, match="at least one"):
        iter_generate(model, [1, 2, 3], 2, cache=cache, reuse_prefix=3)
    with pytest.raises(EngineError, match="reuse_prefix"):
        iter_generate(model, [1, 2, 3], 2, reuse_prefix=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("vocab", [262_144, 4096, 1000])  # blocks of 1024, or the fallback
def test_greedy_tokens_are_argmax_with_the_first_of_ties(dtype: torch.dtype, vocab: int
                                                         ) -> None:
    logits = torch.randn(5, vocab, generator=torch.Generator().manual_seed(3)).to(dtype)
    logits[1, :] = 0.0  # all tied: index 0
    logits[2, [vocab - 1, 7, vocab // 2]] = 50.0  # tied maxima in different blocks
    logits[3, [min(1030, vocab - 1), 1025 % vocab]] = 50.0  # tied inside one block
    assert greedy_tokens(logits) == logits.argmax(-1).tolist()
    assert greedy_tokens(logits)[1:4] == [0, 7, 1025 % vocab]
