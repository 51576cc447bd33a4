import pytest

from kvlab.errors import ConfigError
from kvlab.memory import (
    compare_with_log,
    llama_mib,
    pad256,
    parse_kv_cache_log,
    predict_llamacpp_kv,
    shape_from_preset,
)

MIB = 1024 * 1024
GEMMA_F16_ROW = 1 * 256 * 2  # 1 KV head x head dim 256, 2 bytes
GEMMA_Q8_ROW = 256 // 32 * 34

# Observed with llama-server -m gemma-3-270m-q4_k_m.gguf -c 4096 -np 1 -lv 4 (reference s8)
OBSERVED = """\
0.00.412.118 I llama_kv_cache: size =   12.00 MiB (  4096 cells,   3 layers,  1/1 seqs), K (f16):    6.00 MiB, V (f16):    6.00 MiB
0.00.415.002 I llama_kv_cache: size =   15.00 MiB (  1024 cells,  15 layers,  1/1 seqs), K (f16):    7.50 MiB, V (f16):    7.50 MiB
"""  # noqa: E501


@pytest.fixture
def gemma():
    return shape_from_preset("gemma-3-270m")


def _summary(pred):
    return [(c.kind, c.cells, c.n_layers, c.k_bytes, c.v_bytes) for c in pred.caches]


def test_gemma_observation_c4096(gemma):
    pred = predict_llamacpp_kv(gemma, 4096)
    assert _summary(pred) == [
        ("non-SWA", 4096, 3, 6 * MIB, 6 * MIB),
        ("SWA", 1024, 15, 7.5 * MIB, 7.5 * MIB),
    ]
    assert pred.log_lines() == [line.split(" I ", 1)[1] for line in OBSERVED.splitlines()]
    assert compare_with_log(pred, parse_kv_cache_log(OBSERVED)) == []


def test_gemma_c512_and_c2048(gemma):
    # -c 512: the SWA cache is capped by kv_size = 512
    assert _summary(predict_llamacpp_kv(gemma, 512)) == [
        ("non-SWA", 512, 3, 3 * GEMMA_F16_ROW * 512, 3 * GEMMA_F16_ROW * 512),
        ("SWA", 512, 15, 15 * GEMMA_F16_ROW * 512, 15 * GEMMA_F16_ROW * 512),
    ]
    pred = predict_llamacpp_kv(gemma, 2048)
    assert [c.log_line().split("(")[0] for c in pred.caches] == [
        "llama_kv_cache: size =    6.00 MiB ",
        "llama_kv_cache: size =   15.00 MiB ",
    ]
    assert [c.cells for c in pred.caches] == [2048, 1024]  # pad256(min(2048, 512 + 512))


def test_gemma_q8_0_cache(gemma):
    pred = predict_llamacpp_kv(gemma, 4096, type_k="q8_0", type_v="q8_0")
    base, swa = pred.caches
    assert base.k_bytes == 3 * GEMMA_Q8_ROW * 4096 == 3_342_336
    assert swa.v_bytes == 15 * GEMMA_Q8_ROW * 1024 == 4_177_920
    assert (llama_mib(base.k_bytes), llama_mib(swa.size_bytes)) == ("3.19", "7.97")
    assert "K (q8_0):" in base.log_line() and "V (q8_0):" in base.log_line()
    mixed = predict_llamacpp_kv(gemma, 4096, type_k="q8_0", type_v="f16")
    assert mixed.caches[0].v_bytes == 6 * MIB


def test_parallel_slots_not_unified(gemma):
    # -np 4: four streams of pad256(4096 / 4) = 1024 cells
    pred = predict_llamacpp_kv(gemma, 4096, n_seq=4)
    base, swa = pred.caches
    assert (base.cells, base.n_seq_max, base.n_stream) == (1024, 4, 4)
    assert base.k_bytes == 3 * GEMMA_F16_ROW * 1024 * 4
    assert swa.cells == 1024  # pad256(min(1024, 512 x 1 + 512))
    assert "4/4 seqs" in base.log_line()


def test_parallel_slots_unified(gemma):
    # -np 4 -kvu: one pool of 4096 cells; the SWA window counts once per sequence
    pred = predict_llamacpp_kv(gemma, 4096, n_seq=4, kv_unified=True)
    base, swa = pred.caches
    assert (base.cells, base.n_stream) == (4096, 1)
    assert swa.cells == 2560  # pad256(min(4096, 512 x 4 + 512))
    assert swa.k_bytes == 15 * GEMMA_F16_ROW * 2560
    assert "4/1 seqs" in swa.log_line()


def test_context_padding_and_rounding(gemma):
    pred = predict_llamacpp_kv(gemma, 1000, n_seq=3)
    # pad256(1000) = 1024; 1024 / 3 = 341 -> pad256 = 512 per stream; n_ctx becomes 1536
    assert (pred.n_ctx, pred.n_ctx_seq) == (1536, 512)
    small = predict_llamacpp_kv(gemma, 100)
    assert small.n_ubatch == 100  # n_ubatch = min(n_batch = min(-c, -b), -ub)
    assert [c.cells for c in small.caches] == [256, 256]


def test_swa_full_and_ubatch(gemma):
    assert predict_llamacpp_kv(gemma, 4096, swa_full=True).caches[1].cells == 4096
    assert predict_llamacpp_kv(gemma, 4096, n_ubatch=1024).caches[1].cells == 1536


def test_model_without_window_gets_one_cache():
    # reference s5 worked example: 32 layers, 8 KV heads x 128, f16, 8192 cells
    pred = predict_llamacpp_kv(shape_from_preset("llama-3.1-8b"), 8192)
    (cache,) = pred.caches
    assert (cache.kind, cache.k_bytes, cache.v_bytes) == ("kv", 512 * MIB, 512 * MIB)


def test_flash_attn_off_refuses_quantized_v(gemma):
    with pytest.raises(ConfigError, match="flash attention"):
        predict_llamacpp_kv(gemma, 4096, type_v="q8_0", flash_attn=False)


def test_mismatch_is_reported(gemma):
    problems = compare_with_log(predict_llamacpp_kv(gemma, 2048), parse_kv_cache_log(OBSERVED))
    assert len(problems) == 1 and problems[0].startswith("non-SWA cache")
    assert compare_with_log(predict_llamacpp_kv(gemma, 4096), []) != []


def test_bad_arguments(gemma):
    assert pad256(1) == 256 and pad256(256) == 256
    with pytest.raises(ConfigError, match="positive"):
        predict_llamacpp_kv(gemma, 0)
    with pytest.raises(ConfigError, match="positive"):
        predict_llamacpp_kv(gemma, 4096, n_seq=0)
    with pytest.raises(ConfigError, match="unknown cache type"):
        predict_llamacpp_kv(gemma, 4096, type_k="q3_k")
