"""A launched server's recorded KV budget: kept as JSON, read back, and its knee taken
from the budget the server reports on /metrics."""

from __future__ import annotations

import pytest

from kvlab.errors import ConfigError
from kvlab.memory.knee import Past, Workload, kvlab_knee, llamacpp_knee, vllm_knee
from kvlab.memory.presets import shape_from_preset
from kvlab.memory.served import ServedKv
from kvlab.memory.shapes import ModelShape
from kvlab.memory.vllm_blocks import vllm_block_bytes

GEMMA = shape_from_preset("gemma-3-270m")
WORK = Workload(129, 32)
VLLM_METRICS = ('vllm:cache_config_info{block_size="128",cache_dtype="auto",'
                'num_gpu_blocks="79",prefix_caching_hash_algo="sha256"} 1.0\n'
                'vllm:num_requests_running{engine="0",model_name="g"} 0.0')


def test_a_shape_survives_json() -> None:
    assert ModelShape.from_dict(GEMMA.to_dict()) == GEMMA
    with pytest.raises(ConfigError, match="not a model shape"):
        ModelShape.from_dict({"name": "x"})


def test_a_budget_survives_json_and_an_unknown_pool_is_refused() -> None:
    served = ServedKv("paged-blocks", GEMMA, "bf16", max_seqs=16, block_size=16,
                      prefill_budget=256, kv_blocks=60)
    assert ServedKv.from_dict(served.to_dict()) == served
    with pytest.raises(ConfigError, match="unknown pool 'sglang'"):
        ServedKv("sglang", GEMMA, "bf16", max_seqs=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a served KV budget"):
        ServedKv.from_dict({"server": "kvlab"})


def test_a_manifest_written_before_pools_reads_with_its_kinds_rule() -> None:
    """Manifests before ``pool`` named the server kind (the embedded one as "kvlab")."""
    for old, pool in (("kvlab", "paged-blocks"), ("vllm", "vllm-blocks"),
                      ("llamacpp", "llamacpp-slots")):
        new = ServedKv(pool, GEMMA, "bf16", max_seqs=4)  # type: ignore[arg-type]
        recorded = {k: v for k, v in new.to_dict().items() if k != "pool"}
        assert ServedKv.from_dict({**recorded, "server": old}) == new
    with pytest.raises(ConfigError, match="unknown pool"):
        ServedKv.from_dict({**recorded, "pool": "sglang"})


def test_vllm_reads_its_pool_from_metrics() -> None:
    served = ServedKv("vllm-blocks", GEMMA, "bf16", max_seqs=128)
    knee = served.knee(WORK, VLLM_METRICS)
    assert knee == vllm_knee(GEMMA, WORK, 79, 128)
    assert (knee.fits, knee.per_seq, knee.capacity) == (6, 12, 78)
    assert served.kv_bytes(VLLM_METRICS) == 79 * vllm_block_bytes(GEMMA, 128) == 31_064_064
    with pytest.raises(ConfigError, match="cache_config_info"):
        served.knee(WORK, None)


def test_kvlab_prefers_the_reported_pool_to_the_launch_one() -> None:
    served = ServedKv("paged-blocks", GEMMA, "bf16", max_seqs=16, block_size=16, prefill_budget=256,
                      kv_blocks=104)
    reported = "kvlab:kv_blocks_total 60.0\n"
    assert served.knee(WORK, reported) == kvlab_knee(GEMMA, WORK, 60, dtype="bf16")
    assert served.knee(WORK, reported).fits == 6
    assert served.knee(WORK).fits == 10  # no reading: the pool it was launched with
    assert served.kv_bytes(reported) * 104 == served.kv_bytes() * 60


def test_llamacpp_is_its_command_line() -> None:
    served = ServedKv("llamacpp-slots", GEMMA, "f16", max_seqs=6, n_ctx=3072, type_v="f16")
    knee = served.knee(WORK, "llamacpp:requests_processing 0\n")
    assert knee == llamacpp_knee(GEMMA, WORK, 3072, 6)
    assert (knee.fits, knee.past) == (6, Past.QUEUE)
    assert served.kv_bytes() == knee.budget_bytes
    with pytest.raises(ConfigError, match="-c is not recorded"):
        ServedKv("llamacpp-slots", GEMMA, "f16", max_seqs=6).knee(WORK)


def test_each_server_names_where_its_budget_comes_from_and_its_prefix_pool() -> None:
    toy = shape_from_preset("toy")  # no sliding-window layers: one block group
    vllm = ServedKv("vllm-blocks", toy, "bf16", max_seqs=8, prefix_caching=True)
    kvlab = ServedKv("paged-blocks", toy, "bf16", max_seqs=8, kv_blocks=60, prefix_caching=True)
    llama = ServedKv("llamacpp-slots", GEMMA, "f16", max_seqs=4, n_ctx=2048)
    assert "cache_config_info" in vllm.budget_source(VLLM_METRICS)
    assert kvlab.budget_source() == "its launch (--kv-blocks); no /metrics reading"
    assert llama.budget_source().startswith("its command line (-c, -np)")
    assert vllm.prefix_pool(VLLM_METRICS) == (78, 128)  # the null block aside
    assert kvlab.prefix_pool() == (60, 16)
    with pytest.raises(ConfigError, match="not an LRU of blocks"):
        llama.prefix_pool()
    with pytest.raises(ConfigError, match="launched without prefix caching"):
        ServedKv("paged-blocks", toy, "bf16", max_seqs=8, kv_blocks=60).prefix_pool()
    with pytest.raises(ConfigError, match="from its /metrics"):
        vllm.kv_bytes()
