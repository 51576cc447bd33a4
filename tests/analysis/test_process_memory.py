"""A load point's RSS against the KV budget's bytes and the weights' bytes."""

from __future__ import annotations

from kvlab.analysis.process_memory import point_memory
from kvlab.memory.presets import shape_from_preset
from kvlab.memory.served import ServedKv
from kvlab.rundir import GaugeSample, MemorySample

MIB = 1 << 20
VLLM = ServedKv("vllm-blocks", shape_from_preset("gemma-3-270m"), "bf16", max_seqs=128)
METRICS = GaugeSample(mode="v", capacity=512, load="c=1", t_ns=0, samples={
    'vllm:cache_config_info{block_size="128",num_gpu_blocks="79"}': 1.0})


def _sample(load: str, phase: str, mib: int, mode: str = "v") -> MemorySample:
    return MemorySample(mode=mode, capacity=512, load=load, t_ns=0, rss_bytes=mib * MIB,
                        processes=3, phase=phase)  # type: ignore[arg-type]


def test_rss_is_set_against_kv_and_weights() -> None:
    samples = [_sample("c=1", "start", 900), _sample("c=1", "during", 950),
               _sample("c=1", "end", 920), _sample("c=2", "start", 920),
               _sample("c=2", "end", 930)]
    one, two = point_memory(samples, {("v", 512): VLLM}, {("v", 512): 536 * MIB}, [METRICS])
    assert (one.load, one.samples, one.rss_start, one.rss_max, one.rss_end) == (
        "c=1", 3, 900 * MIB, 950 * MIB, 920 * MIB)
    assert one.kv_bytes == 31_064_064 and one.weights_bytes == 536 * MIB
    assert one.rest == 950 * MIB - 536 * MIB - 31_064_064
    assert two.rss_max == 930 * MIB


def test_without_a_budget_the_kv_is_unknown_and_says_why() -> None:
    (row,) = point_memory([_sample("c=1", "during", 100, mode="x")], {}, {}, [])
    assert row.kv_bytes is None and row.rest is None
    assert row.kv_why == "the server kind records no KV budget"
    (row,) = point_memory([_sample("c=1", "during", 100)], {("v", 512): VLLM}, {}, [])
    assert row.kv_bytes is None and "cache_config_info" in row.kv_why
