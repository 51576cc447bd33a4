"""The paged cache: block accounting, and a forward over it equals the contiguous one."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine import build_model, get_preset
from kvlab.engine.gemma import build_gemma
from kvlab.engine.generate import generate
from kvlab.engine.paged import BlockPool, blocks_held
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.ragged import RaggedBatch
from kvlab.errors import CacheOverflowError, EngineError
from tests.engine.test_gemma import TINY
from tests.rounding import assert_close_up_to_rounding

TOY = get_preset("toy")


def _prompts(vocab: int, lengths: list[int], seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in lengths]


def test_blocks_come_back_when_a_sequence_ends() -> None:
    pool = BlockPool(TOY, n_blocks=8, block_size=4)
    pool.add(0)
    pool.grow(0, 9)  # 9 tokens: 3 blocks of 4
    assert pool.used() == 3
    pool.advance(0, 9)
    pool.grow(0, 3)  # positions 9..11 fit in block 2
    assert pool.used() == 3
    pool.release(0)
    assert pool.used() == 0 and sorted(pool.free[0]) == list(range(8))


def test_a_grow_that_does_not_fit_takes_nothing() -> None:
    pool = BlockPool(TOY, n_blocks=2, block_size=4)
    pool.add(0)
    assert not pool.can_grow(0, 9)
    with pytest.raises(CacheOverflowError, match="free blocks"):
        pool.grow(0, 9)
    assert pool.used() == 0


@pytest.mark.parametrize("length", [1, 3, 4, 5, 8, 13, 30])
def test_sliding_groups_hold_only_the_window(length: int) -> None:
    # TINY: window 4 on two layers, full attention on the third; blocks of 2 tokens.
    pool = BlockPool(TINY, n_blocks=32, block_size=2)
    assert pool.windows == [None, 4]
    pool.add(7)
    pool.grow(7, length)
    pool.advance(7, length)
    assert pool.used(0) == -(-length // 2)
    assert pool.used(1) == blocks_held(length, 4, 2)
    # The blocks still held cover every key the next query (position `length`) sees.
    first_needed = max(0, length - 4 + 1)
    assert pool.cells(7, 1, first_needed, length).numel() == length - first_needed
    if first_needed >= 2:
        with pytest.raises(EngineError, match="freed"):
            pool.cells(7, 1, 0, length)


@pytest.mark.parametrize("preset", ["toy", "toy-gqa", "toy-mqa"])
def test_paged_forward_equals_contiguous_for_each_attention_kind(preset: str) -> None:
    config = get_preset(preset)
    model = build_model(config)
    _check_paged_equals_contiguous(model, config.vocab_size, [5, 17, 40], block_size=16)


def test_paged_forward_equals_contiguous_across_gemma_windows() -> None:
    # Prompts and decodes past the window of 4, with blocks of 2: blocks are freed.
    model = build_gemma(TINY, seed=1)
    _check_paged_equals_contiguous(model, TINY.vocab_size, [3, 6, 11], block_size=2)


@pytest.mark.slow
def test_paged_forward_equals_contiguous_on_gemma_270m(gemma_model) -> None:
    # One prompt past the 512-token window: the sliding layers free their early blocks.
    # Past the window the contiguous ring hands its 512 keys over in ring order and the
    # paged batch in position order (padded, masked), so float32 sums differ by ~2e-5
    # on logits of magnitude ~20: rounding (kvlab.engine.rounding).
    _check_paged_equals_contiguous(gemma_model, 1000, [600], block_size=16, steps=4)


def _check_paged_equals_contiguous(model, vocab: int, lengths: list[int],
                                   block_size: int, steps: int = 6) -> None:
    prompts = _prompts(vocab, lengths)
    refs = [generate(model, p, steps, keep_logits=True) for p in prompts]
    n_keys = max(lengths) + steps
    pool = BlockPool(model.config, n_blocks=64, block_size=block_size)
    kv = PagedKV.for_pool(pool)
    with torch.inference_mode():
        for seq, prompt in enumerate(prompts):  # one prefill per sequence
            pool.add(seq)
            pool.grow(seq, len(prompt))
            batch = RaggedBatch(pool, kv, [(seq, len(prompt))])
            logits = model(torch.tensor([prompt]), batch, last_only=True)
            batch.advance()
            assert_close_up_to_rounding(logits[0, -1], refs[seq].logits[0], model.config,
                                        n_keys)
        rows = list(range(len(prompts)))
        for step in range(1, steps):  # then every sequence decodes in one batch
            for seq in rows:
                pool.grow(seq, 1)
            batch = RaggedBatch(pool, kv, [(seq, 1) for seq in rows])
            ids = torch.tensor([[refs[seq].tokens[step - 1] for seq in rows]])  # (1, R)
            logits = model(ids, batch)  # (1, R, V)
            batch.advance()
            for seq in rows:
                assert_close_up_to_rounding(logits[0, seq], refs[seq].logits[step],
                                            model.config, n_keys)


def test_a_ragged_batch_refuses_a_start_position() -> None:
    pool = BlockPool(TOY, n_blocks=4, block_size=16)
    kv = PagedKV.for_pool(pool)
    pool.add(0)
    pool.grow(0, 2)
    with pytest.raises(EngineError, match="own position"):
        RaggedBatch(pool, kv, [(0, 2)]).positions(2, start_pos=0)
