from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlab.engine import KVCache, generate
from kvlab.engine.gemma import (
    RMSNorm,
    apply_rope,
    build_gemma,
    rms_norm,
    rope_angles,
    rope_tables,
    rotate,
)
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.errors import ConfigError, EngineError, PromptTooLongError
from tests.rounding import assert_close_up_to_rounding, assert_same_generation

# Gemma 3's layout in miniature: 4 query heads on 1 KV head, a window of 4 tokens on
# two of every three layers, two RoPE bases.
TINY = GemmaConfig(vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=1,
                   head_dim=16, ffn_dim=48, max_len=64, rope_base_global=1e6,
                   rope_base_local=1e4, window=4, sliding=(True, True, False))
MODEL = build_gemma(TINY, seed=1)


def test_rmsnorm_scales_by_one_plus_weight() -> None:
    norm = RMSNorm(4, eps=0.0)
    x = torch.tensor([[1.0, -1.0, 1.0, -1.0]])  # rms 1
    assert torch.equal(norm(x), x)  # zero weight: the identity
    with torch.no_grad():
        norm.weight.fill_(1.0)
    assert torch.equal(norm(x), 2 * x)


def test_rope_rotates_pairs_and_keeps_norms() -> None:
    x = torch.randn(1, 2, 5, 8)
    cos, sin = rope_angles(torch.arange(5), 8, 10_000.0)
    y = apply_rope(x, cos, sin)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.equal(y[:, :, 0], x[:, :, 0])  # position 0 is not rotated
    # Attention scores depend only on the distance: <q_m, k_n> = f(m - n).
    q, k = torch.randn(8), torch.randn(8)
    cos, sin = rope_angles(torch.arange(10), 8, 10_000.0)
    qs = apply_rope(q.expand(1, 1, 10, 8), cos, sin)[0, 0]
    ks = apply_rope(k.expand(1, 1, 10, 8), cos, sin)[0, 0]
    assert torch.allclose(qs[5] @ ks[3], qs[7] @ ks[5], atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_norm_is_torchs_rms_norm_bit_for_bit(dtype: torch.dtype) -> None:
    """rms_norm makes fewer torch calls than F.rms_norm, with the same numbers; one
    scale row per head normalises several heads at once, as each would be alone."""
    gen = torch.Generator().manual_seed(0)
    x = (3 * torch.randn(2, 3, 5, 16, generator=gen)).to(dtype)  # (B, T, heads, hd)
    scale = 1 + 0.1 * torch.randn(5, 16, generator=gen)  # one row per head
    alone = [F.rms_norm(x[:, :, h].float(), (16,), scale[h], 1e-6).to(dtype) for h in range(5)]
    assert torch.equal(rms_norm(x, scale, 1e-6), torch.stack(alone, dim=2))


def test_a_fused_norm_keeps_its_scale_and_an_unfused_one_follows_its_weight() -> None:
    norm, x = RMSNorm(4, eps=0.0), torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    norm.fuse()
    assert torch.equal(norm(x), x)
    with torch.no_grad():
        norm.weight.fill_(1.0)
    assert torch.equal(norm(x), x)  # kept from its first forward after fuse()
    norm.fuse()
    assert torch.equal(norm(x), 2 * x)


@pytest.mark.parametrize("batched", [False, True])
def test_rotate_is_apply_rope_bit_for_bit(batched: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 3, 8, generator=gen).to(torch.bfloat16)  # (B, T, heads, hd)
    positions = torch.tensor([[3, 4, 5, 6, 7, 8], [0, 1, 2, 9, 10, 11]]) if batched \
        else torch.arange(6)
    cos, sin = rope_angles(positions, 8, 10_000.0, torch.bfloat16)
    want = apply_rope(x.transpose(1, 2), cos, sin).transpose(1, 2)  # (B, T, heads, hd)
    assert torch.equal(rotate(x, *rope_tables(positions, 8, 10_000.0, torch.bfloat16)),
                       want)


@given(
    prompt=st.lists(st.integers(0, 63), min_size=1, max_size=14),
    new=st.integers(1, 6),
    chunk=st.none() | st.integers(1, 5),
)
@settings(max_examples=15, deadline=None)
def test_cached_with_sliding_rings_equals_naive(
    prompt: list[int], new: int, chunk: int | None
) -> None:
    naive = generate(MODEL, prompt, new, use_cache=False, keep_logits=True)
    cached = generate(MODEL, prompt, new, keep_logits=True, prefill_chunk=chunk)
    assert naive.logits is not None and cached.logits is not None
    assert_same_generation(cached.tokens, cached.logits, naive.tokens, naive.logits, TINY,
                           len(prompt) + new)
    assert cached.cache is not None
    assert cached.cache.layer_lengths() == [len(prompt) + new - 1] * 3
    held = len(prompt) + new - 1
    assert cached.cache.cells == [min(4, held), min(4, held), held]  # rings of 4 at most


def test_the_window_changes_what_far_tokens_see() -> None:
    ids = torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(0))
    wide = build_gemma(GemmaConfig(**{**TINY.__dict__, "window": 64}), seed=1)
    narrow, full = MODEL(ids)[0], wide(ids)[0]  # (12, vocab) each
    assert_close_up_to_rounding(narrow[:4], full[:4], TINY, 12)  # within the window: same
    assert not torch.allclose(narrow[4:], full[4:], atol=1e-3)  # beyond it: not


def test_last_only_is_the_last_row_of_the_full_pass() -> None:
    ids = torch.randint(0, 64, (2, 9))
    assert_close_up_to_rounding(MODEL(ids, last_only=True)[:, 0], MODEL(ids)[:, -1], TINY, 9)


def test_cache_and_length_are_checked() -> None:
    cache = KVCache(TINY, max_len=8)
    with pytest.raises(EngineError, match="start_pos"):
        MODEL(torch.zeros(1, 2, dtype=torch.long), cache, start_pos=1)
    with pytest.raises(PromptTooLongError, match="max_len 64"):
        MODEL(torch.zeros(1, 65, dtype=torch.long))


def test_config_is_validated_once() -> None:
    with pytest.raises(ConfigError, match="must divide"):
        GemmaConfig(n_heads=4, n_kv_heads=3)
    with pytest.raises(ConfigError, match="3 flags for 18 layers"):
        GemmaConfig(sliding=(True, True, False))
    assert GemmaConfig().layer_windows.count(None) == 3  # layers 5, 11, 17
    assert GemmaConfig().layer_windows[0] == 512


def test_bfloat16_model_and_cache() -> None:
    model = build_gemma(TINY, seed=1, dtype=torch.bfloat16)
    out = generate(model, [1, 2, 3, 4, 5, 6], 3)
    assert out.cache is not None and out.cache.k[0].dtype == torch.bfloat16
    assert len(out.tokens) == 3


def test_a_prompt_longer_than_the_context_gets_the_toys_error() -> None:
    from kvlab.engine import iter_generate

    with pytest.raises(PromptTooLongError, match="max_len is 64"):
        iter_generate(MODEL, [1] * 60, 10)
