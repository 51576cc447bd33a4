"""KV log parsing and the predicted-vs-logged comparison (no server needed)."""

from __future__ import annotations

from kvlab.servers.kvlog import (
    MIB,
    PredictedKvCache,
    build_check,
    effective_ubatch,
    parse_kv_lines,
)

# As observed on this machine (reference section 8), with the log's time prefix.
LOG = """\
0.00.101.000 I llama_context: n_seq_max = 1, n_ctx = 4096, n_ctx_seq = 4096
0.00.102.000 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells
0.00.103.000 I llama_kv_cache: size =   12.00 MiB (  4096 cells,   3 layers,  1/1 seqs), \
K (f16):    6.00 MiB, V (f16):    6.00 MiB
0.00.104.000 I llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
0.00.105.000 I llama_kv_cache: size =   15.00 MiB (  1024 cells,  15 layers,  1/1 seqs), \
K (f16):    7.50 MiB, V (f16):    7.50 MiB
"""


def _gemma_4096() -> list[PredictedKvCache]:
    row = 256 * 2  # one KV head of dim 256, f16
    return [
        PredictedKvCache(kind="non-SWA", cells=4096, layers=3,
                         k_bytes=3 * 4096 * row, v_bytes=3 * 4096 * row),
        PredictedKvCache(kind="SWA", cells=1024, layers=15,
                         k_bytes=15 * 1024 * row, v_bytes=15 * 1024 * row),
    ]


def test_parses_both_iswa_caches_in_order() -> None:
    caches = parse_kv_lines(LOG.splitlines())
    assert [(c.kind, c.cells, c.layers) for c in caches] == [
        ("non-SWA", 4096, 3), ("SWA", 1024, 15)]
    assert caches[1].k_mib == 7.5 and caches[1].type_v == "f16"
    assert (caches[0].n_seq_max, caches[0].n_stream) == (1, 1)


def test_plain_cache_without_iswa_is_kind_kv() -> None:
    line = ("llama_kv_cache: size =  256.00 MiB (  2048 cells,  32 layers,  4/4 seqs), "
            "K (q8_0):  136.00 MiB, V (q8_0):  120.00 MiB")
    (cache,) = parse_kv_lines([line])
    assert (cache.kind, cache.n_seq_max, cache.n_stream, cache.type_k) == ("kv", 4, 4, "q8_0")


def test_exact_prediction_matches() -> None:
    check = build_check(_gemma_4096(), parse_kv_lines(LOG.splitlines()),
                        {"type_k": "f16", "type_v": "f16"})
    assert check.match and all(c.match for c in check.caches)
    assert "2 decimals" in check.note


def test_disagreement_is_reported_not_hidden() -> None:
    predicted = _gemma_4096()
    predicted[1] = predicted[1].model_copy(update={"cells": 768, "k_bytes": 15 * 768 * 512})
    check = build_check(predicted, parse_kv_lines(LOG.splitlines()))
    assert not check.match
    swa = next(c for c in check.caches if c.kind == "SWA")
    assert any(m.startswith("cells: predicted 768, logged 1024") for m in swa.mismatches)
    assert not swa.match and next(c for c in check.caches if c.kind == "non-SWA").match


def test_sub_resolution_difference_is_invisible_but_a_visible_one_is_not() -> None:
    predicted = _gemma_4096()
    nudged = [p.model_copy(update={"k_bytes": p.k_bytes + 1000}) for p in predicted]
    assert build_check(nudged, parse_kv_lines(LOG.splitlines())).match  # < 0.005 MiB
    off = [p.model_copy(update={"k_bytes": p.k_bytes + MIB // 10}) for p in predicted]
    assert not build_check(off, parse_kv_lines(LOG.splitlines())).match


def test_missing_log_lines_or_wrong_cache_type_fail() -> None:
    assert not build_check(_gemma_4096(), []).match
    check = build_check(_gemma_4096(), parse_kv_lines(LOG.splitlines()), {"type_k": "q8_0"})
    assert not check.match and "type_k: asked q8_0, logged f16" in check.caches[0].mismatches


def test_effective_ubatch_follows_llama_cpp_batch_rules() -> None:
    assert effective_ubatch(4096, None) == 512
    assert effective_ubatch(256, None) == 256  # n_batch = min(n_ctx, 2048)
    assert effective_ubatch(4096, 4096) == 2048
