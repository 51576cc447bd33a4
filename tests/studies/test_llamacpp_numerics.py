"""The emulation of llama.cpp's CPU numerics: activation blocks, F16 cache, flash
attention's one-chunk path, the GELU table, the server's prompt ubatches; then the real
Gemma 3 270M under it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.engine.gguf_tokenizer import GGUFTokenizer
from kvlab.engine.masks import causal_mask
from kvlab.studies.llamacpp_numerics import (
    F16KVCache,
    fake_q8_0,
    fake_q8_K,
    ggml_gelu,
    llamacpp_teacher_forced_logits,
    one_chunk_attention,
    server_prompt_ubatches,
    weight_types,
)
from tests.rounding import assert_close_up_to_rounding


def test_q8_0_known_block_rounds_half_to_even() -> None:
    # max |x| = 127: scale 1, so q = x rounded; AVX2 rounds ties to even (0.5 -> 0,
    # 2.5 -> 2, -2.5 -> -2), unlike the reference's roundf.
    x = torch.zeros(64)
    x[:7] = torch.tensor([127.0, 0.5, 1.5, 2.5, -2.5, 3.2, -126.6])
    x[32:34] = torch.tensor([0.0, -0.0])  # an all-zero block stays zero
    out = fake_q8_0(x)
    assert out[:7].tolist() == [127.0, 0.0, 2.0, 2.0, -2.0, 3.0, -127.0]
    assert out[7:].abs().sum() == 0


def test_q8_0_scale_is_stored_in_fp16() -> None:
    x = torch.full((32,), 0.3)
    x[0] = 2.54  # d = 0.02, stored as fp16 0.0200042724609375
    d = float(torch.tensor(0.02).half())
    assert fake_q8_0(x)[0].item() == pytest.approx(127 * d, rel=1e-7)
    assert fake_q8_0(x)[1].item() == pytest.approx(15 * d, rel=1e-7)  # 0.3 * 50 = 15


def test_q8_0_equals_gguf_quantize_on_random_rows() -> None:
    from gguf import GGMLQuantizationType, dequantize, quantize

    x = np.random.default_rng(0).standard_normal((16, 1024)).astype(np.float32)
    theirs = dequantize(quantize(x, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0)
    assert np.array_equal(fake_q8_0(torch.from_numpy(x)).numpy(), theirs)


def test_q8_K_known_blocks() -> None:
    # Block 1: its largest |x| is -127, so iscale = 1 and q = round-half-even(x).
    # Block 2: largest +254, iscale = -0.5: 5 -> -2.5 -> -2 -> 4, 3 -> -1.5 -> -2 -> 4,
    # -254 -> 127 (the clamp at 127), d = 1 / iscale = -2.
    x = torch.zeros(512)
    x[:4] = torch.tensor([-127.0, 2.5, 3.5, -0.5])
    x[256:260] = torch.tensor([254.0, 5.0, 3.0, -254.0])
    out = fake_q8_K(x)
    assert out[:4].tolist() == [-127.0, 2.0, 4.0, -0.0]
    assert out[256:260].tolist() == [254.0, 4.0, 4.0, -254.0]
    assert fake_q8_K(torch.zeros(256)).abs().sum() == 0


def test_q8_K_error_is_within_half_a_step() -> None:
    x = torch.randn(8, 1024, generator=torch.Generator().manual_seed(1))
    step = x.view(-1, 256).abs().amax(-1, keepdim=True) / 127  # (32, 1)
    error = (fake_q8_K(x) - x).view(-1, 256).abs()
    assert bool((error <= step / 2 * (1 + 1e-5)).all())
    assert bool((error > 0).any())


def test_f16_cache_stores_float16_values() -> None:
    config = GemmaConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1,
                         head_dim=4, ffn_dim=8, max_len=8, window=4, sliding=(False,))
    cache = F16KVCache(config, max_len=8)
    k = torch.full((1, 1, 2, 4), 1.0 + 2**-13)  # between two float16 values
    keys, values = cache.update(0, k, k.clone())
    assert keys.unique().tolist() == [1.0] and values.unique().tolist() == [1.0]


def test_ggml_gelu_uses_the_float16_table() -> None:
    x = torch.tensor([-11.0, -1.2345, 0.1234567, 3.3, 12.5])
    expected = F.gelu(x.half().float(), approximate="tanh").half().float()
    expected[0], expected[-1] = 0.0, 12.5  # outside [-10, 10]: 0 and x
    assert torch.allclose(ggml_gelu(x), expected, rtol=0, atol=1e-7)


def test_one_chunk_attention_is_attention_to_float16_precision() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 5, 64, generator=g)  # 4 query heads on 1 KV head
    k = torch.randn(1, 1, 600, 64, generator=g).half().float()
    v = torch.randn(1, 1, 600, 64, generator=g).half().float()
    visible = causal_mask(5, 595, None, 600)  # (5, 600)
    exact = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=True)
    whole = one_chunk_attention(q, k, v, visible[None, None], 0.125, None)
    split = one_chunk_attention(q, k, v, visible[None, None], 0.125, 2)  # 2 x 256+ cells
    for y in (whole, split):
        assert (y - exact).abs().max() < 5e-3  # an f16 accumulator, ~1e-3 off
    assert not torch.equal(whole, split)  # the split restarts the f16 accumulation
    # A row sees only its visible keys: a row of one key returns that key's value.
    first = one_chunk_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1],
                                torch.ones(1, 1, 1, 1, dtype=torch.bool), 0.125, None)
    assert torch.equal(first, v[:, :, :1].expand(1, 4, 1, 64))


def test_server_prompt_ubatches() -> None:
    assert server_prompt_ubatches(250) == [246, 4]  # the last 4 apart, for a checkpoint
    assert server_prompt_ubatches(6) == [2, 4]
    assert server_prompt_ubatches(600) == [84, 512, 4]
    assert server_prompt_ubatches(3000) == [512] * 4 + [436, 512, 4]
    assert server_prompt_ubatches(3) == [3]


@pytest.mark.slow
def test_llamacpp_numerics_change_the_logits_not_the_greedy_choice(
    gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer, gemma_gguf: Path,
) -> None:
    from kvlab.engine.generate import generate
    from kvlab.studies.agreement import teacher_forced_logits

    ids = gemma_tokenizer.encode("The capital of France is")
    forced = generate(gemma_model, ids, 4).tokens
    plain = teacher_forced_logits(gemma_model, ids, forced)  # (4, V)
    emulated = llamacpp_teacher_forced_logits(gemma_model, weight_types(gemma_gguf), ids,
                                              forced)  # (4, V)
    delta = (plain - emulated).abs().max().item()
    assert 1e-3 < delta < 5.0  # quantized activations move logits, not the model
    assert emulated.argmax(-1).tolist() == plain.argmax(-1).tolist() == forced
    assert all(not m._forward_pre_hooks for m in gemma_model.modules())  # hooks removed


@pytest.mark.slow
def test_quantized_numerics_amplify_a_last_bit_nudge(
    gemma_model: Gemma3, gemma_tokenizer: GGUFTokenizer, gemma_gguf: Path,
) -> None:
    """Why no torch emulation predicts llama.cpp's near ties: nudge the residual stream
    by ~1e-7 (a float32 rounding) and the emulated logits move by orders of magnitude
    more than the float32 ones, because Q8/F16 rounding turns last-bit differences into
    whole quantization steps."""
    from kvlab.bench.plan.workload import padding_text
    from kvlab.studies.agreement import teacher_forced_logits

    ids = gemma_tokenizer.encode(padding_text()[:600])
    forced = [506, 5279, 529, 506]
    types = weight_types(gemma_gguf)

    def nudged(run: object) -> torch.Tensor:
        g = torch.Generator().manual_seed(0)
        handle = gemma_model.blocks[0].register_forward_pre_hook(
            lambda m, a: (a[0] * (1 + 1e-7 * torch.randn(a[0].shape, generator=g)), *a[1:]))
        try:
            return run()  # type: ignore[operator]
        finally:
            handle.remove()

    def plain() -> torch.Tensor:
        return teacher_forced_logits(gemma_model, ids, forced)

    def emulated() -> torch.Tensor:
        return llamacpp_teacher_forced_logits(gemma_model, types, ids, forced)

    reference = plain()
    # In float32 a last-bit nudge is one more rounding: within the rounding bound.
    float32_move = assert_close_up_to_rounding(nudged(plain), reference, gemma_model.config,
                                               len(ids) + len(forced))
    emulated_move = (emulated() - nudged(emulated)).abs().max().item()
    assert emulated_move > 1e-2 and emulated_move > 100 * float32_move
