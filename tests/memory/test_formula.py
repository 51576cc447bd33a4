import pytest
import torch

from kvlab.errors import ConfigError
from kvlab.memory import compare_mha, kv_bytes, shape_from_preset, uniform_shape
from kvlab.studies.kv_measure import measure_kv_bytes


def _gib3(model: str) -> list[str]:
    shape = shape_from_preset(model)
    return [f"{kv_bytes(shape, n, type_k='bf16').gib:.3f}" for n in (2048, 8192, 32768)]


def test_published_projections():
    # seed 000: Llama 3.1 8B and Qwen2.5 7B in bf16 at 2048 / 8192 / 32768 tokens
    assert _gib3("llama-3.1-8b") == ["0.250", "1.000", "4.000"]
    assert _gib3("qwen2.5-7b") == ["0.109", "0.438", "1.750"]
    ratio = (
        kv_bytes(shape_from_preset("qwen2.5-7b"), 8192).total_bytes
        / kv_bytes(shape_from_preset("llama-3.1-8b"), 8192).total_bytes
    )
    assert ratio == 0.4375  # (28 x 4) / (32 x 8)


def test_toy_formula_equals_engine_cache():
    from kvlab.engine import KVCache, get_preset

    est = kv_bytes(shape_from_preset("toy"), 192, type_k="f32")
    assert est.total_bytes == 737_280  # seed 000's measurement
    real = KVCache(get_preset("toy"), batch=1, max_len=192, dtype=torch.float32)
    assert real.nbytes == est.total_bytes


def test_formula_against_hand_allocated_tensors():
    # 4 layers, 6 query heads, 3 KV heads x 16, two sequences, window on layers 0..2
    shape = uniform_shape("t", n_layers=4, n_heads=6, kv_heads=3, head_dim=16, n_swa=40,
                          swa_pattern=4)  # fmt: skip
    total = 0
    for swa in shape.is_swa:
        cells = 40 if swa else 100
        for _ in ("k", "v"):
            t = torch.zeros(2, 3, cells, 16, dtype=torch.float16)
            total += t.element_size() * t.numel()
    assert kv_bytes(shape, 100, type_k="f16", n_seq=2).total_bytes == total
    m = measure_kv_bytes(shape, 100, dtype="f16", n_seq=2)
    assert m.method == "kvlab.engine.KVCache"  # the engine's sliding-window cache
    assert m.measured_bytes == total and m.matches


def test_measure_uses_engine_for_toy():
    m = measure_kv_bytes(shape_from_preset("toy"), 192, dtype="f32")
    assert (m.measured_bytes, m.method) == (737_280, "kvlab.engine.KVCache")


def test_measure_refuses_block_types_and_huge_caches():
    with pytest.raises(ConfigError, match="no q8_0"):
        measure_kv_bytes(shape_from_preset("toy"), 192, dtype="q8_0")
    with pytest.raises(ConfigError, match="at most"):
        measure_kv_bytes(shape_from_preset("llama-3.1-8b"), 32768, dtype="f32")


def test_sliding_window_layers_hold_the_window():
    shape = shape_from_preset("gemma-3-270m")
    est = kv_bytes(shape, 4096, type_k="f16")
    row = 1 * 256 * 2
    assert (est.cells_global, est.cells_swa) == (4096, 512)
    assert est.k_bytes == row * (3 * 4096 + 15 * 512)
    assert est.k_bytes == est.v_bytes
    short = kv_bytes(shape, 100, type_k="f16")
    assert short.total_bytes == 2 * row * 18 * 100  # window not reached: every layer holds L


def test_separate_k_and_v_types():
    shape = shape_from_preset("llama-3.1-8b")
    est = kv_bytes(shape, 1024, type_k="q8_0", type_v="f16")
    assert est.k_bytes == 32 * (1024 // 32 * 34) * 1024
    assert est.v_bytes == 32 * 1024 * 2 * 1024


def test_compare_mha_ratio_four():
    cmp = compare_mha(shape_from_preset("llama-3.1-8b"), 8192)
    assert cmp.ratio == 4.0
    assert cmp.mha.gib == 4.0
    assert "not the whole VRAM" in cmp.reading()


def test_non_positive_context_is_refused():
    with pytest.raises(ConfigError, match="positive"):
        kv_bytes(shape_from_preset("toy"), 0)
    with pytest.raises(ConfigError, match="positive"):
        kv_bytes(shape_from_preset("toy"), 16, n_seq=-1)


def test_gemma_measure_allocates_the_engines_sliding_cache() -> None:
    from kvlab.memory.presets import shape_from_preset
    from kvlab.studies.kv_measure import measure_kv_bytes

    shape = shape_from_preset("gemma-3-270m")
    for context in (300, 4096):  # below and above the 512-token window
        m = measure_kv_bytes(shape, context, dtype="f32")
        assert m.method == "kvlab.engine.KVCache" and m.matches
